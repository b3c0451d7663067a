#include "directives/redis_directives.hpp"

#include <cerrno>
#include <new>
#include <unistd.h>

#include "base/fleet_secret.hpp"
#include "directives/conf_params.hpp"
#include "directives/conf_places.hpp"
#include "params/redis_params.hpp"

namespace ratelimit {

namespace {

constexpr int kDefaultRedisPort = 6379;
constexpr ngx_msec_t kDefaultResolverTimeout = 30000;  // nginx's own

// A leaf, the intermediate CA that signed it and the root: what managed
// services present.  nginx's proxy default, 1, rejects that chain.
constexpr ngx_int_t kDefaultVerifyDepth = 4;

// Where the directive being parsed stands.
void here(ngx_conf_t *cf, ngx_str_t *file, ngx_uint_t *line)
{
    *file = cf->conf_file->file.name;
    *line = cf->conf_file->line;
}

// Reads an address.  A host name is resolved once the http block is read
// (resolve_addresses()), when it is known whether nginx's resolver will do
// it instead on each reconnect, without blocking.
char *parse_address(ngx_conf_t *cf, const ngx_str_t &text, RedisAddress *out)
{
    ngx_url_t url;
    ngx_memzero(&url, sizeof(ngx_url_t));
    url.url = text;
    url.default_port = kDefaultRedisPort;
    url.no_resolve = 1;

    if (ngx_parse_url(cf->pool, &url) != NGX_OK) {
        return directive_error(cf, "%s in ratelimit_redis \"%V\"",
                               url.err ? url.err : "invalid address", &text);
    }

    out->text = text;
    out->port = url.port;

    if (url.naddrs > 0) {
        out->addr = url.addrs[0];
    }

    if (url.family != AF_UNIX) {
        // "[::1]": the address is what a certificate's IP name holds.
        bool bracketed = url.host.len > 2 && url.host.data[0] == '['
                         && url.host.data[url.host.len - 1] == ']';

        if (!copy_cstring(cf->pool, url.host.data + (bracketed ? 1 : 0),
                          url.host.len - (bracketed ? 2 : 0), &out->host))
        {
            return nginx_logged_error();
        }

        out->named = url.host.len > 0 && url.host.data[0] != '['
                     && ngx_inet_addr(url.host.data, url.host.len)
                        == INADDR_NONE;
    }

    return NGX_CONF_OK;
}

// The addresses the workers connect to as found now: every sentinel, and
// Redis itself unless it is a host name that nginx's resolver looks up.
char *resolve_addresses(ngx_conf_t *cf, RedisTarget *target,
                        bool by_resolver)
{
    auto *addresses = static_cast<RedisAddress *>(target->addresses.elts);

    for (ngx_uint_t i = 0; i < target->addresses.nelts; i++) {
        RedisAddress &a = addresses[i];

        if (a.addr.sockaddr != nullptr
            || (by_resolver && target->sentinel_master.len == 0
                && !target->cluster))
        {
            continue;
        }

        ngx_url_t url;
        ngx_memzero(&url, sizeof(ngx_url_t));
        url.url = a.text;
        url.default_port = kDefaultRedisPort;

        if (ngx_parse_url(cf->pool, &url) != NGX_OK || url.naddrs == 0) {
            return after_block_error(cf, "%s in ratelimit_redis \"%V\" in "
                                         "%V:%ui",
                                     url.err ? url.err : "host not found",
                                     &a.text, &target->file, target->line);
        }

        a.addr = url.addrs[0];
    }

    return NGX_CONF_OK;
}

// The file's permission bits as "0640".
void mode_text(const ngx_file_info_t &info, u_char out[5])
{
    ngx_uint_t bits = ngx_file_access(&info);

    out[0] = '0';

    for (int i = 3; i >= 1; i--) {
        out[i] = static_cast<u_char>('0' + (bits & 7));
        bits >>= 3;
    }

    out[4] = '\0';
}

// A file of `ratelimit_redis` that holds a secret on its first line.
struct SecretFile {
    const char *param;  // "password_file"
    const char *what;   // "password"
    const char *limit;  // why kMaxPasswordSize bytes is the most
};

const SecretFile kPasswordFile = {"password_file", "password",
                                  "the most Redis takes before AUTH"};
const SecretFile kFleetSecretFile = {"fleet_secret_file", "secret",
                                     "the most this module takes"};

// The secret of the file `path` names (password_file_line()) into `out`.
// Warns when its group or others have access to it: a secret kept out of
// nginx.conf is no better kept there.
char *read_secret_file(ngx_conf_t *cf, const SecretFile &file,
                       ngx_str_t path, ngx_str_t *out)
{
    if (ngx_conf_full_name(cf->cycle, &path, 1) != NGX_OK) {
        return nginx_logged_error();
    }

    ngx_fd_t fd = ngx_open_file(path.data, NGX_FILE_RDONLY, NGX_FILE_OPEN,
                                0);

    if (fd == NGX_INVALID_FILE) {
        return directive_errno_error(cf, ngx_errno, "cannot read %s \"%V\"",
                                     file.param, &path);
    }

    // One byte past the longest password tells a longer one.
    constexpr size_t kHeadSize = kMaxPasswordSize + 1;
    auto *head = static_cast<u_char *>(ngx_alloc(kHeadSize, cf->log));
    ngx_file_info_t info;
    ngx_err_t err = 0;
    size_t len = 0;

    if (head == nullptr) {
        ngx_close_file(fd);
        return nginx_logged_error();
    }

    if (ngx_fd_info(fd, &info) == NGX_FILE_ERROR) {
        err = ngx_errno;
    }

    while (err == 0 && len < kHeadSize) {
        ssize_t n = ngx_read_fd(fd, head + len, kHeadSize - len);

        if (n <= 0) {
            err = n < 0 ? ngx_errno : 0;
            break;
        }

        len += static_cast<size_t>(n);
    }

    ngx_close_file(fd);
    PasswordLine line = password_file_line(
        {reinterpret_cast<const char *>(head), len});
    char *rv = NGX_CONF_OK;

    if (err != 0) {
        rv = directive_errno_error(cf, err, "cannot read %s \"%V\"",
                                   file.param, &path);
    } else if (line.too_long) {
        rv = directive_error(cf, "%s \"%V\" has a %s longer than %uz "
                                 "bytes, %s", file.param, &path, file.what,
                             kMaxPasswordSize, file.limit);
    } else if (line.password.empty()) {
        rv = directive_error(cf, "%s \"%V\" has no %s on its first line",
                             file.param, &path, file.what);
    } else if (!copy_cstring(cf->pool,
                             reinterpret_cast<const u_char *>(
                                 line.password.data()),
                             line.password.size(), out))
    {
        rv = nginx_logged_error();
    }

    ngx_explicit_memzero(head, kHeadSize);
    ngx_free(head);

    if (rv == NGX_CONF_OK && (ngx_file_access(&info) & 077) != 0) {
        u_char mode[5];
        mode_text(info, mode);
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0, "%s \"%V\" has mode %s: "
                           "its group or others have access to it",
                           file.param, &path, mode);
    }

