/*
 * The tests' clock shim: an LD_PRELOAD object that moves a process's wall
 * clock (gettimeofday, time, clock_gettime of CLOCK_REALTIME and
 * CLOCK_REALTIME_COARSE) by an offset the test sets, and passes every other
 * clock (CLOCK_MONOTONIC above all: nginx's and Redis's timers) through
 * unchanged.  RateLimitTest::Clock (t/lib) writes the offset; several
 * processes (Redis, nginx masters and workers) preloaded with one file
 * share one clock.
 *
 * The file named by RATELIMIT_CLOCK_FILE holds two 64-bit integers in the
 * machine's byte order: the offset in nanoseconds (signed, added to the
 * real time) and its bitwise complement.  It is mapped shared, read only,
 * once per process, so that a test's write reaches running processes at
 * once.  A pair whose words disagree is a write caught half done (the
 * kernel need not store 8 bytes at once): the process keeps the last pair
 * it read whole, so that it reads the old offset or the new one, never a
 * torn one.  Without the variable, or with no file of 16 bytes there, the
 * real time passes through.
 *
 * What made libfaketime deadlock redis-server at start (its lock taken
 * while jemalloc initialises, libfaketime #130) is absent here: no malloc,
 * no stdio, no dlsym, no lock.  The real time comes from the system call,
 * the file is opened and mapped by system calls, and the mapping is set up
 * by whichever thread first needs it, published with an atomic
 * compare-and-swap (a thread that loses unmaps its own).  A constructor
 * sets it up at load, before nginx's workers drop their environment.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NSEC_PER_SEC  1000000000LL

/* The offset, ns, and its complement, as the file holds them. */
typedef struct {
    int64_t  offset;
    int64_t  check;
} clock_pair_t;

/* No file: no offset. */
static const clock_pair_t  no_offset = { 0, ~(int64_t) 0 };

/* The file's mapping, or &no_offset; NULL until the first reader. */
static const clock_pair_t  *shared_pair;

/* The last offset read whole (ns). */
static int64_t  last_offset;


static const clock_pair_t *
map_clock_file(void)
{
    const char    *path;
    long           fd, addr;
    struct stat    st;
    const clock_pair_t  *pair;

    path = getenv("RATELIMIT_CLOCK_FILE");
    if (path == NULL || path[0] == '\0') {
        return &no_offset;
    }

    fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return &no_offset;
    }

    pair = &no_offset;

    /* A shorter file would fault on reading past its end. */
    if (syscall(SYS_fstat, fd, &st) == 0
        && st.st_size >= (off_t) sizeof(clock_pair_t))
    {
        addr = syscall(SYS_mmap, NULL, sizeof(clock_pair_t), PROT_READ,
                       MAP_SHARED, fd, 0);
        if (addr != (long) MAP_FAILED) {
            pair = (const clock_pair_t *) addr;
        }
    }

    syscall(SYS_close, fd);
    return pair;
}


static const clock_pair_t *
clock_pair(void)
{
    const clock_pair_t  *pair, *expected;
    int                  saved_errno;

    pair = __atomic_load_n(&shared_pair, __ATOMIC_ACQUIRE);
    if (pair != NULL) {
        return pair;
    }

    /* The caller's errno is not ours to change. */
    saved_errno = errno;
    pair = map_clock_file();
    expected = NULL;

    if (!__atomic_compare_exchange_n(&shared_pair, &expected, pair, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    {
        if (pair != &no_offset) {
            syscall(SYS_munmap, (void *) pair, sizeof(clock_pair_t));
        }
        pair = expected;
    }

    errno = saved_errno;
    return pair;
}


__attribute__((constructor))
static void
clock_shim_init(void)
{
    (void) clock_pair();
}


/* The offset now (ns): the file's, or the last one read whole. */
static int64_t
clock_offset(void)
{
    const clock_pair_t  *pair;
    int64_t              offset, check;

    pair = clock_pair();
    offset = __atomic_load_n(&pair->offset, __ATOMIC_RELAXED);
    check = __atomic_load_n(&pair->check, __ATOMIC_RELAXED);

    if (check != ~offset) {
        return __atomic_load_n(&last_offset, __ATOMIC_RELAXED);
    }

    __atomic_store_n(&last_offset, offset, __ATOMIC_RELAXED);
    return offset;
}


/* The real time of `id` moved by the offset. */
static int
shifted_time(clockid_t id, struct timespec *ts)
{
    int64_t  ns, sec;

    if (syscall(SYS_clock_gettime, id, ts) != 0) {
        return -1;
    }

    ns = ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec + clock_offset();

    /* Rounded down, before 1970 too. */
    sec = ns / NSEC_PER_SEC;
    if (ns % NSEC_PER_SEC < 0) {
        sec--;
    }

    ts->tv_sec = sec;
    ts->tv_nsec = ns - sec * NSEC_PER_SEC;
    return 0;
}


int
clock_gettime(clockid_t id, struct timespec *ts)
{
    if (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE) {
        return shifted_time(id, ts);
    }

    return syscall(SYS_clock_gettime, id, ts);
}


int
gettimeofday(struct timeval *tv, void *tz)
{
    struct timespec  ts;
    struct timezone *zone;

    if (shifted_time(CLOCK_REALTIME, &ts) != 0) {
        return -1;
    }

    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;

    /* As glibc: an obsolete zone argument reads zero. */
    if (tz != NULL) {
        zone = tz;
        zone->tz_minuteswest = 0;
        zone->tz_dsttime = 0;
    }

    return 0;
}


time_t
time(time_t *t)
{
    struct timespec  ts;

    if (shifted_time(CLOCK_REALTIME, &ts) != 0) {
        return (time_t) -1;
    }

    if (t != NULL) {
        *t = ts.tv_sec;
    }

    return ts.tv_sec;
}
