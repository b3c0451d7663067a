package RateLimitTest::Conf;

# Pieces of nginx configuration that many test files share.
#
#   fail_policy_http($redis, limit => N, bucket => '1s', free => 1)
#     An http{} body for write_conf: $redis (the ratelimit_redis line(s) and
#     whatever else goes before the zone), zone "api" keyed on X-Api-Key
#     (limit N in 60 s, optionally bucketed) and one server on %%PORT%% with
#     /open/ (the zone, failing open by default), /closed/ (the zone,
#     ratelimit_fail closed), with closed_status => N, /closed_n/
#     (ratelimit_fail closed status=N) and, with free => 1, /free/ (no
#     limit); every response carries X-RL-Status: $ratelimit_status and
#     X-RL-Time: $request_time (nginx's own time for it, in seconds).
#   fail_policy_server(free => 1, closed_status => N)  that server block
#     alone.

use strict;
use warnings;

use Exporter 'import';

our @EXPORT_OK = qw(fail_policy_http fail_policy_server);

sub fail_policy_server {
    my (%o) = @_;
    my $free = $o{free} ? "    location /free/   { alias %%TMP%%/html/; }\n" : '';
    $free .= "    location /closed_n/ { ratelimit zone=api; "
           . "ratelimit_fail closed status=$o{closed_status}; alias %%TMP%%/html/; }\n"
        if $o{closed_status};
    return <<'EOF' . $free . "}\n";
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    add_header X-RL-Time "$request_time" always;
    location /open/   { ratelimit zone=api; alias %%TMP%%/html/; }
    location /closed/ { ratelimit zone=api; ratelimit_fail closed; alias %%TMP%%/html/; }
EOF
}

sub fail_policy_http {
    my ($redis, %o) = @_;
    my $limit = $o{limit} // die "fail_policy_http: limit needed\n";
    $redis .= "\n" unless $redis =~ /\n\z/;
    my $bucket = defined $o{bucket} ? " bucket=$o{bucket}" : '';
    return $redis
        . 'ratelimit_zone api key=$http_x_api_key' . " limit=$limit window=60s$bucket;\n"
        . fail_policy_server(free => $o{free}, closed_status => $o{closed_status});
}

1;
