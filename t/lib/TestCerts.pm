package TestCerts;

# Certificates for the TLS tests, made at run time with the openssl CLI
# (EC P-256 keys: fast to make).  Every file is world-readable, as nginx
# workers run as nobody.
#
#   my $pki = TestCerts->new("$tmp/pki");
#   $pki->{ca}               root CA certificate (the trust anchor to configure)
#   $pki->{int}              intermediate CA certificate (signed by the root)
#   $pki->{server_chain}     leaf (signed by the intermediate) + intermediate,
#   $pki->{server_key}       SAN IP:127.0.0.1, DNS:redis.test, DNS:localhost
#   $pki->{expired_chain}    same names and issuer, valid 2020-01-01..2021-01-01
#   $pki->{expired_key}
#   $pki->{server_root}      same names, signed by the root directly
#   $pki->{server_root_key}
#   $pki->{stranger_server}  same names, signed by the unrelated CA
#   $pki->{stranger_server_key}
#   $pki->{other_ca}         an unrelated root CA
#   $pki->{client}           client certificate (signed by the root, clientAuth)
#   $pki->{client_key}
#   $pki->{other_client}     client certificate signed by the unrelated CA
#   $pki->{other_client_key}
#
#   $pki->leaf($name, $san)  a server leaf signed by the root, for the
#       subjectAltName $san only ('IP:127.0.0.2'): ($cert, $key)
#   $pki->redis_tls_args($tls_port, auth_clients => 'no'|'yes', expired => 1)
#       redis-server arguments for a TLS port next to the plain one
#   TestCerts::openssl(@argv)   run openssl, die with its output on failure

use strict;
use warnings;
use File::Basename qw(dirname);

sub _write {
    my ($path, $text) = @_;
    open my $fh, '>', $path or die "open $path: $!";
    print {$fh} $text;
    close $fh or die "close $path: $!";
    chmod 0644, $path;
}

sub _slurp {
    my ($path) = @_;
    open my $fh, '<', $path or die "open $path: $!";
    local $/;
    return scalar <$fh>;
}

# Runs openssl with @argv; dies with the command and its output on failure.
sub openssl {
    my (@argv) = @_;
    my $out = `openssl @{[ map { _q($_) } @argv ]} 2>&1`;
    die "openssl @argv failed:\n$out" if $?;
    return $out;
}

sub _q { my $s = shift; $s =~ s/'/'\\''/g; "'$s'" }

my @EC = ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes');

