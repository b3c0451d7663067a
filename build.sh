#!/usr/bin/env bash
# Builds ngx_http_ratelimit_module.so and runs its tests, demo and benchmark.
#
#   ./build.sh          install what is missing, build build/ngx_http_ratelimit_module.so,
#                       the Redis module build/ratelimit_redis.so and the
#                       tests' clock shim build/clock_shim.so
#   ./build.sh test     build, then unit tests (ctest) and integration tests
#                       (prove), then MODULE_TESTS again with the Redis
#                       module loaded into their redis-server
#   ./build.sh demo     build, then show requests turning from 200 into 429
#   ./build.sh bench    build, then the benchmark (bench/)
#   ./build.sh deb      build the Debian package libnginx-mod-http-ratelimit
#                       in build/deb/ from debian/, check it with lintian,
#                       print its path; for nginx.org's nginx (NGINX_BIN,
#                       below) nginx.org's way: nginx-module-ratelimit
#   ./build.sh module   build the module only, installing nothing (debian/rules)
#   ./build.sh nginx-tests
#                       build, then nginx's own test suite (../shared/nginx)
#                       twice, without the module and with it on every
#                       request, and the files whose results differ
#                       (t/compat/nginx_tests.pl)
#
#   ./build.sh valgrind build, then integration tests with nginx under valgrind
#                       (VALGRIND_TESTS="t/10-limit.t ..." picks them)
#
# SANITIZE=address,undefined ./build.sh test builds the module and the unit
# tests with those sanitizers (in build/sanitize/) and runs both suites with
# nginx wrapped to preload the sanitizer runtimes; any report fails the run.
#
# EXTRA_CC_OPT and EXTRA_LD_OPT add compiler and linker flags (debian/rules
# passes Debian's hardening flags).
#
# NGINX_SRC=/path/to/nginx-x.y.z builds against that source tree instead of
# Debian's nginx-dev tree (/usr/share/nginx/src), which makes a module
# binary-compatible with Debian's nginx package.
#
# NGINX_BIN=/usr/sbin/nginx builds the module for that nginx binary from
# its own `nginx -V` (below), into build/ as always; with deb, for nginx.org's
# nginx, nginx.org's package (NGINX_PKG_VERSION, NGINX_PACKAGING below).
#
# NGINX_VERSION=1.31.4 (with test or nginx-tests) tests with that nginx
# instead of Debian's: built from ../shared/nginx/nginx-1.31.4.tar.gz (a
# tarball of nginx's repository, NGINX_TARBALLS names another folder) with
# SSL, HTTP/2, HTTP/3 and --with-compat, the module built with it, both in
# build/nginx-1.31.4/.  TESTS="t/10-limit.t ..." picks the integration tests
# (default: all but the Debian package's).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NGINX_SRC_GIVEN=${NGINX_SRC:-}
NGINX_SRC=${NGINX_SRC:-/usr/share/nginx/src}
SANITIZE=${SANITIZE:-}
NGINX_VERSION=${NGINX_VERSION:-}
NGINX_TARBALLS=${NGINX_TARBALLS:-$ROOT/../shared/nginx}
if [ -n "$NGINX_VERSION" ]; then
    BUILD=$ROOT/build/nginx-$NGINX_VERSION
    SAN_FLAGS=""
elif [ -n "$SANITIZE" ]; then
    BUILD=$ROOT/build/sanitize
    SAN_FLAGS="-fsanitize=$SANITIZE -fno-omit-frame-pointer -fno-sanitize-recover=all"
else
    BUILD=$ROOT/build
    SAN_FLAGS=""
fi
MODULE=$BUILD/ngx_http_ratelimit_module.so
REDIS_MODULE=$BUILD/ratelimit_redis.so
CLOCK_SHIM=$BUILD/clock_shim.so

PACKAGES=(nginx nginx-dev libhiredis-dev libssl-dev redis-server g++ make cmake
          libgtest-dev perl prometheus python3-prometheus-client wrk
          lua5.1 python3-grpcio nghttp2-client chromium python3-websocket)