    return rv;
}

// The fleet secret of the file `path` names, and the keys derived from it
// (base/fleet_secret.hpp) into the target; the secret itself is not kept.
char *read_fleet_secret(ngx_conf_t *cf, ngx_str_t path, RedisTarget *target)
{
    ngx_str_t secret;
    char *rv = read_secret_file(cf, kFleetSecretFile, path, &secret);

    if (rv != NGX_CONF_OK) {
        return rv;
    }

    FleetKeys keys = derive_fleet_keys(view(secret));
    ngx_explicit_memzero(secret.data, secret.len);
    bool copied = copy_cstring(cf->pool, keys.tag_key.data(),
                               keys.tag_key.size(), &target->tag_key)
                  && copy_cstring(cf->pool,
                                  reinterpret_cast<u_char *>(keys.wake_key),
                                  sizeof(keys.wake_key), &target->wake_key);
    ngx_explicit_memzero(&keys, sizeof(keys));
    return copied ? NGX_CONF_OK : nginx_logged_error();
}

// The addresses parse_redis_params() found before the token of its error,
// if it has one (all of them if not), read into the target's: an address
// nginx cannot read is reported before the errors of later tokens.
char *add_addresses(ngx_conf_t *cf, const ParamResult<RedisParams> &parsed,
                    RedisTarget *target)
{
    for (const RedisAddressParam &param : parsed.params.addresses) {
        if (parsed.error && param.token >= parsed.error->token) {
            break;
        }

        auto *address = static_cast<RedisAddress *>(
            ngx_array_push(&target->addresses));

        if (address == nullptr) {
            return nginx_logged_error();
        }

        ngx_memzero(address, sizeof(RedisAddress));
        char *rv = parse_address(cf, arg_string(param.text), address);

        if (rv != NGX_CONF_OK) {
            return rv;
        }
    }

    return parsed.error ? param_error(cf, *parsed.error) : NGX_CONF_OK;
}

// Strings parse_redis_params() read: views of the directive's arguments,
// which nginx keeps NUL-terminated and as long as the configuration.
void set_target_params(const RedisParams &p, RedisTarget *target)
{
    target->cluster = p.cluster;
    target->cross_slot = p.cross_slot;
    target->sentinel_master = arg_string(p.sentinel_master);
    target->data.user = arg_string(p.user);
    target->data.password = arg_string(p.password);
    target->data.db = static_cast<ngx_int_t>(p.db);
    target->sentinel.user = arg_string(p.sentinel_user);
    target->sentinel.password = arg_string(p.sentinel_password);
    target->timeout = static_cast<ngx_msec_t>(p.timeout_ms);
    target->connect_timeout = static_cast<ngx_msec_t>(p.connect_timeout_ms);
    target->packed = p.packed;
}

// `ratelimit_redis` as parse_redis_params() read it, into the
// configuration.
char *add_redis_target(ngx_conf_t *cf, MainConf *mcf,
                       const ParamResult<RedisParams> &parsed)
{
    auto *target = static_cast<RedisTarget *>(
        ngx_pcalloc(cf->pool, sizeof(RedisTarget)));

    if (target == nullptr
        || ngx_array_init(&target->addresses, cf->pool, 1,
                          sizeof(RedisAddress)) != NGX_OK)
    {
        return nginx_logged_error();
    }

    char *rv = add_addresses(cf, parsed, target);

    if (rv != NGX_CONF_OK) {
        return rv;
    }

    set_target_params(parsed.params, target);
    ngx_str_t password_file = arg_string(parsed.params.password_file);

    if (password_file.len > 0) {
        rv = read_secret_file(cf, kPasswordFile, password_file,
                              &target->data.password);

        if (rv != NGX_CONF_OK) {
            return rv;
        }
    }

    ngx_str_t fleet_secret_file = arg_string(
        parsed.params.fleet_secret_file);

    if (fleet_secret_file.len > 0) {
        rv = read_fleet_secret(cf, fleet_secret_file, target);

        if (rv != NGX_CONF_OK) {
            return rv;
        }
    } else if (target->cluster) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0, "\"cluster\" without "
                           "\"fleet_secret_file=\": clients that choose "
                           "their keys can put them all in one hash slot; "
                           "give every server the same secret file");
    }

    here(cf, &target->file, &target->line);
    mcf->redis = target;
    return NGX_CONF_OK;
}

}  // namespace

