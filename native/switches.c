/* Was an op's thread switched out while it ran?  One bit per event, for the
 * cost of two loads.
 *
 * A perf_event counting the thread's own task clock exposes a page the kernel
 * rewrites (under a sequence counter, `lock`) each time the thread is
 * scheduled in or out.  An op whose begin and end read the same counter ran
 * without leaving its CPU: its wall time is work, even on a machine where
 * other processes took the CPU between ops.  Measured here (2 cores, 4
 * CPU-bound processes): the counter changed for 256-260 of 2,000 ops of
 * 200 us, matching getrusage's involuntary switches (257-261); the ops that
 * kept it ran within 1% of their CPU time, the others 100% over it.
 *
 * No counter is read per op otherwise (the page is not a clock: without the
 * kernel's user-time capability, absent on this VM, it cannot time the op).
 * Where perf_event_open is refused (a seccomp profile, perf_event_paranoid 3)
 * the thread reads a word that never changes, and opprof_switches_supported
 * says so: no op is flagged, and every event's wait is -1 (not measured).
 *
 * How long a switched op waited: the thread's run-queue wait in
 * /proc/thread-self/schedstat (second field, ns), read at the op's end and
 * at its begin.  A read costs a syscall, so a thread reads it only when its
 * counter moved since its last reading: at most twice per switch however
 * many ops run, never on an op that ran through (the counter says the wait
 * did not change).  Its difference over the op is the time the op was
 * runnable but not running; a sleep or a lock wait is not in it (the op's
 * own time, as in its wall time).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/perf_event.h>
#endif

#include "core_internal.h"

static const uint32_t never_changes = 0;
static _Atomic int supported = -1; /* -1: no thread has tried; 0 refused; 1 works */

int opprof_schedstat_read(int fd, int64_t *run, int64_t *wait)
{
    char buf[128];
    if (fd < 0)
        return -1;
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *end;
    unsigned long long r = strtoull(buf, &end, 10);
    if (end == buf)
        return -1;
    char *wait_at = end;
    unsigned long long w = strtoull(wait_at, &end, 10);
    if (end == wait_at)
        return -1;
    *run = (int64_t)r;
    *wait = (int64_t)w;
    return 0;
}

/* The thread's run-queue wait so far, ns; -1 when it cannot be read. */
static int64_t read_wait(int fd)
{
    int64_t run, wait;
    return opprof_schedstat_read(fd, &run, &wait) == 0 ? wait : -1;
}

void core_switches_refresh(opprof_thread *t)
{
    /* A switch during the read leaves the counter moved: read again (and, past
     * the last try, keep the old counter so that the next op reads again). */
    for (int tries = 0;; tries++) {
        uint32_t before = *t->switches;
        int64_t wait = read_wait(t->sched_fd);
        if (*t->switches == before || tries == 2) {
            t->seen_at = before;
            t->wait_seen = wait;
            return;
        }
    }
}

/* No counter: the constant word, and no wait known. */
static void switches_unset(opprof_thread *t)
{
    t->switches = &never_changes;
    t->switch_fd = -1;
    t->switch_page = NULL;
    t->sched_fd = -1;
    t->seen_at = never_changes;
    t->wait_seen = -1;
}

void core_switches_open(opprof_thread *t)
{
    switches_unset(t);
#if defined(__linux__) && defined(SYS_perf_event_open)
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.size = sizeof attr;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.exclude_hv = 1;
    int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        atomic_store(&supported, 0);
        return;
    }
    long page_size = sysconf(_SC_PAGESIZE);
    void *page = mmap(NULL, (size_t)page_size, PROT_READ, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) {
        close(fd);
        atomic_store(&supported, 0);
        return;
    }
    t->switch_fd = fd;
    t->switch_page = page;
    t->switches = &((volatile struct perf_event_mmap_page *)page)->lock;
    t->sched_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    core_switches_refresh(t);
    atomic_store(&supported, 1);
#endif
}

void core_switches_close(opprof_thread *t)
{
    if (t->switch_page != NULL)
        munmap(t->switch_page, (size_t)sysconf(_SC_PAGESIZE));
    if (t->switch_fd >= 0)
        close(t->switch_fd);
    if (t->sched_fd >= 0)
        close(t->sched_fd);
    switches_unset(t);
}

int opprof_switches_supported(void) { return atomic_load(&supported); }