# For ./build.sh deb, and for the test that installs what it makes.
DEB_PACKAGES=(dpkg-dev debhelper lintian)
# For nginx's own suite with Debian's nginx: its harness loads every module
# `nginx -V` names dynamic, and without them every file fails both ways
# (testing nothing).
DEBIAN_MODULE_PACKAGES=(libnginx-mod-http-geoip libnginx-mod-http-image-filter
    libnginx-mod-http-perl libnginx-mod-http-xslt-filter libnginx-mod-mail
    libnginx-mod-stream libnginx-mod-stream-geoip)
# For an nginx built from source (NGINX_VERSION), and the HTTP/3 client.
RELEASE_PACKAGES=(libpcre2-dev zlib1g-dev ngtcp2-client)
VALGRIND_TESTS=${VALGRIND_TESTS:-t/10-limit.t t/13-zones.t t/15-counted-once.t
    t/20-redis-down.t t/24-bad-replies.t t/50-status-query.t t/52-peek-header.t}
# Run a second time with the Redis module loaded into their Redis: every
# request kind (counts, peeks, intervals; sliding, fixed, several zones, dry
# run; costs and settles; GCRA zones; leases), keys of another type,
# batching and a restart.
MODULE_TESTS=${MODULE_TESTS:-t/10-limit.t t/13-zones.t t/14-dry-run.t
    t/21-redis-restart.t t/25-bad-keys.t t/12-fixed-window.t t/50-status-query.t
    t/52-peek-header.t t/17-batch.t t/51-status-interval.t t/70-costs.t
    t/71-settle.t t/81-gcra-fleet.t t/83-gcra-slot.t t/91-leases.t
    t/92-lease-failover.t t/08-calendar.t t/07-calendar-settle.t}

