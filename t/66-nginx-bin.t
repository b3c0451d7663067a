#!/usr/bin/perl
# The module built for an installed nginx from its own `nginx -V`
# (NGINX_BIN=... ./build.sh module; README.md, Installing in detail):
# nginx 1.30.4 and 1.31.4 are built from ../shared/nginx with nginx.org's
# packages' configure arguments (@NGINX_ORG below, each path moved under a
# prefix), then the documented command builds the module for each binary.  Each binary loads
# its module, passes nginx -t and limits a request counted in a real Redis;
# 1.31.4 refuses the module built for 1.30.4 with the message the README
# quotes; nginx.org's package is built for 1.30.4.
#
# It builds two nginx and two modules: about 4 minutes on 2 cores the first
# time, 10 s once they are built (below), so it runs only with
# RATELIMIT_NGINX_BUILDS=1 (.ci/run has a stage for it).
# Each nginx is kept in build/nginx-org/VERSION/ (its prefix) and rebuilt
# only when its tarball or arguments change.  The command runs in a copy of
# the repository (build/nginx-org/VERSION/repo, its own build/ kept between
# runs), so the module of this checkout's build/ is left alone.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use RateLimitTest;

plan skip_all => 'builds two nginx (minutes): set RATELIMIT_NGINX_BUILDS=1'
    unless $ENV{RATELIMIT_NGINX_BUILDS};

my $REPO     = RateLimitTest::Env::repo_dir();
my $TARBALLS = $ENV{NGINX_TARBALLS} // "$REPO/../shared/nginx";
my $CACHE    = "$REPO/build/nginx-org";

# `nginx -V` of nginx.org's packages for Debian 12 (nginx.org/packages),
# paths without the prefix.  All of it builds here: nothing is left out.
my @NGINX_ORG = (qw(
    --prefix=/etc/nginx --sbin-path=/usr/sbin/nginx
    --modules-path=/usr/lib/nginx/modules --conf-path=/etc/nginx/nginx.conf
    --error-log-path=/var/log/nginx/error.log
    --http-log-path=/var/log/nginx/access.log --pid-path=/var/run/nginx.pid
    --lock-path=/var/run/nginx.lock
    --http-client-body-temp-path=/var/cache/nginx/client_temp
    --http-proxy-temp-path=/var/cache/nginx/proxy_temp
    --http-fastcgi-temp-path=/var/cache/nginx/fastcgi_temp
    --http-uwsgi-temp-path=/var/cache/nginx/uwsgi_temp
    --http-scgi-temp-path=/var/cache/nginx/scgi_temp
    --user=nginx --group=nginx --with-compat --with-file-aio --with-threads
    --with-http_addition_module --with-http_auth_request_module
    --with-http_dav_module --with-http_flv_module --with-http_gunzip_module
    --with-http_gzip_static_module --with-http_mp4_module
    --with-http_random_index_module --with-http_realip_module
    --with-http_secure_link_module --with-http_slice_module
    --with-http_ssl_module --with-http_stub_status_module
    --with-http_sub_module --with-http_v2_module --with-http_v3_module
    --with-mail --with-mail_ssl_module --with-stream
    --with-stream_realip_module --with-stream_ssl_module
    --with-stream_ssl_preread_module),
    '--with-cc-opt=-g -O2 -ffile-prefix-map=/data/builder/debuild/'
        . 'nginx-VERSION/debian/debuild-base/nginx-VERSION=. '
        . '-fstack-protector-strong -Wformat -Werror=format-security '
        . '-Wp,-D_FORTIFY_SOURCE=2 -fPIC',
    '--with-ld-opt=-Wl,-z,relro -Wl,-z,now -Wl,--as-needed -pie');

my %bin;
for my $v ('1.30.4', '1.31.4') {
    my ($nginx, $args) = nginx_org($v) or next;
    my $module = module_for($v, $nginx) or next;
    # build.sh keeps what it read from nginx -V, one argument per NUL.
    my $read = RateLimitTest::Env::_read_file("$CACHE/$v/repo/build/nginx-bin-args");
    is_deeply([split /\0/, $read], $args,
              "nginx -V read back as configure's arguments, quoted ones whole");
    $bin{$v} = { nginx => $nginx, module => $module };
    limits($v, $nginx, $module);
}