char *set_redis(ngx_conf_t *cf, ngx_command_t *, void *conf) noexcept
{
    auto *mcf = static_cast<MainConf *>(conf);

    if (mcf->redis != nullptr) {
        return duplicate_directive(cf);
    }

    try {
        return add_redis_target(cf, mcf,
                                parse_redis_params(directive_tokens(cf)));
    } catch (const std::bad_alloc &) {
        return directive_error(cf, "out of memory");
    }
}

char *set_tls_file(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept
{
    auto *file = reinterpret_cast<ConfFile *>(static_cast<char *>(conf)
                                              + cmd->offset);
    ngx_str_t path = static_cast<ngx_str_t *>(cf->args->elts)[1];

    if (file->path.data != nullptr) {
        return duplicate_directive(cf);
    }

    if (path.len == 0) {
        return directive_error(cf, "\"%V\" needs the name of a file",
                               &cmd->name);
    }

    if (ngx_conf_full_name(cf->cycle, &path, 1) != NGX_OK
        || !copy_cstring(cf->pool, path.data, path.len, &file->path))
    {
        return nginx_logged_error();
    }

    if (access(reinterpret_cast<const char *>(file->path.data), R_OK) != 0) {
        return directive_errno_error(cf, errno, "cannot read \"%V\"",
                                     &file->path);
    }

    here(cf, &file->conf_file, &file->line);
    return NGX_CONF_OK;
}

#if (NGX_SSL)

ngx_conf_bitmask_t tls_protocols[] = {
    {ngx_string("TLSv1"), NGX_SSL_TLSv1},
    {ngx_string("TLSv1.1"), NGX_SSL_TLSv1_1},
    {ngx_string("TLSv1.2"), NGX_SSL_TLSv1_2},
    {ngx_string("TLSv1.3"), NGX_SSL_TLSv1_3},
    {ngx_null_string, 0},
};

#else

ngx_conf_bitmask_t tls_protocols[] = {
    {ngx_null_string, 0},
};

#endif

void init_redis_defaults(MainConf *mcf) noexcept
{
    mcf->tls.enable = NGX_CONF_UNSET;
    mcf->tls.verify = NGX_CONF_UNSET;
    mcf->tls.verify_depth = NGX_CONF_UNSET;
    mcf->tls.server_name = NGX_CONF_UNSET;
}

namespace {

#if (NGX_SSL)

char *tls_file_fails(ngx_conf_t *cf, const char *directive,
                     const ConfFile &file)
{
    return after_block_error(cf, "%s \"%V\" cannot be used, in %V:%ui",
                             directive, &file.path, &file.conf_file,
                             file.line);
}

// The context every Redis and sentinel connection of the workers shares,
// made as nginx's stream proxy makes its own.
char *make_tls_context(ngx_conf_t *cf, RedisTls *tls)
{
    const ConfFile &cert = tls->certificate;
    const ConfFile &key = tls->certificate_key;

    if ((cert.path.len == 0) != (key.path.len == 0)) {
        const ConfFile &given = cert.path.len > 0 ? cert : key;
        return after_block_error(cf, "\"ratelimit_redis_ssl_certificate\" "
                                     "and \"ratelimit_redis_ssl_certificate"
                                     "_key\" go together, in %V:%ui",
                                 &given.conf_file, given.line);
    }

    tls->ssl = static_cast<ngx_ssl_t *>(ngx_pcalloc(cf->pool,
                                                    sizeof(ngx_ssl_t)));

    if (tls->ssl == nullptr) {
        return nginx_logged_error();
    }

    tls->ssl->log = cf->log;

    if (ngx_ssl_create(tls->ssl, tls->protocols, nullptr) != NGX_OK) {
        return nginx_logged_error();
    }

    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(cf->pool, 0);

    if (cln == nullptr) {
        ngx_ssl_cleanup_ctx(tls->ssl);
        return nginx_logged_error();
    }

    cln->handler = ngx_ssl_cleanup_ctx;
    cln->data = tls->ssl;

    if (ngx_ssl_ciphers(cf, tls->ssl, &tls->ciphers, 0) != NGX_OK) {
        return nginx_logged_error();
    }

    if (cert.path.len > 0
        && ngx_ssl_certificate(cf, tls->ssl,
                               const_cast<ngx_str_t *>(&cert.path),
                               const_cast<ngx_str_t *>(&key.path), nullptr)
           != NGX_OK)
    {
        return tls_file_fails(cf, "ratelimit_redis_ssl_certificate", cert);
    }

    if (tls->verify) {
        ngx_str_t ca = tls->trusted_certificate.path;

        if (ngx_ssl_trusted_certificate(cf, tls->ssl, &ca,
                                        tls->verify_depth) != NGX_OK)
        {
            return tls_file_fails(cf,
                                  "ratelimit_redis_ssl_trusted_certificate",
                                  tls->trusted_certificate);
        }

        if (ca.len == 0
            && SSL_CTX_set_default_verify_paths(tls->ssl->ctx) != 1)
        {
            ngx_ssl_error(NGX_LOG_EMERG, cf->log, 0,
                          const_cast<char *>(
                              "cannot load the system's CA certificates "
                              "for \"ratelimit_redis_ssl_verify\""));
            return nginx_logged_error();
        }
    }

    if (ngx_ssl_client_session_cache(cf, tls->ssl, 1) != NGX_OK) {
        return nginx_logged_error();
    }

    return NGX_CONF_OK;
}

#else

char *make_tls_context(ngx_conf_t *cf, RedisTls *)
{
    return after_block_error(cf, "\"ratelimit_redis_ssl\" needs nginx built "
                                 "with TLS");
}

#endif

// With ratelimit_redis_ssl off, the other ratelimit_redis_ssl_* directives
// change nothing: each given says so, at its line.
void warn_tls_ignored(ngx_conf_t *cf, const MainConf *mcf)
{
    static const char kTlsPrefix[] = "ratelimit_redis_ssl_";
    constexpr size_t kTlsPrefixLen = sizeof(kTlsPrefix) - 1;

    if (mcf->tls.enable != 0 || mcf->places == nullptr) {
        return;
    }

    const auto *places = static_cast<const ConfPlace *>(mcf->places->elts);

    for (ngx_uint_t i = 0; i < mcf->places->nelts; i++) {
        const ConfPlace &p = places[i];

        if (p.directive.len > kTlsPrefixLen
            && ngx_strncmp(p.directive.data, kTlsPrefix, kTlsPrefixLen) == 0)
        {
            after_block_warning(cf, "\"%V\" ignored: ratelimit_redis_ssl "
                                    "is off in %V:%ui",
                                &p.directive, &p.file, p.line);
        }
    }
}

// A cluster's keys put the subject in a hash tag: the prefix cannot hold
// one.  Told at the prefix's line.
char *check_cluster_prefix(ngx_conf_t *cf, const MainConf *mcf)
{
    const ngx_str_t &prefix = mcf->prefix;

    if (!mcf->redis->cluster
        || (ngx_strlchr(prefix.data, prefix.data + prefix.len, '{')
                == nullptr
            && ngx_strlchr(prefix.data, prefix.data + prefix.len, '}')
                   == nullptr))
    {
        return NGX_CONF_OK;
    }

    const ConfPlace *place = find_place(mcf, "ratelimit_prefix");

    return after_block_error(cf, "ratelimit_prefix \"%V\" cannot hold "
                                 "\"{\" or \"}\" with a cluster: keys "
                                 "put the subject in a hash tag, in "
                                 "%V:%ui", &prefix,
                             place ? &place->file : &mcf->redis->file,
                             place ? place->line : mcf->redis->line);
}

// nginx's `resolver` of the http block, if one is configured there (read
// before this, with the block).
void find_resolver(ngx_conf_t *cf, MainConf *mcf)
{
    auto *clcf = static_cast<ngx_http_core_loc_conf_t *>(
        ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module));

    if (clcf->resolver == nullptr || clcf->resolver->connections.nelts == 0) {
        return;
    }

    mcf->resolver = clcf->resolver;
    // Merged into the servers only: unset here unless given.
    mcf->resolver_timeout = clcf->resolver_timeout == NGX_CONF_UNSET_MSEC
                            ? kDefaultResolverTimeout
                            : clcf->resolver_timeout;
}

}  // namespace