say() { printf '==> %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

install_missing() {
    local missing=() p
    for p in "${PACKAGES[@]}" "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null \
            | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# What configuring nginx's tree takes from the module: its addon scripts,
# which find the sources by their folders, and the list of those sources
# and of the window script's parts (a file added or removed configures the
# tree again).
addon_sum() {
    cksum < "$ROOT/config"
    cksum < "$ROOT/config.make"
    (cd "$ROOT" && ls ngx_module/*.cpp ngx_module/*/*.cpp src/*/*.cpp \
        src/scripts/lua/*.lua | cksum)
}

# The module from the configured nginx tree $1, renamed into place:
# rewriting a loaded .so in place crashes its users.
make_module() {
    make -s -C "$1" -f objs/Makefile modules >"$BUILD/make.log" 2>&1 \
        || { cat "$BUILD/make.log" >&2; return 1; }
    cp "$1/objs/ngx_http_ratelimit_module.so" "$MODULE.tmp"
    mv -f "$MODULE.tmp" "$MODULE"
}

# ---- The module for an installed nginx binary (NGINX_BIN) ----
# NGINX_BIN=/usr/sbin/nginx ./build.sh builds build/ngx_http_ratelimit_module.so
# for that binary: nginx's source of the version its -V names (NGINX_SRC, a
# tree or a .tar.gz; else nginx-VERSION.tar.gz in NGINX_TARBALLS; else
# Debian's nginx-dev tree if it is that version) configured with the
# binary's own configure arguments, then `make modules`.  Its options that
# only make other dynamic modules (--add-dynamic-module=,
# --with-..._module=dynamic) are left out: they are not part of the binary
# and their sources or libraries are the packager's.

# `$NGINX_BIN -V`'s configure arguments, each ended by a NUL.  nginx prints
# them as it was given them, with single quotes around a value that holds
# a space (auto/options): only those quotes are taken off.
read -r -d '' NGINX_V_ARGS <<'EOP' || true
next unless s/^configure arguments:\s*//;
chomp;
while (/\G\s*(--[^=\s]+)(?:=(?:'([^']*)'(?=\s|\z)|(\S*)))?/gc) {
    print defined $2 ? "$1=$2" : defined $3 ? "$1=$3" : $1, "\0";
}
/\G\s*\z/gc or die "cannot read at: ", substr($_, pos // 0), "\n";
EOP

nginx_bin_version() {
    local v
    v=$("$NGINX_BIN" -V 2>&1 | sed -n 's|^nginx version: nginx/\([0-9.]*\).*|\1|p')
    [ -n "$v" ] || { say "$NGINX_BIN -V names no nginx/VERSION"; return 1; }
    echo "$v"
}

# The version of nginx's source in a tree or a tarball.
nginx_src_version() {
    local h
    if [ -d "$1" ]; then
        h=$(cat "$1/src/core/nginx.h" 2>/dev/null) || true
    else
        h=$(tar -xzOf "$1" --wildcards '*/src/core/nginx.h' 2>/dev/null) || true
    fi
    sed -n 's/^#define NGINX_VERSION *"\(.*\)"/\1/p' <<<"$h"
}

# The source of nginx $1: a tree or a tarball, or an error naming the
# version to get and where.
nginx_bin_source() {
    local v=$1 src have
    local get="get https://nginx.org/download/nginx-$v.tar.gz and give it as NGINX_SRC= (or put it in $NGINX_TARBALLS)"
    if [ -n "$NGINX_SRC_GIVEN" ]; then
        have=$(nginx_src_version "$NGINX_SRC_GIVEN")
        [ "$have" = "$v" ] && { echo "$NGINX_SRC_GIVEN"; return; }
        say "NGINX_SRC=$NGINX_SRC_GIVEN is nginx ${have:-of no known version}, $NGINX_BIN is nginx $v: $get"
        return 1
    fi
    for src in "$NGINX_TARBALLS/nginx-$v.tar.gz" /usr/share/nginx/src; do
        [ -e "$src" ] && [ "$(nginx_src_version "$src")" = "$v" ] \
            && { echo "$src"; return; }
    done
    say "$NGINX_BIN is nginx $v, whose source is not here: $get"
    return 1
}

# The binary's configure arguments as this build passes them, into the
# array named $1.
nginx_bin_flags() {
    local -n into=$1
    local args=() a list=$BUILD/nginx-bin-args
    mkdir -p "$BUILD"
    "$NGINX_BIN" -V 2>&1 | perl -ne "$NGINX_V_ARGS" >"$list"
    mapfile -d '' args <"$list"
    into=()
    for a in "${args[@]}"; do
        case $a in
            --add-dynamic-module=*|--with-*=dynamic)
                say "left out $a: another dynamic module, not part of the binary" ;;
            --add-module=*)
                if [ -d "${a#*=}" ]; then into+=("$a"); else
                    say "left out $a: not here (a module built into the binary; not needed for loading this one)"
                fi ;;
            *) into+=("$a") ;;
        esac
    done
    # Without it a module loads only into an nginx configured exactly as
    # the one it was built with: this one's arguments, as here.
    case " ${into[*]} " in
        *" --with-compat "*) ;;
        *) say "$NGINX_BIN was built without --with-compat: the module loads only into an nginx built with the same arguments (these)" ;;
    esac
}

build_module_for_bin() {
    local tree=$BUILD/nginx version src flags=() stamp
    version=$(nginx_bin_version)
    src=$(nginx_bin_source "$version")
    nginx_bin_flags flags
    stamp="$NGINX_BIN $src $(cksum < "$NGINX_BIN") $(addon_sum)"
    [ -d "$src" ] || stamp="$stamp $(cksum < "$src")"
    if [ ! -f "$tree/objs/Makefile" ] || [ "$(cat "$tree/.stamp" 2>/dev/null)" != "$stamp" ]; then
        say "configuring nginx $version from $src with the arguments of $NGINX_BIN -V"
        rm -rf "$tree"
        mkdir -p "$tree"
        if [ -d "$src" ]; then cp -a "$src/." "$tree"; else
            tar -xzf "$src" -C "$tree" --strip-components=1
        fi
        # A release tarball has ./configure, nginx's repository auto/configure.
        local configure=./configure
        [ -f "$tree/configure" ] || configure=auto/configure
        (cd "$tree" && sh $configure "${flags[@]}" --add-dynamic-module="$ROOT" \
            >"$BUILD/configure.log" 2>&1) \
            || { cat "$BUILD/configure.log" >&2; return 1; }
        printf '%s' "$stamp" >"$tree/.stamp"
    fi
    say "building $MODULE for nginx $version ($NGINX_BIN)"
    make_module "$tree"
    say "the Redis module depends on Redis only: the same for every nginx"
}

