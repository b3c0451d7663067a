#!/usr/bin/perl
# The Debian package: ./build.sh deb makes it, apt-get installs it into the
# machine's nginx, where it is enabled by its modules-enabled link alone and
# limits requests; removal disables it, purge leaves nothing behind.
#
# The test changes the machine (it installs a package), so it needs root,
# takes the package only if apt would install nothing else, and purges it
# even when a check fails. The system nginx service is never started or
# stopped: the requests go to an nginx of the test's own, run from the
# system binary, whose configuration includes /etc/nginx/modules-enabled/
# as Debian's nginx.conf does and has no load_module line. The system's own
# configuration is checked with "nginx -t" after each step, unchanged.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Fcntl qw(O_RDONLY :flock);
use POSIX ();
use RateLimitTest;

my $PACKAGE  = 'libnginx-mod-http-ratelimit';
my $ENABLED  = '/etc/nginx/modules-enabled';
my $LINK     = "$ENABLED/50-mod-http-ratelimit.conf";
my $SNIPPET  = '/usr/share/nginx/modules-available/mod-http-ratelimit.conf';
my $MODULE   = '/usr/lib/nginx/modules/ngx_http_ratelimit_module.so';
my $NGINX    = '/usr/sbin/nginx';

plan skip_all => 'needs root: installs a package with apt-get' if $> != 0;
plan skip_all => "needs Debian's nginx package" if package_status('nginx') ne 'installed';

# Another run of this test (another checkout on this machine) would install
# and purge the same package under this one's feet.
sysopen(my $lock, $ENABLED, O_RDONLY) or die "open $ENABLED: $!";
flock($lock, LOCK_EX) or die "flock $ENABLED: $!";

plan skip_all => "$PACKAGE is known to dpkg already: the test would remove it"
    if package_status($PACKAGE) ne 'not-installed';

# The harness's test binary may be a sanitizer or valgrind wrapper; the
# package is for the system's.
$ENV{NGINX_BIN} = $NGINX;
$ENV{DEBIAN_FRONTEND} = 'noninteractive';

my ($st, $out) = run("$FindBin::Bin/../build.sh", 'deb');
is($st, 0, 'build.sh deb builds the package, lintian finds no error') or diag($out);
my ($deb) = $out =~ m{^(/\S+\.deb)$}m;
# Without a package the rest has nothing to test; the other files still run.
unless ($deb && -f $deb) {
    diag("no package built:\n$out");
    done_testing;
    exit 1;
}

my %deb = map { $_ => (run('dpkg-deb', '-f', $deb, $_))[1] } qw(Package Depends);
my ($abi) = (run('dpkg-query', '-W', '-f=${Provides}', 'nginx'))[1] =~ /(nginx-abi-[\w.~+-]+)/
    or do { fail('the system nginx provides an nginx-abi-*'); done_testing; exit 1 };
like($deb{Package}, qr/^\Q$PACKAGE\E$/m, "named $PACKAGE");
like($deb{Depends}, qr/(^|,\s*)\Q$abi\E(,|$)/m, "depends on $abi, which the system nginx provides");
like($deb{Depends}, qr/\blibhiredis[\d.]+\b/, 'depends on the hiredis runtime');

($st, $out) = apt('install', '--simulate', $deb);
my @others = grep { $_ ne $PACKAGE } $out =~ /^Inst (\S+)/mg;
is("@others", '', 'apt-get would install nothing but the package, all it needs is here')
    or do { diag($out); done_testing; exit 1 };

# What purge must restore: every path of the package that existed before,
# and nothing else.
my @paths = grep { $_ ne '/' } map { m{ \.(/\S*?)/?$} ? $1 : () }
    split /\n/, (run('dpkg-deb', '-c', $deb))[1];
my %existed = map { $_ => (-e $_ || -l $_) ? 1 : 0 } @paths;
my $enabled_before = enabled_links();
my ($system_t_before) = run($NGINX, '-t');
my $system_running = system_nginx_running();

my $t = RateLimitTest->new(workers => 1);
# The harness runs nginx with its temporary folder as prefix; Debian's
# prefix, /usr/share/nginx, links modules/ to /usr/lib/nginx/modules, which
# the snippet's relative load_module path counts on. The same link here.
symlink '/usr/share/nginx/modules', $t->tmp . '/modules' or die "symlink: $!";
$t->start_redis;
$t->write_conf(<<'EOF', no_module => 1, main => "include $ENABLED/*.conf;");
ratelimit_redis 127.0.0.1:%%REDIS_PORT%%;
ratelimit_zone deb key=$remote_addr limit=2 window=1m;
server {
    listen 127.0.0.1:%%PORT%%;
    location / {
        root %%TMP%%/html;
        ratelimit zone=deb;
    }
}
EOF
test_conf_lacks_module('before installation');

my $installed = 0;
END {
    local $?;
    purge() if $installed;
    # A package whose purge fails its checks must not leave its links to
    # the next run: those not there before are the test's to remove.
    if ($enabled_before) {
        unlink grep { -l $_ && !exists $enabled_before->{ substr $_, length "$ENABLED/" } }
            $LINK, "$LINK.removed";
    }
}

