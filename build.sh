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
#                       print its path
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
# NGINX_VERSION=1.31.4 (with test or nginx-tests) tests with that nginx
# instead of Debian's: built from ../shared/nginx/nginx-1.31.4.tar.gz (a
# tarball of nginx's repository, NGINX_TARBALLS names another folder) with
# SSL, HTTP/2, HTTP/3 and --with-compat, the module built with it, both in
# build/nginx-1.31.4/.  TESTS="t/10-limit.t ..." picks the integration tests
# (default: all but the Debian package's).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
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

# Configures a private copy of the nginx tree once per set of flags, then
# lets nginx's own Makefile rebuild what changed.
build_module() {
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
    make -s -C "$tree" -f objs/Makefile modules >"$BUILD/make.log" 2>&1 \
        || { cat "$BUILD/make.log" >&2; return 1; }
    # Renamed into place: rewriting a loaded .so in place crashes its users.
    cp "$tree/objs/ngx_http_ratelimit_module.so" "$MODULE.tmp"
    mv -f "$MODULE.tmp" "$MODULE"
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
    mkdir -p "$out/$name-$version"
    tar -C "$ROOT" --exclude=./build --exclude=./.git -cf - . \
        | tar -C "$out/$name-$version" -xf -
    (cd "$out/$name-$version" && dpkg-buildpackage -b --no-sign) \
        >"$out/dpkg-buildpackage.log" 2>&1 \
        || { cat "$out/dpkg-buildpackage.log" >&2; return 1; }
    say "lintian"
    lintian --fail-on error "$deb" >&2
    echo "$deb"
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
        make_deb
        ;;
    module)
        build_module
        ;;
    *)
        echo "usage: $0 [build|test|demo|bench|valgrind|deb|module|nginx-tests]" >&2
        exit 2
        ;;
esac