# nginx.org's packaging for the 1.30.4 build (a binary of no package: its
# package version given; its modules folder nginx.org's, not the prefix's).
SKIP: {
    skip 'no nginx 1.30.4 built', 6 unless $bin{'1.30.4'};
    my ($st, $out) = run_in_copy('1.30.4', $bin{'1.30.4'}{nginx}, NGINX_PACKAGING => 'nginx.org',
        NGINX_PKG_VERSION => '1.30.4-1~bookworm', NGINX_MODULES_PATH => '/usr/lib/nginx/modules',
        COMMAND => 'deb');
    is($st, 0, "build.sh deb for nginx.org's nginx, lintian finds no error") or diag($out);
    my ($deb) = $out =~ m{^(/\S+\.deb)$}m;
    like($deb // '', qr{/nginx-module-ratelimit_1\.30\.4\+[\d.]+_\w+\.deb$}, 'named as nginx.org names modules');
    my %f = map { $_ => (run('dpkg-deb', '-f', $deb // '/nonexistent', $_))[1] } qw(Package Depends);
    is($f{Package}, "nginx-module-ratelimit\n", 'package nginx-module-ratelimit');
    like($f{Depends}, qr/^nginx \(= 1\.30\.4-1~bookworm\),/, 'depending on that nginx package exactly');
    like($f{Depends}, qr/\blibhiredis[\d.]+\b/, 'and on the hiredis runtime');
    like((run('dpkg-deb', '-c', $deb // '/nonexistent'))[1],
         qr{ \./usr/lib/nginx/modules/ngx_http_ratelimit_module\.so$}m,
         "the module in nginx.org's modules folder");
}

SKIP: {
    skip 'an nginx or a module did not build', 2 unless keys %bin == 2;
    local $ENV{NGINX_BIN} = $bin{'1.31.4'}{nginx};
    my $t = RateLimitTest->new(workers => 1);
    $t->write_conf("", module => $bin{'1.30.4'}{module});
    my ($st, $out) = $t->nginx_t;
    isnt($st, 0, "nginx 1.31.4 refuses the module built for 1.30.4");
    like($out, qr/\[emerg\] module "\Q$bin{'1.30.4'}{module}\E" version 1030004 instead of 1031004 in \S+nginx\.conf:1/,
         'with the message the README quotes') or diag($out);
}

# The source of another version: the error names the one to get.
SKIP: {
    skip 'no nginx 1.31.4 built', 2 unless $bin{'1.31.4'};
    my ($st, $out) = run_in_copy('1.31.4', $bin{'1.31.4'}{nginx},
        NGINX_SRC => "$TARBALLS/nginx-1.30.4.tar.gz");
    isnt($st, 0, 'NGINX_SRC of another version: build.sh fails');
    like($out, qr{is nginx 1\.30\.4, \S+ is nginx 1\.31\.4: get https://nginx\.org/download/nginx-1\.31\.4\.tar\.gz}m,
         'naming the version to get and where') or diag($out);
}

done_testing;

# nginx $v built with @NGINX_ORG under build/nginx-org/$v (its prefix):
# the binary's path and the arguments, or () after a failed test.
sub nginx_org {
    my ($v) = @_;
    my $tarball = "$TARBALLS/nginx-$v.tar.gz";
    my $p = "$CACHE/$v";
    my $bin = "$p/usr/sbin/nginx";
    my @args = map { s/VERSION/$v/gr } @NGINX_ORG;
    s{^(--[\w-]+-path|--prefix)=/}{$1=$p/} for @args;
    my $stamp = join("\n", @args, (run('cksum', $tarball))[1]);
    if (-x $bin && RateLimitTest::Env::_read_file("$p/.stamp") eq $stamp) {
        pass("nginx $v with nginx.org's arguments, built before");
        return ($bin, \@args);
    }
    my $t0 = time;
    system('rm', '-rf', $p) == 0 or die "rm $p";
    RateLimitTest::Env::_mkpath("$p/src");
    RateLimitTest::Env::_mkpath("$p/$_") for qw(usr/sbin var/log/nginx var/cache/nginx var/run);
    my ($st, $out) = run('sh', '-c', 'cd "$1" && tar -xzf "$2" --strip-components=1'
        . ' && shift 2 && sh auto/configure "$@" && nice make -j2 -f objs/Makefile binary'
        . ' && cp objs/nginx "$0"', $bin, "$p/src", $tarball, @args);
    is($st, 0, "nginx $v built with nginx.org's arguments (" . (time - $t0) . ' s)')
        or do { diag(substr($out, -3000)); return };
    RateLimitTest::Env::_write_file("$p/.stamp", $stamp);
    return ($bin, \@args);
}

# The documented command for binary $nginx, in this version's copy of the
# repository: the module's path, or undef after a failed test.
sub module_for {
    my ($v, $nginx) = @_;
    my $t0 = time;
    my ($st, $out) = run_in_copy($v, $nginx);
    is($st, 0, "NGINX_BIN=nginx-$v ./build.sh module (" . (time - $t0) . ' s)')
        or do { diag(substr($out, -3000)); return undef };
    like($out, qr/left out|configuring|building/, 'it says what it does') or diag($out);
    return "$CACHE/$v/repo/build/ngx_http_ratelimit_module.so";
}

# build.sh module in the copy for $v, refreshed from this checkout (tar
# keeps the files' times: make rebuilds only what changed).
sub run_in_copy {
    my ($v, $nginx, %env) = @_;
    my $copy = "$CACHE/$v/repo";
    RateLimitTest::Env::_mkpath($copy);
    run('sh', '-c', 'cd "$0" && find . -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +', $copy);
    my ($st, $out) = run('sh', '-c', 'tar -C "$0" --exclude=./build --exclude=./.git -cf - . | tar -C "$1" -xf -',
        $REPO, $copy);
    $st == 0 or return ($st, $out);
    local $ENV{NGINX_BIN} = $nginx;
    local $ENV{NGINX_TARBALLS} = $TARBALLS;
    my $command = delete $env{COMMAND} // 'module';
    local @ENV{keys %env} = values %env;
    return run('nice', "$copy/build.sh", $command);
}

# Loaded by its own nginx: nginx -t passes, the third request of a zone of
# two a minute is refused, counted in the test's Redis.
sub limits {
    my ($v, $nginx, $module) = @_;
    local $ENV{NGINX_BIN} = $nginx;
    my $t = RateLimitTest->new(workers => 1);
    $t->start_redis(redis_module => 0);
    $t->write_conf(<<'EOF', module => $module);
ratelimit_redis 127.0.0.1:%%REDIS_PORT%%;
ratelimit_zone org key=$remote_addr limit=2 window=1m;
server {
    listen 127.0.0.1:%%PORT%%;
    location / {
        root %%TMP%%/html;
        ratelimit zone=org;
    }
}
EOF
    my ($st, $out) = $t->nginx_t;
    is($st, 0, "nginx $v loads the module built for it: nginx -t passes") or do { diag($out); return };
    $t->start_nginx;
    my @codes = map { $t->get('/index.html')->{status} } 1 .. 3;
    is("@codes", '200 200 429', "nginx $v limits: 2 requests a minute pass, the third gets 429");
    is_deeply([$t->redis_keys('rl:org:*')], ['rl:org:127.0.0.1'], 'counted in the Redis');
    $t->stop_nginx;
    $t->no_alerts;
}

# (exit status, stdout and stderr together) of a command.
sub run {
    open my $fh, '-|', 'sh', '-c', 'exec "$@" 2>&1 </dev/null', 'sh', @_
        or die "sh: $!";
    my $out = do { local $/; <$fh> } // '';
    close $fh;
    return ($? >> 8, $out);
}
