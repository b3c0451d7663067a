// The part of a connection between its connect and its first command: the
// TLS handshake (the certificate's checks, the session kept for the next
// connect) and the AUTH and SELECT sent ahead of every command.
#include "redis/redis_connection.hpp"

namespace ratelimit {

namespace {

const char kAuth[] = "AUTH";
const char kSelect[] = "SELECT";

#if (NGX_SSL)

// The certificate is for `name`: an IP address among its IP names (what a
// Redis reached by address presents), or a host name as nginx checks one.
bool name_matches(ngx_connection_t *c, const ngx_str_t &name)
{
    X509 *cert = SSL_get_peer_certificate(c->ssl->connection);

    if (cert == nullptr) {
        return false;
    }

    int ip = X509_check_ip_asc(cert, reinterpret_cast<char *>(name.data), 0);
    X509_free(cert);

    // -2: not an IP address.
    if (ip != -2) {
        return ip == 1;
    }

    return ngx_ssl_check_host(c, const_cast<ngx_str_t *>(&name)) == NGX_OK;
}

bool is_ip_address(const ngx_str_t &name)
{
    ngx_sockaddr_t sa;
    socklen_t len;

    return make_sockaddr({reinterpret_cast<char *>(name.data), name.len}, 1,
                         &sa, &len);
}

#endif

}  // namespace

#if (NGX_SSL)

bool RedisConnection::start_tls() noexcept
{
    const RedisTls &tls = *peer_.tls;

    if (ngx_ssl_create_connection(tls.ssl, c_, NGX_SSL_CLIENT) != NGX_OK) {
        fail("cannot connect to", "no memory for TLS");
        return false;
    }

    // The command buffer grows while a write waits: OpenSSL must take the
    // rest of it from wherever it has moved.
    SSL_set_mode(c_->ssl->connection, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER
                                      | SSL_MODE_ENABLE_PARTIAL_WRITE);

    const ngx_str_t &name = tls_name();

    // RFC 6066: the server name is a host name, never an IP address.
    if (tls.server_name == 1 && name.len > 0 && !is_ip_address(name)
        && SSL_set_tlsext_host_name(c_->ssl->connection,
                                    reinterpret_cast<char *>(name.data))
           == 0)
    {
        fail("cannot connect to", "cannot set the TLS server name");
        return false;
    }

    if (session_ != nullptr && ngx_ssl_set_session(c_, session_) != NGX_OK) {
        fail("cannot connect to", "cannot reuse the TLS session");
        return false;
    }

    c_->ssl->save_session = on_new_session;

    ngx_int_t rc = ngx_ssl_handshake(c_);

    if (rc == NGX_AGAIN) {
        c_->ssl->handler = on_handshake;
        return true;
    }

    on_handshake(c_);
    return true;
}

// The name the certificate must be for, and the SNI: the one configured
// for every server, or this server's own host.
const ngx_str_t &RedisConnection::tls_name() const noexcept
{
    return peer_.tls->name.len > 0 ? peer_.tls->name : peer_.host;
}

void RedisConnection::on_handshake(ngx_connection_t *c) noexcept
{
    auto *conn = static_cast<RedisConnection *>(c->data);
    const RedisTls &tls = *conn->peer_.tls;

    if (!c->ssl->handshaked) {
        conn->fail("cannot connect to", conn->captured());
        return;
    }

    if (tls.verify) {
        long rc = SSL_get_verify_result(c->ssl->connection);
        char why[320];

        if (rc != X509_V_OK) {
            *ngx_snprintf(reinterpret_cast<u_char *>(why), sizeof(why) - 1,
                          "certificate verify failed (%l: %s)", rc,
                          X509_verify_cert_error_string(rc)) = '\0';
            conn->fail("cannot connect to", why);
            return;
        }

        const ngx_str_t &name = conn->tls_name();

        if (!name_matches(c, name)) {
            *ngx_snprintf(reinterpret_cast<u_char *>(why), sizeof(why) - 1,
                          "certificate does not match \"%V\"", &name)
                = '\0';
            conn->fail("cannot connect to", why);
            return;
        }
    }

    on_new_session(c);
    conn->start_io();
}

// After the handshake (TLS 1.2), or when a TLS 1.3 ticket arrives: the
// session to resume on the next connect.
void RedisConnection::on_new_session(ngx_connection_t *c) noexcept
{
    auto *conn = static_cast<RedisConnection *>(c->data);
    ngx_ssl_session_t *session = ngx_ssl_get_session(c);

    if (session == nullptr) {
        return;
    }

    if (conn->session_ != nullptr) {
        ngx_ssl_free_session(conn->session_);
    }

    conn->session_ = session;
}

#else

bool RedisConnection::start_tls() noexcept
{
    fail("cannot connect to", "nginx was built without TLS");
    return false;
}

#endif

bool RedisConnection::tls_resumed() const noexcept
{
#if (NGX_SSL)
    return state_ == State::kOpen && c_ != nullptr && c_->ssl != nullptr
           && SSL_session_reused(c_->ssl->connection);
#else
    return false;
#endif
}

// AUTH and SELECT go first on the connection, so every command after them
// runs authenticated and in the right database without waiting for them.
void RedisConnection::authenticate() noexcept
{
    const RedisCredentials *id = peer_.credentials;

    if (id == nullptr) {
        return;
    }

    if (id->password.len > 0) {
        const char *argv[3];
        size_t lens[3];
        int argc = 0;

        argv[argc] = kAuth;
        lens[argc++] = sizeof(kAuth) - 1;

        if (id->user.len > 0) {
            argv[argc] = reinterpret_cast<const char *>(id->user.data);
            lens[argc++] = id->user.len;
        }

        argv[argc] = reinterpret_cast<const char *>(id->password.data);
        lens[argc++] = id->password.len;

        if (!send_argv(argc, argv, lens, on_auth_reply, this)) {
            fail("cannot connect to", "no memory for AUTH");
            return;
        }
    }

    if (id->db != 0) {
        u_char db[NGX_INT_T_LEN];
        const char *argv[2] = {kSelect, reinterpret_cast<const char *>(db)};
        size_t lens[2] = {sizeof(kSelect) - 1,
                          static_cast<size_t>(ngx_sprintf(db, "%i", id->db)
                                              - db)};

        if (!send_argv(2, argv, lens, on_auth_reply, this)) {
            fail("cannot connect to", "no memory for SELECT");
        }
    }
}

// An error names the step it answers ("WRONGPASS ...", "NOAUTH ...",
// "ERR DB index is out of range"); the secret is never in it.
void RedisConnection::on_auth_reply(void *data, const Reply *reply) noexcept
{
    auto *conn = static_cast<RedisConnection *>(data);

    if (reply == nullptr || reply->type != Reply::Type::kError) {
        return;
    }

    if (conn->throttle_->allow()) {
        LoggedText error(reply->text);
        ngx_log_error(NGX_LOG_ERR, conn->log_, 0,
                      "ratelimit: redis at \"%V\" refused AUTH: %V",
                      &conn->peer_.display, error.str());
    }

    conn->fail(nullptr, nullptr);
}

}  // namespace ratelimit