char *finish_redis_conf(ngx_conf_t *cf, MainConf *mcf) noexcept
{
    RedisTls &tls = mcf->tls;

    ngx_conf_init_value(tls.enable, 0);
    ngx_conf_init_value(tls.verify, 1);
    ngx_conf_init_value(tls.verify_depth, kDefaultVerifyDepth);

    if (tls.protocols == 0) {
#if (NGX_SSL)
        tls.protocols = NGX_CONF_BITMASK_SET | NGX_SSL_TLSv1_2
                        | NGX_SSL_TLSv1_3;
#endif
    }

    if (tls.ciphers.data == nullptr) {
        ngx_str_set(&tls.ciphers, "DEFAULT");
    }

    warn_tls_ignored(cf, mcf);

    if (mcf->redis == nullptr) {
        return NGX_CONF_OK;
    }

    char *rv = check_cluster_prefix(cf, mcf);

    if (rv != NGX_CONF_OK) {
        return rv;
    }

    find_resolver(cf, mcf);
    rv = resolve_addresses(cf, mcf->redis, mcf->resolver != nullptr);

    if (rv != NGX_CONF_OK) {
        return rv;
    }

    if (tls.enable == 0) {
        return NGX_CONF_OK;
    }

    const RedisTarget &target = *mcf->redis;

    if (tls.name.data != nullptr
        && !copy_cstring(cf->pool, tls.name.data, tls.name.len, &tls.name))
    {
        return nginx_logged_error();
    }

    // Without one name for all, each server is checked against its own
    // host (a cluster's nodes and a sentinel's master against the address
    // announced): a unix socket has none.
    const auto *addresses =
        static_cast<const RedisAddress *>(target.addresses.elts);

    for (ngx_uint_t i = 0; i < target.addresses.nelts; i++) {
        if (tls.verify && tls.name.len == 0 && addresses[i].host.len == 0) {
            return after_block_error(cf, "\"ratelimit_redis_ssl_verify\" "
                                         "needs a name to check the "
                                         "certificate of \"%V\" against: "
                                         "set \"ratelimit_redis_ssl_name\", "
                                         "in %V:%ui", &addresses[i].text,
                                     &target.file, target.line);
        }
    }

    ngx_conf_init_value(tls.server_name, target.first().named ? 1 : 0);

    return make_tls_context(cf, &tls);
}

}  // namespace ratelimit
