#include "directives/redis_directives.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include "directives/conf_params.hpp"

namespace ratelimit {

namespace {

constexpr ngx_msec_t kDefaultTimeout = 50;
constexpr ngx_msec_t kDefaultConnectTimeout = 1000;
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
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%s in ratelimit_redis \"%V\"",
                           url.err ? url.err : "invalid address", &text);
        return conf_error();
    }

    out->text = text;
    out->port = url.port;

    if (url.naddrs > 0) {
        out->addr = url.addrs[0];
    }

    if (url.family != AF_UNIX) {
        if (!copy_cstring(cf->pool, url.host.data, url.host.len,
                          &out->host))
        {
            return conf_error();
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
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "%s in ratelimit_redis \"%V\" in %V:%ui",
                          url.err ? url.err : "host not found", &a.text,
                          &target->file, target->line);
            return conf_error();
        }

        a.addr = url.addrs[0];
    }

    return NGX_CONF_OK;
}

// The first line of `path`, the secret, into `out`.
char *read_password_file(ngx_conf_t *cf, const ngx_str_t &param,
                         ngx_str_t path, ngx_str_t *out)
{
    if (path.len == 0) {
        return invalid_param(cf, param);
    }

    if (ngx_conf_full_name(cf->cycle, &path, 1) != NGX_OK) {
        return conf_error();
    }

    std::FILE *f = std::fopen(reinterpret_cast<const char *>(path.data), "r");
    char line[1024];

    if (f == nullptr) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, errno,
                           "cannot read password_file \"%V\"", &path);
        return conf_error();
    }

    bool read = std::fgets(line, sizeof(line), f) != nullptr;
    std::fclose(f);
    size_t len = read ? std::strcspn(line, "\r\n") : 0;

    if (len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "password_file \"%V\" has no password on its "
                           "first line", &path);
        return conf_error();
    }

    bool copied = copy_cstring(cf->pool, reinterpret_cast<u_char *>(line),
                               len, out);
    ngx_explicit_memzero(line, sizeof(line));
    return copied ? NGX_CONF_OK : conf_error();
}

// A non-empty value for a parameter given once.
char *take_string(ngx_conf_t *cf, const ngx_str_t &param,
                  const ngx_str_t &value, ngx_str_t *slot)
{
    if (slot->data != nullptr) {
        return duplicate_param(cf, param);
    }

    if (value.len == 0) {
        return invalid_param(cf, param);
    }

    *slot = value;
    return NGX_CONF_OK;
}

char *take_msec(ngx_conf_t *cf, const ngx_str_t &param,
                const ngx_str_t &value, ngx_msec_t *slot)
{
    if (*slot != NGX_CONF_UNSET_MSEC) {
        return duplicate_param(cf, param);
    }

    return parse_msec(value, slot) ? NGX_CONF_OK : invalid_param(cf, param);
}

// One NAME=VALUE parameter of ratelimit_redis.
char *take_redis_param(ngx_conf_t *cf, const ngx_str_t &param,
                       RedisTarget *target, ngx_str_t *password_file)
{
    ngx_str_t value;

    if (take_param(param, "db=", &value)) {
        if (target->data.db != NGX_CONF_UNSET) {
            return duplicate_param(cf, param);
        }
        target->data.db = ngx_atoi(value.data, value.len);
        return target->data.db == NGX_ERROR ? invalid_param(cf, param)
                                            : NGX_CONF_OK;
    }

    if (take_param(param, "user=", &value)) {
        return take_string(cf, param, value, &target->data.user);
    }

    if (take_param(param, "password=", &value)) {
        return take_string(cf, param, value, &target->data.password);
    }

    if (take_param(param, "password_file=", &value)) {
        return take_string(cf, param, value, password_file);
    }

    if (take_param(param, "sentinel=", &value)) {
        return take_string(cf, param, value, &target->sentinel_master);
    }

    if (take_param(param, "sentinel_user=", &value)) {
        return take_string(cf, param, value, &target->sentinel.user);
    }

    if (take_param(param, "sentinel_password=", &value)) {
        return take_string(cf, param, value, &target->sentinel.password);
    }

    if (take_param(param, "timeout=", &value)) {
        return take_msec(cf, param, value, &target->timeout);
    }

    if (take_param(param, "connect_timeout=", &value)) {
        return take_msec(cf, param, value, &target->connect_timeout);
    }

    return invalid_param(cf, param);
}

char *conf_fails(ngx_conf_t *cf, const char *message)
{
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%s", message);
    return conf_error();
}

