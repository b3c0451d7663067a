#include "directives/time_zone_file.hpp"

#include <cstdlib>
#include <new>
#include <optional>
#include <string>

#include "calendar/time_zone.hpp"
#include "directives/conf_params.hpp"

namespace ratelimit {

namespace {

// More than a zone file holds: the tz database's are a few KB, and one of
// kMaxTransitions transitions about 60 KB.
constexpr size_t kMaxZoneFileSize = 1024 * 1024;

// The tz database's directory: $TZDIR, as the C library reads it, else
// where Debian's tzdata puts it.
std::string zone_directory()
{
    const char *dir = std::getenv("TZDIR");

    return dir != nullptr && dir[0] != '\0' ? dir : "/usr/share/zoneinfo";
}

// Closes a file however its reading ends.
struct OpenFile {
    ngx_fd_t fd;

    ~OpenFile() { ngx_close_file(fd); }
};

// The bytes of `file`, up to one past kMaxZoneFileSize, into *bytes; the
// errno of a read that failed, else 0.
ngx_err_t read_bytes(const OpenFile &file, std::string *bytes)
{
    u_char chunk[4096];

    while (bytes->size() <= kMaxZoneFileSize) {
        ssize_t n = ngx_read_fd(file.fd, chunk, sizeof(chunk));

        if (n <= 0) {
            return n < 0 ? ngx_errno : 0;
        }

        bytes->append(reinterpret_cast<const char *>(chunk),
                      static_cast<size_t>(n));
    }

    return 0;
}

// The directive's error for the zone file `path` that the system call
// failing with `err` could not read.
char *unreadable(ngx_conf_t *cf, ngx_err_t err, const std::string &path)
{
    return directive_errno_error(cf, err, "cannot read time zone file "
                                 "\"%s\"", path.c_str());
}

// The bytes of the zone file `path` of the zone `name`; nothing, with the
// directive's error in *rv, if it cannot be read or is not a regular file.
// Opened without blocking: a FIFO's open waits for a writer.
std::optional<std::string> read_zone_file(ngx_conf_t *cf,
                                          const ngx_str_t &name,
                                          const std::string &path, char **rv)
{
    ngx_fd_t fd = ngx_open_file(path.c_str(),
                                NGX_FILE_RDONLY | NGX_FILE_NONBLOCK,
                                NGX_FILE_OPEN, 0);

    if (fd == NGX_INVALID_FILE) {
        ngx_err_t err = ngx_errno;
        *rv = err == NGX_ENOENT || err == NGX_ENOTDIR
              ? directive_error(cf, "unknown time zone \"%V\": there is no "
                                "%s; check the name (Area/City, as "
                                "Europe/Berlin), or install the tz database "
                                "(Debian's tzdata)", &name, path.c_str())
              : unreadable(cf, err, path);
        return std::nullopt;
    }

    OpenFile file{fd};
    ngx_file_info_t info;
    std::string bytes;

    if (ngx_fd_info(fd, &info) == NGX_FILE_ERROR) {
        *rv = unreadable(cf, ngx_errno, path);
        return std::nullopt;
    }

    if (ngx_is_dir(&info)) {
        *rv = directive_error(cf, "unknown time zone \"%V\": %s is a "
                              "directory of zones; name one of them",
                              &name, path.c_str());
        return std::nullopt;
    }

    if (!ngx_is_file(&info)) {
        *rv = directive_error(cf, "time zone file \"%s\" of tz=%V is not a "
                              "regular file", path.c_str(), &name);
        return std::nullopt;
    }

    if (ngx_err_t err = read_bytes(file, &bytes)) {
        *rv = unreadable(cf, err, path);
        return std::nullopt;
    }

    return bytes;
}

// The time zone `name` names; nothing, with the directive's error in *rv,
// if nginx cannot read it as one.
std::optional<TimeZone> read_time_zone(ngx_conf_t *cf, std::string_view name,
                                       char **rv)
{
    ngx_str_t text = arg_string(name);
    std::string path = zone_directory() + "/" + std::string(name);
    std::optional<std::string> bytes = read_zone_file(cf, text, path, rv);
    std::string why = "larger than 1 MB";

    if (!bytes) {
        return std::nullopt;
    }

    std::optional<TimeZone> zone = bytes->size() > kMaxZoneFileSize
                                   ? std::nullopt
                                   : TimeZone::from_tzif(*bytes, &why);

    if (!zone) {
        *rv = directive_error(cf, "time zone file \"%s\" of tz=%V is not "
                              "one nginx reads (%s): reinstall the tz "
                              "database, or set $TZDIR to another copy",
                              path.c_str(), &text, why.c_str());
    }

    return zone;
}

void destroy_calendar(void *data) noexcept
{
    static_cast<CalendarPeriods *>(data)->~CalendarPeriods();
}

}  // namespace

char *add_calendar(ngx_conf_t *cf, const ZoneParams &params, Zone *zone)
{
    char *rv = NGX_CONF_OK;
    std::optional<TimeZone> tz = params.tz.empty()
                                 ? std::optional(TimeZone::utc())
                                 : read_time_zone(cf, params.tz, &rv);

    if (!tz) {
        return rv;
    }

    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(cf->pool,
                                                   sizeof(CalendarPeriods));

    if (cln == nullptr) {
        return nginx_logged_error();
    }

    zone->calendar = new (cln->data) CalendarPeriods(
        std::move(*tz), params.period, params.period_start);
    cln->handler = destroy_calendar;
    zone->tz = arg_string(params.tz);
    return NGX_CONF_OK;
}

}  // namespace ratelimit