($st, $out) = apt('install', $deb);
is($st, 0, 'apt-get install of the package') or diag($out);
$installed = 1;
is(package_status($PACKAGE), 'installed', 'dpkg has it installed');
ok(-f $MODULE, "module in $MODULE");
is(readlink($LINK), $SNIPPET, "enabled: $LINK links to the snippet");
like(slurp($SNIPPET), qr{^load_module modules/ngx_http_ratelimit_module\.so;$}m,
     'the snippet loads the module');
system_nginx_t_unchanged('after installation');
($st, $out) = run($NGINX, '-T');
like($out, qr{configuration file \Q$LINK\E:\s*load_module modules/ngx_http_ratelimit_module\.so;},
     "the system's nginx.conf loads the module through the link");

($st, $out) = $t->nginx_t;
is($st, 0, 'test configuration with no load_module of its own passes nginx -t') or diag($out);
$t->start_nginx;
my @replies = map { $t->get('/index.html') } 1 .. 3;
is(join(' ', map { $_->{status} } @replies), '200 200 429',
   'the system nginx limits: 2 requests a minute pass, the third gets 429');
is(RateLimitTest::header($replies[2], 'X-RateLimit-Remaining'), '0', 'with its rate-limit headers');
is_deeply([$t->redis_keys('rl:deb:*')], ['rl:deb:127.0.0.1'], 'counted in the test Redis');
$t->stop_nginx;
$t->no_alerts;

($st, $out) = apt('remove', $PACKAGE);
is($st, 0, 'apt-get remove') or diag($out);
ok(!-e $LINK && !-l $LINK, 'removal disables the module');
ok(-l "$LINK.removed", 'and keeps the link aside as .removed, as Debian does');
ok(!-e $MODULE, 'module file removed');
system_nginx_t_unchanged('after removal');
test_conf_lacks_module('after removal');

($st, $out) = apt('install', $deb);
is($st, 0, 'apt-get install again after removal') or diag($out);
is(readlink($LINK), $SNIPPET, 'reinstallation enables the module again');
ok(!-l "$LINK.removed", 'and drops the .removed link');

purge();
$installed = 0;
is(package_status($PACKAGE), 'not-installed', 'purged');
is_deeply(enabled_links(), $enabled_before, "$ENABLED as before: no link left");
my @dangling = grep { !-e "$ENABLED/$_" } sort keys %{ enabled_links() };
is("@dangling", '', "no dangling link in $ENABLED");
is_deeply({ map { $_ => (-e $_ || -l $_) ? 1 : 0 } @paths }, \%existed,
          "the package's paths exist as they did before installation");
system_nginx_t_unchanged('after purge');
test_conf_lacks_module('after purge');
is(system_nginx_running(), $system_running, 'the system nginx service neither started nor stopped');

done_testing;

sub purge {
    my ($st, $out) = apt('purge', $PACKAGE);
    is($st, 0, 'apt-get purge') or diag($out);
}

sub test_conf_lacks_module {
    my ($when) = @_;
    my ($st, $out) = $t->nginx_t;
    like($out, qr/unknown directive "ratelimit_redis"/, "$when, nginx -t of the test configuration fails")
        or diag("status $st");
}

sub system_nginx_t_unchanged {
    my ($when) = @_;
    my ($st, $out) = run($NGINX, '-t');
    is($st, $system_t_before, "$when, the system configuration passes nginx -t as before")
        or diag($out);
}

# name => link target (or '' for a file) of each entry of modules-enabled.
sub enabled_links {
    opendir my $d, $ENABLED or die "opendir $ENABLED: $!";
    my %e = map { $_ => readlink("$ENABLED/$_") // '' } grep { !/^\.\.?$/ } readdir $d;
    return \%e;
}

sub system_nginx_running {
    my ($pid) = slurp('/run/nginx.pid') =~ /(\d+)/;
    return $pid && kill(0, $pid) ? 1 : 0;
}

# 'installed', 'not-installed', or another dpkg status (config-files, ...).
sub package_status {
    my ($name) = @_;
    my ($st, $out) = run('dpkg-query', '-W', '-f=${db:Status-Status}', $name);
    return $st == 0 && $out =~ /^([\w-]+)$/ ? $1 : 'not-installed';
}

sub apt {
    my ($action, @args) = @_;
    return run('apt-get', '-y', '-q', '-o', 'DPkg::Lock::Timeout=300', $action, @args);
}

# (exit status, stdout and stderr together)
sub run {
    my @cmd = @_;
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if ($pid == 0) {
        open STDERR, '>&', \*STDOUT;
        open STDIN, '<', '/dev/null';
        no warnings 'exec';
        exec { $cmd[0] } @cmd;
        POSIX::_exit(127);
    }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($? >> 8, $out);
}

sub slurp {
    my ($path) = @_;
    open my $fh, '<', $path or return '';
    local $/;
    return scalar <$fh>;
}
