/* Memory accounting, the counters (model and interface: memory_count.h): a
 * shared net/peak pair, per-thread totals, and the live-bytes sample buffer.
 * Both allocator hooks count through them: the NEP 49 numpy handler
 * (memory.c) and the Python allocator hooks (memory_pymem.c).  Depends on
 * base.c and the core (opprof_mem_record, the clock); nothing here calls
 * the hooks.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "opprof_internal.h"
#include "memory.h"
#include "memory_count.h"

/* ---- counters -------------------------------------------------------- */

_Atomic int64_t opprof_mem_net;
_Atomic int64_t opprof_mem_held[OPPROF_MEM_HELD_SLOTS];
_Atomic uint32_t opprof_mem_held_top;
_Atomic int64_t opprof_mem_peak;
_Atomic uint32_t opprof_mem_window_id = 1;
_Thread_local opprof_mem_tls *opprof_mem_tl __attribute__((tls_model("initial-exec")));

/* Every thread's counters, live or exited; an exited thread's entry is
 * reused by the next new thread after its counts move to g_retired. */
static pthread_mutex_t g_tls_lock = PTHREAD_MUTEX_INITIALIZER;
static opprof_mem_tls *g_tls_list;
static opprof_mem_tls g_retired; /* sums of reused entries, for g_retired.window */
static pthread_key_t g_tls_key;
static pthread_once_t g_tls_once = PTHREAD_ONCE_INIT;

static void tls_exit(void *p)
{
    opprof_mem_tls *tl = p;
    opprof_mem_tl = NULL; /* a later free in this thread's teardown takes a fresh entry */
    pthread_mutex_lock(&g_tls_lock);
    tl->dead = 1;
    pthread_mutex_unlock(&g_tls_lock);
}

static void tls_key_make(void) { pthread_key_create(&g_tls_key, tls_exit); }

static void fold(opprof_mem_tls *into, const opprof_mem_tls *from)
{
    into->alloc_bytes += from->alloc_bytes;
    into->alloc_count += from->alloc_count;
    into->freed_bytes += from->freed_bytes;
    into->freed_tagged += from->freed_tagged;
}

static uint32_t tls_window(const opprof_mem_tls *tl)
{
    return __atomic_load_n(&tl->window, __ATOMIC_ACQUIRE);
}

opprof_mem_tls *opprof_mem_tls_slow(uint32_t window)
{
    opprof_mem_tls *tl = opprof_mem_tl;
    if (tl == NULL) {
        pthread_once(&g_tls_once, tls_key_make);
        pthread_mutex_lock(&g_tls_lock);
        for (tl = g_tls_list; tl != NULL && !tl->dead; tl = tl->next) {
        }
        if (tl != NULL) {
            if (tls_window(tl) == window) {
                if (g_retired.window != window) {
                    memset(&g_retired, 0, sizeof(g_retired));
                    g_retired.window = window;
                }
                fold(&g_retired, tl);
            }
            tl->dead = 0;
            tl->window = 0; /* under the lock: a sum never counts it twice */
        } else {
            tl = calloc(1, sizeof(*tl));
            if (tl != NULL) {
                tl->next = g_tls_list;
                g_tls_list = tl;
            }
        }
        pthread_mutex_unlock(&g_tls_lock);
        if (tl == NULL) {
            return NULL;
        }
        pthread_setspecific(g_tls_key, tl);
        opprof_mem_tl = tl;
        tl->tid = (uint64_t)syscall(SYS_gettid);
    }
    /* Zero first, then publish the window: a reader that sees the new window
     * never sees the old counts. */
    tl->alloc_bytes = tl->alloc_count = tl->freed_bytes = tl->freed_tagged = 0;
    tl->core = NULL; /* fetched again at the window's first attribution */
    tl->muted = opprof_thread_muted(tl->tid);
    __atomic_store_n(&tl->window, window, __ATOMIC_RELEASE);
    return tl;
}

/* Sum of every thread's counters for the current window. */
static void tls_sum(opprof_mem_tls *sum)
{
    uint32_t w = opprof_mem_window();
    memset(sum, 0, sizeof(*sum));
    pthread_mutex_lock(&g_tls_lock);
    for (opprof_mem_tls *tl = g_tls_list; tl != NULL; tl = tl->next) {
        if (tls_window(tl) == w) {
            fold(sum, tl);
        }
    }
    if (g_retired.window == w) {
        fold(sum, &g_retired);
    }
    pthread_mutex_unlock(&g_tls_lock);
}

#define SAMPLE_DEFAULT_CAPACITY 65536

static opprof_memory_sample *g_samples;
static int64_t g_sample_cap; /* size of g_samples */
static int64_t g_sample_want = SAMPLE_DEFAULT_CAPACITY;
static _Atomic int64_t g_sample_next; /* next index handed out */

void opprof_mem_sample(int64_t net)
{
    if (g_samples == NULL) {
        return;
    }
    int64_t i = atomic_fetch_add_explicit(&g_sample_next, 1, memory_order_relaxed);
    if (i < g_sample_cap) {
        g_samples[i].time_ns = opprof_now_ns();
        g_samples[i].net_bytes = net;
    }
}

int64_t opprof_memory_sample_min_bytes(void) { return OPPROF_MEM_SAMPLE_MIN; }

