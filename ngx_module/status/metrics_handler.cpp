#include "status/metrics_handler.hpp"

#include <new>

#include "metrics/metrics.hpp"
#include "limits/algorithms.hpp"
#include "report/metrics_text.hpp"
#include "status/status_handler.hpp"

namespace ratelimit {

namespace {

// A calendar zone's algorithm, period and time zone (UTC unless tz=).
void name_calendar(const Zone &zone, ZoneMetrics *m)
{
    if (zone.calendar == nullptr) {
        return;
    }

    m->type = row_of(zone.policy).name;
    m->period = period_kind_name(zone.calendar->kind());
    m->tz = zone.tz.len > 0 ? view(zone.tz) : "UTC";
}

// Every worker row summed, per zone and for the link; the busy clocks
// read consistently with their closed intervals.
ZoneMetrics *read_zones(ngx_pool_t *pool, const MainConf *mcf,
                        const MetricsShared &shared)
{
    const MetricsLayout &layout = shared.layout;
    auto **defined = static_cast<Zone **>(mcf->zones.elts);
    auto *zones = static_cast<ZoneMetrics *>(
        ngx_pcalloc(pool, (layout.zones() + 1) * sizeof(ZoneMetrics)));

    if (zones == nullptr) {
        return nullptr;
    }

    std::uint64_t now_us = metrics::now_us();

    for (std::size_t z = 0; z < layout.zones(); z++) {
        ZoneMetrics &m = zones[z];
        m.name = view(defined[z]->name);
        m.limit = defined[z]->policy.limit;
        m.window_ms = policy_at(*defined[z], wall_clock_ms()).window_ms;
        m.takes_turns = row_of(defined[z]->policy).takes_turns;
        name_calendar(*defined[z], &m);

        if (const ConcurrencyPolicy *c = defined[z]->concurrency) {
            m.concurrency = true;
            m.limit = c->limit;
            m.queue_limit = c->queue;
        }

        for (std::size_t s = 0; s < layout.rows(); s++) {
            add_zone(*layout.zone(shared.block, s, z), &m.sum);
        }

        // A zone whose limit is a variable: the limit it applied last, on
        // any worker (0 before its first request).
        if (defined[z]->limit_value != nullptr) {
            m.limit = m.sum.applied_limit;
        }

        m.sum.busy_us = busy_clock::read(
            layout.busy_word(shared.block, z), now_us, [&] {
                std::uint64_t closed = 0;
                for (std::size_t s = 0; s < layout.rows(); s++) {
                    closed += load_counter(
                        &layout.zone(shared.block, s, z)->busy_us);
                }
                return closed;
            });
    }

    return zones;
}

bool read_report(ngx_pool_t *pool, const MainConf *mcf,
                 MetricsReport *report)
{
    auto *shared = static_cast<MetricsShared *>(mcf->metrics_zone->data);
    const MetricsLayout &layout = shared->layout;
    auto *workers = static_cast<WorkerLink *>(
        ngx_palloc(pool, layout.rows() * sizeof(WorkerLink)));

    report->zones = read_zones(pool, mcf, *shared);

    if (report->zones == nullptr || workers == nullptr) {
        return false;
    }

    report->zone_count = layout.zones();
    report->link = {};
    std::uint64_t now = metrics::now_us();

    for (std::size_t s = 0; s < layout.rows(); s++) {
        const LinkCounters *link = layout.link(shared->block, s);
        std::uint64_t state = load_counter(&link->state);

        add_link(*link, now, &report->link);
        workers[s].state = state < static_cast<std::uint64_t>(
                                       LinkState::kCount)
                           ? static_cast<LinkState>(state) : LinkState::kDown;
        workers[s].waiting = load_counter(&link->waiting);
    }

    report->workers = workers;
    report->worker_count = layout.rows();
    report->server_version = NGINX_VERSION;
    return true;
}

MetricsFormat requested_format(ngx_http_request_t *r)
{
    ngx_str_t arg = ngx_null_string;
    static const ngx_str_t kAccept = ngx_string("Accept");
    const ngx_table_elt_t *accept = find_header(r, kAccept);

    if (ngx_http_arg(r, (u_char *) "format", 6, &arg) != NGX_OK) {
        arg.len = 0;
    }

    return choose_metrics_format(view(arg),
                                 accept != nullptr ? view(accept->value)
                                                   : std::string_view{});
}

// The body rendered into r's pool; nullptr on no memory.  std::string
// throws only std::bad_alloc, which stops here.
u_char *render(ngx_http_request_t *r, const MetricsReport &report,
               MetricsFormat format, size_t *len)
{
    try {
        std::string text = render_metrics(report, format);
        auto *body = static_cast<u_char *>(ngx_pnalloc(r->pool, text.size()));

        if (body != nullptr) {
            ngx_memcpy(body, text.data(), text.size());
            *len = text.size();
        }

        return body;
    } catch (const std::bad_alloc &) {
        return nullptr;
    }
}

}  // namespace

ngx_int_t metrics_handler(ngx_http_request_t *r) noexcept
{
    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    ngx_int_t rc = ngx_http_discard_request_body(r);

    if (rc != NGX_OK) {
        return rc;
    }

    MetricsReport report;

    if (!read_report(r->pool, main_conf(r), &report)) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    MetricsFormat format = requested_format(r);
    size_t len = 0;
    u_char *body = render(r, report, format, &len);

    if (body == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return send_body(r, NGX_HTTP_OK, metrics_content_type(format), body, len);
}

}  // namespace ratelimit