# Configures a private copy of the nginx tree once per set of flags, then
# lets nginx's own Makefile rebuild what changed.
build_module() {
    [ -z "${NGINX_BIN:-}" ] || { build_module_for_bin; return; }
    local tree=$BUILD/nginx flags=() cc_opt="-O2 -g $SAN_FLAGS ${EXTRA_CC_OPT:-}"
    local ld_opt="$SAN_FLAGS ${EXTRA_LD_OPT:-}"
    if [ -f "$NGINX_SRC/conf_flags" ]; then
        # shellcheck disable=SC1091
        . "$NGINX_SRC/conf_flags"
        flags=("${NGX_CONF_FLAGS[@]}")
    else
        flags=(--with-compat)
    fi
    local stamp
    stamp="$NGINX_SRC ${flags[*]} $cc_opt $ld_opt $(addon_sum)"
    if [ ! -f "$tree/objs/Makefile" ] || [ "$(cat "$tree/.stamp" 2>/dev/null)" != "$stamp" ]; then
        say "configuring nginx tree from $NGINX_SRC"
        rm -rf "$tree"
        mkdir -p "$BUILD"
        cp -a "$NGINX_SRC" "$tree"
        (cd "$tree" && ./configure "${flags[@]}" --with-cc-opt="$cc_opt" \
            --with-ld-opt="$ld_opt" \
            --add-dynamic-module="$ROOT" >"$BUILD/configure.log" 2>&1) \
            || { cat "$BUILD/configure.log" >&2; return 1; }
        printf '%s' "$stamp" >"$tree/.stamp"
    fi
    say "building $MODULE"
    make_module "$tree"
}

# nginx NGINX_VERSION from its tarball, configured as nginx's repository
# is (auto/configure), with the module as a dynamic module of the same
# build: build/nginx-VERSION/nginx and ngx_http_ratelimit_module.so.  The
# HTTP modules nginx's test suite uses most are built in (stream and mail,
# which the module never sees, are not); the prefix holds only the logs
# nginx opens before it reads a configuration.
build_nginx_release() {
    local tree=$BUILD/src tarball=$NGINX_TARBALLS/nginx-$NGINX_VERSION.tar.gz
    local stamp flags=(--prefix="$BUILD/prefix" --with-compat --with-threads
        --with-file-aio --with-http_ssl_module --with-http_v2_module
        --with-http_v3_module --with-http_realip_module
        --with-http_addition_module --with-http_sub_module
        --with-http_dav_module --with-http_gunzip_module
        --with-http_gzip_static_module --with-http_auth_request_module
        --with-http_secure_link_module --with-http_slice_module
        --with-http_stub_status_module --with-cc-opt="-O2 -g"
        --add-dynamic-module="$ROOT")
    [ -f "$tarball" ] || { say "$tarball not found"; return 1; }
    stamp="${flags[*]} $(cksum < "$tarball") $(addon_sum)"
    if [ ! -f "$tree/objs/Makefile" ] || [ "$(cat "$BUILD/.stamp" 2>/dev/null)" != "$stamp" ]; then
        say "configuring nginx $NGINX_VERSION from $tarball"
        rm -rf "$BUILD"
        mkdir -p "$tree" "$BUILD/prefix/logs"
        chmod 0777 "$BUILD/prefix/logs"
        tar -xzf "$tarball" -C "$tree" --strip-components=1
        (cd "$tree" && auto/configure "${flags[@]}" \
            >"$BUILD/configure.log" 2>&1) \
            || { cat "$BUILD/configure.log" >&2; return 1; }
        printf '%s' "$stamp" >"$BUILD/.stamp"
    fi
    say "building nginx $NGINX_VERSION and $MODULE"
    make -s -C "$tree" -f objs/Makefile -j 2 binary modules \
        >"$BUILD/make.log" 2>&1 || { cat "$BUILD/make.log" >&2; return 1; }
    cp "$tree/objs/nginx" "$BUILD/nginx.tmp"
    mv -f "$BUILD/nginx.tmp" "$BUILD/nginx"
    cp "$tree/objs/ngx_http_ratelimit_module.so" "$MODULE.tmp"
    mv -f "$MODULE.tmp" "$MODULE"
}