int opprof_memory_set_sample_capacity(int64_t max_samples)
{
    if (max_samples < 0) {
        return opprof_fail(OPPROF_E_ARG, "sample capacity must be >= 0, got %lld",
                           (long long)max_samples);
    }
    if (opprof_g_recording) {
        return opprof_fail(OPPROF_E_STATE,
                           "cannot change the memory sample capacity while recording");
    }
    g_sample_want = max_samples;
    return OPPROF_OK;
}

int opprof_memory_reset(void)
{
    if (opprof_g_recording) {
        return opprof_fail(OPPROF_E_STATE, "cannot reset memory counters while a profile records");
    }
    if (g_sample_cap != g_sample_want) {
        free(g_samples);
        g_samples = NULL;
        g_sample_cap = 0;
        if (g_sample_want > 0) {
            g_samples = calloc((size_t)g_sample_want, sizeof(opprof_memory_sample));
            if (g_samples == NULL) {
                return opprof_fail(OPPROF_E_NOMEM, "no memory for %lld memory samples",
                                   (long long)g_sample_want);
            }
            g_sample_cap = g_sample_want;
        }
    }
    atomic_store_explicit(&g_sample_next, 0, memory_order_relaxed);
    atomic_store_explicit(&opprof_mem_net, 0, memory_order_relaxed);
    atomic_store_explicit(&opprof_mem_peak, 0, memory_order_relaxed);
    /* Thread counters of older windows read as zero and are zeroed by their
     * owners.  Tags are 24 bits wide in the Python pointer table; 0 = none. */
    uint32_t w = (opprof_mem_window() + 1) & OPPROF_MEM_TAG_MASK;
    atomic_store_explicit(&opprof_mem_window_id, w ? w : 1, memory_order_release);
    /* After the new tag: a block of the old window freed from now on no longer
     * moves the table. */
    uint32_t top = atomic_load_explicit(&opprof_mem_held_top, memory_order_relaxed);
    for (uint32_t i = 0; i < top; i++) {
        atomic_store_explicit(&opprof_mem_held[i], 0, memory_order_relaxed);
    }
    atomic_store_explicit(&opprof_mem_held_top, 0, memory_order_relaxed);
    return OPPROF_OK;
}

int opprof_memory_held_by_name(uint32_t *names, int64_t *bytes, int64_t capacity, int64_t *written)
{
    if (names == NULL || bytes == NULL || written == NULL || capacity < 0) {
        return opprof_fail(OPPROF_E_ARG, "opprof_memory_held_by_name: bad output buffers");
    }
    int64_t n = 0;
    uint32_t top = atomic_load_explicit(&opprof_mem_held_top, memory_order_acquire);
    for (uint32_t i = 0; i < top && n < capacity; i++) {
        int64_t held = atomic_load_explicit(&opprof_mem_held[i], memory_order_relaxed);
        if (held > 0) {
            names[n] = i == 0 ? UINT32_MAX : i - 1;
            bytes[n] = held;
            n++;
        }
    }
    *written = n;
    return OPPROF_OK;
}

/* The counter fields of opprof_memory_stats: every thread's totals in the
 * current window, net and peak, samples taken and dropped. */
void opprof_mem_count_stats(opprof_memory_stats *out)
{
    opprof_mem_tls sum;
    tls_sum(&sum);
    int64_t taken = atomic_load_explicit(&g_sample_next, memory_order_relaxed);
    out->net_bytes = atomic_load_explicit(&opprof_mem_net, memory_order_relaxed);
    out->peak_bytes = atomic_load_explicit(&opprof_mem_peak, memory_order_relaxed);
    out->allocated_bytes = sum.alloc_bytes;
    out->allocations = sum.alloc_count;
    out->freed_bytes = sum.freed_bytes;
    out->held_bytes = sum.alloc_bytes - sum.freed_tagged;
    out->samples = taken < g_sample_cap ? taken : g_sample_cap;
    out->samples_dropped = taken > g_sample_cap ? taken - g_sample_cap : 0;
}

int opprof_memory_samples(opprof_memory_sample *out, int64_t capacity, int64_t *written)
{
    if (out == NULL || written == NULL || capacity < 0) {
        return opprof_fail(OPPROF_E_ARG, "opprof_memory_samples: bad output buffer");
    }
    int64_t taken = atomic_load_explicit(&g_sample_next, memory_order_acquire);
    int64_t n = taken < g_sample_cap ? taken : g_sample_cap;
    if (n > capacity) {
        n = capacity;
    }
    if (n > 0) {
        memcpy(out, g_samples, (size_t)n * sizeof(opprof_memory_sample));
    }
    *written = n;
    return OPPROF_OK;
}

/* ---- fork (fork.c) ----------------------------------------------------- */

/* The thread list is a leaf lock: taken across fork().  In the child only
 * the forking thread exists: every other entry is dead, to be reused. */
void opprof_mem_count_atfork(int phase)
{
    if (phase == OPPROF_FORK_PREPARE) {
        pthread_mutex_lock(&g_tls_lock);
        return;
    }
    if (phase == OPPROF_FORK_CHILD) {
        for (opprof_mem_tls *tl = g_tls_list; tl != NULL; tl = tl->next) {
            if (tl != opprof_mem_tl) {
                tl->dead = 1;
            }
        }
    }
    pthread_mutex_unlock(&g_tls_lock);
}
