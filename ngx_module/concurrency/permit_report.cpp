#include "concurrency/permit_report.hpp"

#include <new>

#include "metrics/metrics.hpp"
#include "redis/redis_link.hpp"
#include "concurrency/permit_gate.hpp"
#include "concurrency/permit_hold.hpp"
#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

// The status call names no request of the worker: its token is unused.
constexpr std::uint64_t kNoSeq = 0;

void forget_answers(PermitReport *report)
{
    for (ngx_uint_t i = 0; i < report->entries; i++) {
        if (report->entry[i].call != nullptr) {
            report->entry[i].call->waiter = nullptr;
            report->entry[i].call = nullptr;
        }
    }

    report->waiting = 0;

    stop_timer(&report->timer);
}

// Resumes the request from the event loop, never from inside a reply.
void report_decided(PermitReport *report, Result result)
{
    forget_answers(report);
    report->state->result = result;
    ngx_post_event(&report->done, &ngx_posted_events);
}

void report_entry_failed(PermitReport *report, const PermitReport::Entry &entry,
                         const char *why, std::string_view detail = {})
{
    RedisLink *link = worker_objects().link;

    if (link == nullptr || link->may_log()) {
        LoggedText text(detail);
        ngx_log_error(NGX_LOG_WARN, report->state->r->connection->log, 0,
                      "ratelimit: %s%V, concurrency zone \"%V\", "
                      "answered 503", why, text.str(), &entry.ref->zone->name);
    }

    report->state->result = Result::kError;
}

// The status call's reply: {1, held, queued}.
void on_answer(void *waiter, const PermitReply *reply) noexcept
{
    auto *entry = static_cast<PermitReport::Entry *>(waiter);
    PermitReport *report = entry->report;

    entry->call = nullptr;

    if (reply == nullptr) {
        report_entry_failed(report, *entry, "lost connection to redis");
    } else if (reply->kind == PermitReply::Kind::kError) {
        metrics::record_link_error(LinkError::kErrorReply);
        report_entry_failed(report, *entry, "redis answered an error: ",
                            reply->error);
        worker_objects().link->on_error_reply(reply->error);
    } else if (reply->kind != PermitReply::Kind::kAnswer
               || reply->code != PermitCode::kHeld)
    {
        report_entry_failed(report, *entry, "unexpected reply from redis");
    } else {
        entry->in_flight = reply->number;
        entry->queued = reply->queued;

        if (--report->waiting > 0) {
            return;
        }
    }

    report_decided(report, report->state->result == Result::kError
                   ? Result::kError : Result::kPeeked);
}

void on_report_timer(ngx_event_t *ev) noexcept
{
    auto *report = static_cast<PermitReport *>(ev->data);
    const PermitReport::Entry *late = &report->entry[0];

    while (late->call == nullptr) {
        late++;
    }

    metrics::record_link_error(LinkError::kTimeout);
    report_entry_failed(report, *late, "redis timed out");
    report_decided(report, Result::kError);
    worker_objects().link->on_request_timeout();
}

void on_report_done(ngx_event_t *ev) noexcept
{
    auto *report = static_cast<PermitReport *>(ev->data);
    resume_request(report->state, report->decided);
}

void cleanup_report(void *data) noexcept
{
    auto *report = static_cast<PermitReport *>(data);

    forget_answers(report);

    if (report->done.posted) {
        ngx_delete_posted_event(&report->done);
    }
}

PermitReport *create_report(RequestState *state)
{
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(state->r->pool,
                                                   sizeof(PermitReport));

    if (cln == nullptr) {
        return nullptr;
    }

    auto *report = new (cln->data) PermitReport();
    report->state = state;

    report->timer.handler = on_report_timer;
    report->done.handler = on_report_done;
    report->timer.data = report->done.data = report;
    report->timer.log = report->done.log = state->r->connection->log;

    cln->handler = cleanup_report;
    return report;
}

}  // namespace

bool add_permit_report(RequestState *state, const ZoneRef *ref,
                       const ngx_str_t &subject, ngx_uint_t position) noexcept
{
    if (state->permit_report == nullptr) {
        state->permit_report = create_report(state);

        if (state->permit_report == nullptr) {
            return false;
        }
    }

    PermitReport *report = state->permit_report;
    PermitReport::Entry &entry = report->entry[report->entries];

    entry = {report, ref, subject, ngx_null_string, position, nullptr, 0, 0};

    if (!make_subject_key(state->r, *ref->zone, subject, &entry.key)) {
        return false;
    }

    report->entries++;
    return true;
}

bool send_permit_report(RequestState *state,
                        void (*decided)(RequestState *state) noexcept) noexcept
{
    MainConf *mcf = main_conf(state->r);
    PermitReport *report = state->permit_report;
    PermitGate *permits = worker_objects().permits;

    report->decided = decided;

    for (ngx_uint_t i = 0; i < report->entries; i++) {
        PermitReport::Entry &entry = report->entry[i];

        entry.call = permits == nullptr ? nullptr
                     : permits->send(PermitOp::kStatus, on_answer, &entry,
                                     view(entry.key), kNoSeq,
                                     entry.ref->zone->concurrency, false);

        if (entry.call == nullptr) {
            forget_answers(report);
            report_entry_failed(report, entry, "redis is not connected");
            return false;
        }

        report->waiting++;
    }

    ngx_add_timer(&report->timer, mcf->redis->timeout);
    return true;
}

}  // namespace ratelimit
