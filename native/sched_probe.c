/* How long a round's threads waited for a CPU, read at the round's boundaries
 * (pytest_opprof/capture/contention.py says what the figures mean).
 *
 * Linux keeps, per thread, /proc/<pid>/task/<tid>/schedstat: ns on a CPU,
 * ns runnable and waiting on a run queue, time slices.  The plugin reads the
 * test's own thread as the body starts and ends, and every other thread of
 * the process before and after the round.  In Python that was two listings,
 * a dict of open files and a parse per thread: about 26 us a round, more
 * than the rest of a trivial test's profile start.  Here it is one call per
 * reading; the files stay open between rounds, and the thread directory is
 * listed again only when its link count (threads + 2) moved or a file
 * failed (its thread exited).
 *
 * Calls come from the thread that runs the rounds, with the GIL released (a
 * cffi call); the lock keeps two callers from sharing the tables anyway.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "opprof_internal.h"

#define TASKS "/proc/self/task"

typedef struct {
    int64_t tid;
    int fd;
} thread_file;

typedef struct {
    int64_t tid, run_ns, wait_ns;
} reading;

/* One probe's begin readings: probes share the open files, not the readings, so
 * a probe used inside another's round leaves the outer one's figures alone. */
struct opprof_sched_probe {
    reading *begin;
    int64_t count, capacity;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static thread_file *g_files;
static int64_t g_count, g_capacity;
static int64_t g_links = -1; /* the task directory's link count when listed */
static pid_t g_pid;          /* the process that listed it (a fork's child lists again) */
static int g_own_fd = -1;
static int64_t g_own_tid; /* whose schedstat g_own_fd is */

static void close_file(int64_t i)
{
    close(g_files[i].fd);
    g_files[i] = g_files[--g_count];
}

static int64_t find(int64_t tid)
{
    for (int64_t i = 0; i < g_count; i++)
        if (g_files[i].tid == tid)
            return i;
    return -1;
}

/* Bring the table in line with the task directory: open the threads that are
 * new, close those gone.  -1 when the directory cannot be read. */
static int relist(void)
{
    struct stat st;
    if (stat(TASKS, &st) != 0)
        return -1;
    pid_t pid = getpid();
    if ((int64_t)st.st_nlink == g_links && pid == g_pid)
        return 0;
    if (pid != g_pid) { /* the files name the parent's threads */
        while (g_count > 0)
            close_file(g_count - 1);
        g_pid = pid;
    }
    DIR *dir = opendir(TASKS);
    if (dir == NULL)
        return -1;
    /* Mark every known file unseen (tid negated), then unmark those listed. */
    for (int64_t i = 0; i < g_count; i++)
        g_files[i].tid = -g_files[i].tid;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        char *end;
        long long tid = strtoll(entry->d_name, &end, 10);
        if (end == entry->d_name || *end != 0 || tid <= 0)
            continue;
        int64_t at = find(-tid);
        if (at >= 0) {
            g_files[at].tid = tid;
            continue;
        }
        char path[64];
        snprintf(path, sizeof path, TASKS "/%lld/schedstat", tid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue; /* exited meanwhile */
        if (g_count == g_capacity) {
            int64_t capacity = g_capacity ? 2 * g_capacity : 16;
            thread_file *grown = realloc(g_files, (size_t)capacity * sizeof *grown);
            if (grown == NULL) {
                close(fd);
                break;
            }
            g_files = grown;
            g_capacity = capacity;
        }
        g_files[g_count++] = (thread_file){tid, fd};
    }
    closedir(dir);
    for (int64_t i = g_count - 1; i >= 0; i--)
        if (g_files[i].tid < 0)
            close_file(i);
    g_links = (int64_t)st.st_nlink;
    return 0;
}

opprof_sched_probe *opprof_sched_probe_new(void) { return calloc(1, sizeof(opprof_sched_probe)); }

void opprof_sched_probe_free(opprof_sched_probe *probe)
{
    if (probe != NULL)
        free(probe->begin);
    free(probe);
}

static const reading *begin_of(const opprof_sched_probe *probe, int64_t tid)
{
    for (int64_t i = 0; i < probe->count; i++)
        if (probe->begin[i].tid == tid)
            return &probe->begin[i];
    return NULL;
}

int opprof_sched_others(opprof_sched_probe *probe, int begin, int64_t *out)
{
    if (probe == NULL || out == NULL)
        return opprof_fail(OPPROF_E_ARG, "opprof_sched_others: no probe or no output");
    int64_t own = (int64_t)syscall(SYS_gettid);
    pthread_mutex_lock(&g_lock);
    out[0] = out[1] = 0;
    if (relist() != 0) {
        pthread_mutex_unlock(&g_lock);
        return opprof_fail(OPPROF_E_UNSUPPORTED, "opprof_sched_others: %s cannot be read", TASKS);
    }
    if (begin && probe->capacity < g_count) {
        reading *grown = realloc(probe->begin, (size_t)g_count * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&g_lock);
            return opprof_fail(OPPROF_E_NOMEM, "opprof_sched_others: out of memory");
        }
        probe->begin = grown;
        probe->capacity = g_count;
    }
    int64_t kept = 0;
    for (int64_t i = g_count - 1; i >= 0; i--) {
        int64_t run, wait;
        if (g_files[i].tid == own)
            continue; /* listed with the others: the rounds can move to another thread */
        if (opprof_schedstat_read(g_files[i].fd, &run, &wait) !=
            0) { /* exited: list again next time */
            close_file(i);
            g_links = -1;
            continue;
        }
        if (begin) {
            probe->begin[kept++] = (reading){g_files[i].tid, run, wait};
            continue;
        }
        /* A thread started since the begin reading counts from its own start. */
        const reading *was = begin_of(probe, g_files[i].tid);
        out[0] += was != NULL ? run - was->run_ns : run;
        out[1] += was != NULL ? wait - was->wait_ns : wait;
    }
    if (begin)
        probe->count = kept;
    pthread_mutex_unlock(&g_lock);
    return OPPROF_OK;
}

int opprof_sched_own(int64_t *out)
{
    if (out == NULL)
        return opprof_fail(OPPROF_E_ARG, "opprof_sched_own: no output");
    int64_t tid = (int64_t)syscall(SYS_gettid);
    pthread_mutex_lock(&g_lock);
    if (g_own_fd < 0 || g_own_tid != tid) { /* the file names the thread that opened it */
        if (g_own_fd >= 0)
            close(g_own_fd);
        g_own_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        g_own_tid = tid;
    }
    int ok = g_own_fd >= 0 && opprof_schedstat_read(g_own_fd, &out[0], &out[1]) == 0;
    pthread_mutex_unlock(&g_lock);
    if (!ok)
        return opprof_fail(OPPROF_E_UNSUPPORTED,
                           "opprof_sched_own: /proc/thread-self/schedstat cannot be read");
    return OPPROF_OK;
}

void opprof_sched_close(void)
{
    pthread_mutex_lock(&g_lock);
    while (g_count > 0)
        close_file(g_count - 1);
    free(g_files);
    g_files = NULL;
    g_capacity = 0;
    g_links = -1;
    if (g_own_fd >= 0)
        close(g_own_fd);
    g_own_fd = -1;
    g_own_tid = 0;
    pthread_mutex_unlock(&g_lock);
}