# The module for the nginx under test: Debian's (NGINX_SRC), or a release
# built from source with it.
build_for_nginx() {
    if [ -n "$NGINX_VERSION" ]; then
        install_missing "${RELEASE_PACKAGES[@]}"
        build_nginx_release
        export NGINX_BIN=$BUILD/nginx
    else
        build_module
    fi
}

# The Redis module (redis_module/), for redis-server --loadmodule: its own
# sources and the window rules it shares with the nginx module (src/).
# redis_module/CMakeLists.txt builds it and its unit tests in one tree.
configure_redis_module() {
    cmake -S "$ROOT/redis_module" -B "$BUILD/redis_module" \
        -DCMAKE_CXX_FLAGS="-O2 -g $SAN_FLAGS ${EXTRA_CC_OPT:-}" \
        -DCMAKE_MODULE_LINKER_FLAGS="$SAN_FLAGS ${EXTRA_LD_OPT:-}" \
        -DCMAKE_EXE_LINKER_FLAGS="$SAN_FLAGS ${EXTRA_LD_OPT:-}" \
        >"$BUILD/redis_module.log" 2>&1 \
        || { cat "$BUILD/redis_module.log" >&2; return 1; }
}

build_redis_module() {
    local built=$ROOT/build/ratelimit_redis.so
    mkdir -p "$BUILD"
    # It does not depend on nginx: a release's tests take the one built for
    # Debian's nginx while it is newer than its sources.
    if [ -n "$NGINX_VERSION" ] && [ -f "$built" ] && [ -z "$(find \
        "$ROOT/redis_module" "$ROOT/src" -name '*.[ch]pp' -newer "$built")" ]
    then
        cp "$built" "$REDIS_MODULE"
        return
    fi
    say "building $REDIS_MODULE"
    configure_redis_module
    cmake --build "$BUILD/redis_module" --target ratelimit_redis -j 2 \
        >"$BUILD/redis_module.log" 2>&1 \
        || { cat "$BUILD/redis_module.log" >&2; return 1; }
    # Renamed into place, as the nginx module is.
    cp "$BUILD/redis_module/ratelimit_redis.so" "$REDIS_MODULE.tmp"
    mv -f "$REDIS_MODULE.tmp" "$REDIS_MODULE"
}

# The tests' clock shim (t/lib/clock_shim.c), which RateLimitTest preloads
# into the nginx and redis-server of a test that sets their wall clock.  It
# is never instrumented: under SANITIZE it loads after the runtimes.
build_clock_shim() {
    say "building $CLOCK_SHIM"
    mkdir -p "$BUILD"
    gcc -O2 -fPIC -shared -Wall -Wextra -Werror -o "$CLOCK_SHIM.tmp" \
        "$ROOT/t/lib/clock_shim.c"
    # Renamed into place, as the modules are.
    mv -f "$CLOCK_SHIM.tmp" "$CLOCK_SHIM"
}

unit_tests() {
    say "unit tests"
    cmake -S "$ROOT/src" -B "$BUILD/unit" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS="$SAN_FLAGS" >/dev/null
    cmake --build "$BUILD/unit" -j 2 >/dev/null
    ctest --test-dir "$BUILD/unit" --output-on-failure
    say "unit tests of the Redis module"
    configure_redis_module
    cmake --build "$BUILD/redis_module" -j 2 >/dev/null
    ctest --test-dir "$BUILD/redis_module" --output-on-failure
}