// The combinations of parameters that cannot work.
char *check_redis(ngx_conf_t *cf, RedisTarget *target,
                  const ngx_str_t &password_file)
{
    bool sentinel = target->sentinel_master.data != nullptr;

    if (target->addresses.nelts == 0) {
        return conf_fails(cf, target->cluster
                              ? "ratelimit_redis cluster needs the address "
                                "of a seed node"
                              : "ratelimit_redis needs an address");
    }

    if (target->cluster && (sentinel || target->data.db != NGX_CONF_UNSET)) {
        return conf_fails(cf, "\"cluster\" cannot be combined with "
                              "\"sentinel=\" or \"db=\": a cluster has one "
                              "database and no sentinels");
    }

    if (!sentinel && !target->cluster && target->addresses.nelts > 1) {
        return conf_fails(cf, "ratelimit_redis takes one address, the "
                              "addresses of sentinels with \"sentinel=\", "
                              "or seed nodes after \"cluster\"");
    }

    if (!sentinel && (target->sentinel.user.data != nullptr
                      || target->sentinel.password.data != nullptr))
    {
        return conf_fails(cf, "\"sentinel_user=\" and "
                              "\"sentinel_password=\" require "
                              "\"sentinel=\"");
    }

    if (target->sentinel.user.data != nullptr
        && target->sentinel.password.data == nullptr)
    {
        return conf_fails(cf, "\"sentinel_user=\" requires "
                              "\"sentinel_password=\"");
    }

    if (target->data.password.data != nullptr
        && password_file.data != nullptr)
    {
        return conf_fails(cf, "\"password=\" and \"password_file=\" cannot "
                              "be combined");
    }

    if (target->data.user.data != nullptr
        && target->data.password.data == nullptr
        && password_file.data == nullptr)
    {
        return conf_fails(cf, "\"user=\" requires \"password=\" or "
                              "\"password_file=\"");
    }

    return NGX_CONF_OK;
}

}  // namespace

char *set_redis(ngx_conf_t *cf, ngx_command_t *, void *conf) noexcept
{
    auto *mcf = static_cast<MainConf *>(conf);
    auto *args = static_cast<ngx_str_t *>(cf->args->elts);

    if (mcf->redis != nullptr) {
        return const_cast<char *>("is duplicate");
    }

    auto *target = static_cast<RedisTarget *>(
        ngx_pcalloc(cf->pool, sizeof(RedisTarget)));

    if (target == nullptr
        || ngx_array_init(&target->addresses, cf->pool, 1,
                          sizeof(RedisAddress)) != NGX_OK)
    {
        return conf_error();
    }

    target->data.db = NGX_CONF_UNSET;
    target->timeout = NGX_CONF_UNSET_MSEC;
    target->connect_timeout = NGX_CONF_UNSET_MSEC;
    here(cf, &target->file, &target->line);

    ngx_str_t password_file = ngx_null_string;

    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        char *rc;

        if (i == 1 && args[i].len == 7
            && ngx_strncmp(args[i].data, "cluster", 7) == 0)
        {
            target->cluster = true;
            continue;
        }

        if (args[i].len == 10
            && ngx_strncmp(args[i].data, "cross_slot", 10) == 0)
        {
            if (!target->cluster) {
                return conf_fails(cf, "\"cross_slot\" requires \"cluster\"");
            }
            if (target->cross_slot) {
                return duplicate_param(cf, args[i]);
            }
            target->cross_slot = true;
            continue;
        }

        if (ngx_strlchr(args[i].data, args[i].data + args[i].len, '=')
            == nullptr)
        {
            auto *address = static_cast<RedisAddress *>(
                ngx_array_push(&target->addresses));

            if (address == nullptr) {
                return conf_error();
            }

            ngx_memzero(address, sizeof(RedisAddress));
            rc = parse_address(cf, args[i], address);
        } else {
            rc = take_redis_param(cf, args[i], target, &password_file);
        }

        if (rc != NGX_CONF_OK) {
            return rc;
        }
    }

    if (check_redis(cf, target, password_file) != NGX_CONF_OK) {
        return conf_error();
    }

    if (password_file.data != nullptr
        && read_password_file(cf, args[0], password_file,
                              &target->data.password) != NGX_CONF_OK)
    {
        return conf_error();
    }

    ngx_conf_init_value(target->data.db, 0);
    ngx_conf_init_msec_value(target->timeout, kDefaultTimeout);
    ngx_conf_init_msec_value(target->connect_timeout,
                             kDefaultConnectTimeout);

    mcf->redis = target;
    return NGX_CONF_OK;
}