sub new {
    my ($class, $dir) = @_;
    mkdir $dir unless -d $dir;
    chmod 0755, $dir;
    my $self = bless { dir => $dir }, $class;

    _write("$dir/ext.cnf", <<'EOF');
[req]
distinguished_name = dn
[dn]
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:redis.test, DNS:localhost
[client_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
EOF

    # two unrelated self-signed roots
    for my $ca (['ca', 'RL Test Root CA'], ['other_ca', 'RL Unrelated CA']) {
        my ($n, $cn) = @$ca;
        openssl('req', '-x509', @EC, '-keyout', "$dir/$n.key", '-out', "$dir/$n.crt",
            '-days', 30, '-subj', "/CN=$cn", '-config', "$dir/ext.cnf",
            '-extensions', 'ca_ext');
    }

    # intermediate CA signed by the root
    $self->_csr('int', 'RL Test Intermediate CA');
    $self->_sign('int', 'ca', 'ca_ext');

    # server leaf signed by the intermediate; the chain file holds both
    $self->_csr('server', 'redis.test');
    $self->_sign('server', 'int', 'server_ext');
    _write("$dir/server-chain.crt", _slurp("$dir/server.crt") . _slurp("$dir/int.crt"));

    # expired server leaf (openssl ca: the only way to set past dates in 3.0)
    $self->_csr('expired', 'redis.test');
    mkdir "$dir/cadb";
    _write("$dir/cadb/index.txt", '');
    _write("$dir/cadb/serial", "1000\n");
    _write("$dir/ca.cnf", <<"EOF");
[ca]
default_ca = tca
[tca]
database = $dir/cadb/index.txt
new_certs_dir = $dir/cadb
serial = $dir/cadb/serial
default_md = sha256
policy = pol
unique_subject = no
[pol]
commonName = supplied
EOF
    openssl('ca', '-batch', '-config', "$dir/ca.cnf", '-cert', "$dir/int.crt", '-keyfile', "$dir/int.key",
        '-in', "$dir/expired.csr", '-out', "$dir/expired.crt", '-notext',
        '-startdate', '20200101000000Z', '-enddate', '20210101000000Z',
        '-extfile', "$dir/ext.cnf", '-extensions', 'server_ext');
    _write("$dir/expired-chain.crt", _slurp("$dir/expired.crt") . _slurp("$dir/int.crt"));

    # server leaves with the same names: one signed by the root itself (no
    # chain needed), one by the unrelated CA (fails verification)
    $self->_csr('server_root', 'redis.test');
    $self->_sign('server_root', 'ca', 'server_ext');
    $self->_csr('stranger_server', 'redis.test');
    $self->_sign('stranger_server', 'other_ca', 'server_ext');

    # client certificates: one from the root (accepted), one from the other CA
    $self->_csr('client', 'ratelimit client');
    $self->_sign('client', 'ca', 'client_ext');
    $self->_csr('other_client', 'stranger');
    $self->_sign('other_client', 'other_ca', 'client_ext');

    opendir my $d, $dir or die "$dir: $!";
    chmod 0644, map { "$dir/$_" } grep { -f "$dir/$_" } readdir $d;
    closedir $d;

    %$self = (%$self,
        ca => "$dir/ca.crt", int => "$dir/int.crt", other_ca => "$dir/other_ca.crt",
        server_chain => "$dir/server-chain.crt", server_key => "$dir/server.key",
        server_leaf => "$dir/server.crt",
        server_root => "$dir/server_root.crt", server_root_key => "$dir/server_root.key",
        stranger_server => "$dir/stranger_server.crt", stranger_server_key => "$dir/stranger_server.key",
        expired_chain => "$dir/expired-chain.crt", expired_key => "$dir/expired.key",
        client => "$dir/client.crt", client_key => "$dir/client.key",
        other_client => "$dir/other_client.crt", other_client_key => "$dir/other_client.key",
    );
    return $self;
}

sub _csr {
    my ($self, $name, $cn) = @_;
    my $d = $self->{dir};
    openssl('req', '-new', @EC, '-keyout', "$d/$name.key", '-out', "$d/$name.csr",
        '-subj', "/CN=$cn", '-config', "$d/ext.cnf");
}

sub _sign {
    my ($self, $name, $issuer, $ext, $extfile) = @_;
    my $d = $self->{dir};
    openssl('x509', '-req', '-in', "$d/$name.csr", '-CA', "$d/$issuer.crt", '-CAkey', "$d/$issuer.key",
        '-CAcreateserial', '-days', 30, '-sha256', '-out', "$d/$name.crt",
        '-extfile', $extfile // "$d/ext.cnf", '-extensions', $ext);
}

sub leaf {
    my ($self, $name, $san) = @_;
    my $d = $self->{dir};
    _write("$d/$name.cnf", <<"EOF");
[leaf_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = $san
EOF
    $self->_csr($name, "ratelimit test $name");
    $self->_sign($name, 'ca', 'leaf_ext', "$d/$name.cnf");
    chmod 0644, "$d/$name.crt", "$d/$name.key";
    return ("$d/$name.crt", "$d/$name.key");
}

# redis-server arguments that open a TLS port (the plain --port stays open
# for the harness's own client).
# The lines of a sentinel's configuration file that give it a TLS port
# with the server certificate and make it speak TLS to the Redis it watches.
sub sentinel_tls_conf {
    my ($self, $tls_port) = @_;
    return <<"EOC";
tls-port $tls_port
tls-cert-file $self->{server_chain}
tls-key-file $self->{server_key}
tls-ca-cert-file $self->{ca}
tls-auth-clients no
tls-replication yes
EOC
}

sub redis_tls_args {
    my ($self, $tls_port, %o) = @_;
    my $exp = $o{expired};
    return ('--tls-port', $tls_port,
        '--tls-cert-file', $exp ? $self->{expired_chain} : $self->{server_chain},
        '--tls-key-file',  $exp ? $self->{expired_key}   : $self->{server_key},
        '--tls-ca-cert-file', $self->{ca},
        '--tls-auth-clients', $o{auth_clients} // 'no');
}

1;