integration_tests() {
    local rc=0 files
    rm -rf "$BUILD/reports"
    if [ -n "${TESTS:-}" ]; then
        say "integration tests: $TESTS"
        # shellcheck disable=SC2086
        run_prove $(cd "$ROOT" && realpath $TESTS) || rc=$?
    elif [ -n "$NGINX_VERSION" ]; then
        say "integration tests with nginx $NGINX_VERSION"
        # The Debian package's test installs it into Debian's nginx.
        run_prove $(ls "$ROOT"/t/*.t | grep -v '/60-deb\.t$') || rc=$?
    else
        say "integration tests"
        run_prove -r "$ROOT/t/" || rc=$?
    fi
    # A release's subset has t/35 for the Redis module.
    if [ -n "$NGINX_VERSION" ] && [ -n "${TESTS:-}" ]; then
        return $rc
    fi
    say "integration tests, Redis module loaded: $MODULE_TESTS"
    # shellcheck disable=SC2086
    files=$(cd "$ROOT" && realpath $MODULE_TESTS)
    # shellcheck disable=SC2086
    RATELIMIT_REDIS_MODULE=$REDIS_MODULE run_prove $files || rc=$?
    [ -z "$SANITIZE" ] || sanitizer_verdict || rc=$?
    return $rc
}

# prove with the built module.  With SANITIZE, nginx and redis-server (which
# loads the Redis module in t/19, t/33 and the module's run) are not
# instrumented: the runtimes must be loaded before the modules (and before
# a preload the test gives, the clock shim), and the workers (user nobody)
# must be able to write their reports.
run_prove() {
    if [ -z "$SANITIZE" ]; then
        RATELIMIT_MODULE=$MODULE prove -I "$ROOT/t/lib" "$@"
        return
    fi
    local reports=$BUILD/reports preload=""
    mkdir -p "$reports"
    chmod 1777 "$reports"
    case ",$SANITIZE," in
        *,address,*) preload=$(gcc -print-file-name=libasan.so) ;;
    esac
    case ",$SANITIZE," in
        *,undefined,*) preload="$preload:$(gcc -print-file-name=libubsan.so)" ;;
    esac
    local bin name
    for name in nginx redis-server; do
        bin=$(command -v "$name" || echo "/usr/sbin/$name")
        cat >"$BUILD/$name-sanitized" <<EOW
#!/bin/sh
export LD_PRELOAD="${preload#:}\${LD_PRELOAD:+:\$LD_PRELOAD}"
export ASAN_OPTIONS="detect_leaks=0:log_path=$reports/asan"
export UBSAN_OPTIONS="print_stacktrace=1:log_path=$reports/ubsan"
exec $bin "\$@"
EOW
        chmod +x "$BUILD/$name-sanitized"
    done
    NGINX_BIN=$BUILD/nginx-sanitized REDIS_BIN=$BUILD/redis-server-sanitized \
        RATELIMIT_MODULE=$MODULE prove -I "$ROOT/t/lib" "$@"
}

sanitizer_verdict() {
    if compgen -G "$BUILD/reports/*" >/dev/null; then
        say "sanitizer reports:"
        cat "$BUILD/reports"/* >&2
        return 1
    fi
    say "no sanitizer reports"
}

# The tests' timings do not hold under valgrind (the harness stretches its
# waits and Redis timeouts); what is judged is valgrind's report: no invalid
# access, no uninitialised use and no definite leak with a frame in the
# module.
# dpkg-buildpackage writes its results next to the tree it builds, so it builds
# a copy of the tree inside build/deb/. The version is debian/changelog's.
make_deb() {
    local out=$ROOT/build/deb name version deb
    name=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Source)
    version=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version)
    deb=$out/${name}_${version}_$(dpkg --print-architecture).deb
    say "building $deb"
    rm -rf "$out"
    copy_tree "$out/$name-$version"
    build_package "$out/$name-$version" "$deb"
}

# This tree without build/ and .git/, in $1.
copy_tree() {
    mkdir -p "$1"
    tar -C "$ROOT" --exclude=./build --exclude=./.git -cf - . | tar -C "$1" -xf -
}

# dpkg-buildpackage in the copy $1, which writes the package $2 beside it;
# lintian on it, then its path.
build_package() {
    local log
    log=$(dirname "$1")/dpkg-buildpackage.log
    (cd "$1" && dpkg-buildpackage -b --no-sign) >"$log" 2>&1 \
        || { cat "$log" >&2; return 1; }
    say "lintian"
    lintian --fail-on error "$2" >&2
    echo "$2"
}

# ---- nginx.org's packaging (./build.sh deb with NGINX_BIN) ----
# nginx.org's module packages are named nginx-module-NAME, depend on the one
# nginx package version they were built for, and install into the binary's
# --modules-path; nothing enables them (a load_module line in nginx.conf
# does).  The binary is nginx.org's when NGINX_PACKAGING=nginx.org, or when
# its -V says --prefix=/etc/nginx (Debian's says /usr/share/nginx).  The
# module goes into its --modules-path (NGINX_MODULES_PATH says another).

nginx_org_packaging() {
    case ${NGINX_PACKAGING:-} in
        nginx.org) return 0 ;;
        debian) return 1 ;;
    esac
    [ -n "${NGINX_BIN:-}" ] && "$NGINX_BIN" -V 2>&1 | grep -q -- '--prefix=/etc/nginx\b'
}

# The version of the nginx package $NGINX_BIN belongs to: NGINX_PKG_VERSION,
# else dpkg's.
nginx_pkg_version() {
    local pkg
    [ -z "${NGINX_PKG_VERSION:-}" ] || { echo "$NGINX_PKG_VERSION"; return; }
    pkg=$(dpkg -S "$(realpath "$NGINX_BIN")" 2>/dev/null | sed -n '1s/:.*//p')
    [ -n "$pkg" ] && dpkg-query -W -f='${Version}' "$pkg" && return
    say "$NGINX_BIN belongs to no package: give its nginx package's version as NGINX_PKG_VERSION= (as 1.30.4-1~bookworm)"
    return 1
}

# The package's debian/ in the copy $1 of the tree, for nginx $2 (package
# version $3), the module going into $4, the package's version being $5.
nginx_org_debian() {
    local d=$1/debian nginx=$2 pkgver=$3 modules=$4 version=$5
    local who date
    who=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Maintainer)
    date=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Date)
    rm -f "$d"/postinst "$d"/prerm "$d"/postrm "$d"/mod-http-ratelimit.conf
    cat >"$d/changelog" <<EOC