char *set_tls_file(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept
{
    auto *file = reinterpret_cast<ConfFile *>(static_cast<char *>(conf)
                                              + cmd->offset);
    ngx_str_t path = static_cast<ngx_str_t *>(cf->args->elts)[1];

    if (file->path.data != nullptr) {
        return const_cast<char *>("is duplicate");
    }

    if (path.len == 0 || ngx_conf_full_name(cf->cycle, &path, 1) != NGX_OK
        || !copy_cstring(cf->pool, path.data, path.len, &file->path))
    {
        return conf_error();
    }

    if (access(reinterpret_cast<const char *>(file->path.data), R_OK) != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, errno, "cannot read \"%V\"",
                           &file->path);
        return conf_error();
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
    ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                  "%s \"%V\" cannot be used, in %V:%ui", directive,
                  &file.path, &file.conf_file, file.line);
    return conf_error();
}

// The context every Redis and sentinel connection of the workers shares,
// made as nginx's stream proxy makes its own.
char *make_tls_context(ngx_conf_t *cf, RedisTls *tls)
{
    const ConfFile &cert = tls->certificate;
    const ConfFile &key = tls->certificate_key;

    if ((cert.path.len == 0) != (key.path.len == 0)) {
        const ConfFile &given = cert.path.len > 0 ? cert : key;
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "\"ratelimit_redis_ssl_certificate\" and "
                      "\"ratelimit_redis_ssl_certificate_key\" go "
                      "together, in %V:%ui", &given.conf_file, given.line);
        return conf_error();
    }

    tls->ssl = static_cast<ngx_ssl_t *>(ngx_pcalloc(cf->pool,
                                                    sizeof(ngx_ssl_t)));

    if (tls->ssl == nullptr) {
        return conf_error();
    }

    tls->ssl->log = cf->log;

    if (ngx_ssl_create(tls->ssl, tls->protocols, nullptr) != NGX_OK) {
        return conf_error();
    }

    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(cf->pool, 0);

    if (cln == nullptr) {
        ngx_ssl_cleanup_ctx(tls->ssl);
        return conf_error();
    }

    cln->handler = ngx_ssl_cleanup_ctx;
    cln->data = tls->ssl;

    if (ngx_ssl_ciphers(cf, tls->ssl, &tls->ciphers, 0) != NGX_OK) {
        return conf_error();
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
            return conf_error();
        }
    }

    if (ngx_ssl_client_session_cache(cf, tls->ssl, 1) != NGX_OK) {
        return conf_error();
    }

    return NGX_CONF_OK;
}

#else

char *make_tls_context(ngx_conf_t *cf, RedisTls *)
{
    ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                  "\"ratelimit_redis_ssl\" needs nginx built with TLS");
    return conf_error();
}

#endif

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

    if (mcf->redis == nullptr) {
        return NGX_CONF_OK;
    }

    if (mcf->redis->cluster
        && (ngx_strlchr(mcf->prefix.data, mcf->prefix.data + mcf->prefix.len,
                        '{') != nullptr
            || ngx_strlchr(mcf->prefix.data,
                           mcf->prefix.data + mcf->prefix.len, '}')
               != nullptr))
    {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "ratelimit_prefix \"%V\" cannot hold \"{\" or \"}\" "
                      "with a cluster: keys put the subject in a hash tag, "
                      "in %V:%ui", &mcf->prefix, &mcf->redis->file,
                      mcf->redis->line);
        return conf_error();
    }

    find_resolver(cf, mcf);

    if (resolve_addresses(cf, mcf->redis, mcf->resolver != nullptr)
        != NGX_CONF_OK)
    {
        return conf_error();
    }

    if (tls.enable == 0) {
        return NGX_CONF_OK;
    }

    const RedisAddress &first = mcf->redis->first();

    if (tls.name.data == nullptr) {
        tls.name = first.host;
    } else if (!copy_cstring(cf->pool, tls.name.data, tls.name.len,
                             &tls.name))
    {
        return conf_error();
    }

    if (tls.verify && tls.name.len == 0) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "\"ratelimit_redis_ssl_verify\" needs a name to check "
                      "the certificate against: set "
                      "\"ratelimit_redis_ssl_name\", in %V:%ui",
                      &mcf->redis->file, mcf->redis->line);
        return conf_error();
    }

    ngx_conf_init_value(tls.server_name, first.named ? 1 : 0);

    return make_tls_context(cf, &tls);
}

}  // namespace ratelimit
