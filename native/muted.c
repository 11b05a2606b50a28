/* Threads left out of the figures ("muted"): threads a test started that
 * were still running after it.  Their ops, scopes and
 * allocations would otherwise land in whichever test records next.
 *
 * The plugin sets the list between sessions (opprof_mute_threads).  Each
 * thread reads it once per session, when it moves its own state to the new
 * session (core_thread_reset) or its memory counters to the new window
 * (opprof_mem_tls_slow), and keeps the answer in a flag the per-op and
 * per-allocation paths test; a muted thread costs nothing more per op.
 * Entries are atomics: a thread may read while the list is rewritten (a
 * straggler syncing between sessions), and then sees either answer.
 */
#include <stdatomic.h>
#include <stdint.h>

#include "opprof_internal.h"

#define OPPROF_MAX_MUTED 1024

static _Atomic uint64_t g_muted[OPPROF_MAX_MUTED];
static _Atomic int64_t g_muted_count;

int opprof_mute_threads(const uint64_t *tids, int64_t n)
{
    if (n < 0 || (n > 0 && tids == NULL))
        return opprof_fail(OPPROF_E_ARG, "opprof_mute_threads: bad list (n=%lld)", (long long)n);
    if (n > OPPROF_MAX_MUTED)
        n = OPPROF_MAX_MUTED; /* the oldest beyond the bound record as before */
    atomic_store_explicit(&g_muted_count, 0, memory_order_release);
    for (int64_t i = 0; i < n; i++)
        atomic_store_explicit(&g_muted[i], tids[i], memory_order_relaxed);
    atomic_store_explicit(&g_muted_count, n, memory_order_release);
    return OPPROF_OK;
}

int opprof_thread_muted(uint64_t tid)
{
    int64_t n = atomic_load_explicit(&g_muted_count, memory_order_acquire);
    for (int64_t i = 0; i < n; i++)
        if (atomic_load_explicit(&g_muted[i], memory_order_relaxed) == tid)
            return 1;
    return 0;
}