nginx-module-ratelimit ($version) unstable; urgency=medium

  * The module for nginx.org's nginx $nginx (package $pkgver).

 -- $who  $date
EOC
    sed -e 's/^Source: .*/Source: nginx-module-ratelimit/' \
        -e 's/^Package: .*/Package: nginx-module-ratelimit/' \
        -e "s/^Depends: .*/Depends: nginx (= $pkgver), \${shlibs:Depends}, \${misc:Depends}/" \
        -e '/^Build-Depends:/,/^[^ ]/{/^Build-Depends:/s/:.*/: debhelper-compat (= 13)/;/^ /d}' \
        -e '/^Recommends:/d' \
        -e 's|^ The module is enabled on installation.*| Load it with "load_module modules/ngx_http_ratelimit_module.so;" in nginx.conf.|' \
        "$ROOT/debian/control" >"$d/control"
    echo "build/ngx_http_ratelimit_module.so ${modules#/}" >"$d/install"
    printf '%s\n' 'The module is not enabled on installation. Load it at the top of' \
        '/etc/nginx/nginx.conf:' '' \
        '    load_module modules/ngx_http_ratelimit_module.so;' >"$d/README.Debian"
    # The module is built before (build.sh for NGINX_BIN) and copied in.
    printf '%s\n' '#!/usr/bin/make -f' '%:' '	dh $@' '' \
        'override_dh_auto_build:' 'override_dh_auto_clean:' >"$d/rules"
}

make_deb_nginx_org() {
    local out=$ROOT/build/deb name=nginx-module-ratelimit nginx pkgver
    local modules version deb tree
    [ -n "${NGINX_BIN:-}" ] || { say "nginx.org's packaging needs NGINX_BIN="; return 1; }
    pkgver=$(nginx_pkg_version)
    build_module
    nginx=$(nginx_bin_version)
    modules=${NGINX_MODULES_PATH:-$("$NGINX_BIN" -V 2>&1 \
        | sed -n 's/.*--modules-path=\([^ ]*\).*/\1/p')}
    modules=${modules:-/usr/lib/nginx/modules}
    version=$nginx+$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version)
    deb=$out/${name}_${version}_$(dpkg --print-architecture).deb
    tree=$out/$name-$version
    say "building $deb: Depends: nginx (= $pkgver), the module in $modules"
    rm -rf "$out"
    copy_tree "$tree"
    mkdir -p "$tree/build"
    cp "$MODULE" "$tree/build/"
    nginx_org_debian "$tree" "$nginx" "$pkgver" "$modules" "$version"
    build_package "$tree" "$deb"
}

valgrind_tests() {
    say "integration tests under valgrind: $VALGRIND_TESTS"
    local logs=$BUILD/valgrind wrapper=$BUILD/nginx-valgrind
    rm -rf "$logs"
    mkdir -p "$logs"
    chmod 1777 "$logs"
    cat >"$wrapper" <<EOW
#!/bin/sh
exec valgrind --quiet --leak-check=full --show-leak-kinds=definite \\
    --log-file=$logs/nginx.%p /usr/sbin/nginx "\$@"
EOW
    chmod +x "$wrapper"
    # shellcheck disable=SC2086
    (cd "$ROOT" && RATELIMIT_SLOW=20 NGINX_BIN=$wrapper RATELIMIT_MODULE=$MODULE \
        prove -I t/lib $VALGRIND_TESTS) || say "(test failures under valgrind are not judged)"
    perl "$ROOT/t/lib/valgrind_scan.pl" "$logs"/nginx.*
}

case "${1:-build}" in
    build)
        install_missing
        build_module
        build_redis_module
        build_clock_shim
        ;;
    test)
        install_missing "${DEB_PACKAGES[@]}"
        build_for_nginx
        build_redis_module
        build_clock_shim
        [ -n "$NGINX_VERSION" ] || unit_tests
        integration_tests
        ;;
    nginx-tests)
        if [ -n "$NGINX_VERSION" ]; then
            install_missing
        else
            install_missing "${DEBIAN_MODULE_PACKAGES[@]}"
        fi
        build_for_nginx
        RATELIMIT_MODULE=$MODULE perl -I "$ROOT/t/lib" \
            "$ROOT/t/compat/nginx_tests.pl"
        ;;
    demo)
        install_missing
        build_module
        RATELIMIT_MODULE=$MODULE perl -I "$ROOT/t/lib" "$ROOT/t/lib/demo.pl"
        ;;
    valgrind)
        install_missing valgrind
        build_module
        valgrind_tests
        ;;
    bench)
        install_missing wrk libnginx-mod-http-lua lua-nginx-redis haproxy
        build_module
        build_redis_module
        RATELIMIT_MODULE=$MODULE perl -I "$ROOT/t/lib" "$ROOT/bench/run.pl"
        RATELIMIT_MODULE=$MODULE perl -I "$ROOT/t/lib" "$ROOT/bench/queue.pl"
        ;;
    deb)
        install_missing "${DEB_PACKAGES[@]}"
        if nginx_org_packaging; then make_deb_nginx_org; else make_deb; fi
        ;;
    module)
        build_module
        ;;
    *)
        echo "usage: $0 [build|test|demo|bench|valgrind|deb|module|nginx-tests]" >&2
        exit 2
        ;;
esac
