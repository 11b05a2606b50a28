/* Memory accounting shared by memory.c (numpy handler) and memory_pymem.c
 * (Python allocator hooks).  Not parsed by cffi.
 *
 * Every counter is a relaxed atomic: allocators run in any thread, with or
 * without the GIL, and a counter only has to be right once the threads that
 * touched it are quiet (after stop).  The per-profile counters move only
 * while a session records with OPPROF_OPT_PROFILE_MEMORY; live always does.
 */
#ifndef OPPROF_MEMORY_COUNT_H
#define OPPROF_MEMORY_COUNT_H

#include <stdatomic.h>
#include <stdint.h>

#include "opprof_internal.h"

#define OPPROF_MEM_TAG_MASK 0xFFFFFFu   /* window tags fit the Python table's 24 bits */
#define OPPROF_MEM_SAMPLE_MIN 4096      /* smallest allocation or free that takes a sample */

typedef struct {
    _Atomic int64_t live;         /* bytes in blocks our hooks gave out and not yet freed */
    _Atomic int64_t peak;         /* highest live seen while recording (reset: live) */
    _Atomic int64_t alloc_bytes;
    _Atomic int64_t alloc_count;
    _Atomic int64_t freed_bytes;
    _Atomic int64_t held;         /* bytes of blocks tagged with the current window */
    _Atomic uint32_t window;      /* current window tag, never 0 */
} opprof_mem_counters;

extern opprof_mem_counters opprof_mem_g;
extern _Thread_local int opprof_mem_busy;   /* this thread is inside opprof_mem_record */

void opprof_mem_sample(int64_t live);
int opprof_mem_python_install_count(void);
int opprof_mem_python_untracked(void);

#define OPPROF_RELAXED memory_order_relaxed

static inline int opprof_mem_recording(void)
{
    return opprof_g_recording && (opprof_g_options & OPPROF_OPT_PROFILE_MEMORY);
}

static inline uint32_t opprof_mem_window(void)
{
    return atomic_load_explicit(&opprof_mem_g.window, OPPROF_RELAXED);
}

static inline void opprof_mem_raise_peak(int64_t live)
{
    int64_t p = atomic_load_explicit(&opprof_mem_g.peak, OPPROF_RELAXED);
    while (live > p && !atomic_compare_exchange_weak_explicit(&opprof_mem_g.peak, &p, live,
                                                              OPPROF_RELAXED, OPPROF_RELAXED)) {
    }
}

/* Attribute to the calling thread's innermost open event (or a "[memory]"
 * event) and sample the live bytes for the counter track.  The busy flag
 * stops recursion when the core itself allocates through a hooked allocator. */
static inline void opprof_mem_attribute(int64_t alloc, int64_t freed, int64_t live)
{
    if (opprof_mem_busy) {
        return;
    }
    opprof_mem_busy = 1;
    opprof_thread *t = opprof_thread_get();
    if (t != NULL) {
        opprof_mem_record(t, alloc, freed);
    }
    if (alloc >= OPPROF_MEM_SAMPLE_MIN || freed >= OPPROF_MEM_SAMPLE_MIN) {
        opprof_mem_sample(live);
    }
    opprof_mem_busy = 0;
}

/* A new block of n bytes.  Returns its window tag (0 when not recording). */
static inline uint32_t opprof_mem_count_alloc(int64_t n)
{
    opprof_mem_counters *c = &opprof_mem_g;
    int64_t live = atomic_fetch_add_explicit(&c->live, n, OPPROF_RELAXED) + n;
    if (!opprof_mem_recording()) {
        return 0;
    }
    atomic_fetch_add_explicit(&c->alloc_bytes, n, OPPROF_RELAXED);
    atomic_fetch_add_explicit(&c->alloc_count, 1, OPPROF_RELAXED);
    atomic_fetch_add_explicit(&c->held, n, OPPROF_RELAXED);
    opprof_mem_raise_peak(live);
    opprof_mem_attribute(n, 0, live);
    return opprof_mem_window();
}

/* A block of n bytes with window tag `tag` is freed. */
static inline void opprof_mem_count_free(int64_t n, uint32_t tag)
{
    opprof_mem_counters *c = &opprof_mem_g;
    int64_t live = atomic_fetch_sub_explicit(&c->live, n, OPPROF_RELAXED) - n;
    if (tag != 0 && tag == opprof_mem_window()) {
        atomic_fetch_sub_explicit(&c->held, n, OPPROF_RELAXED);
    }
    if (!opprof_mem_recording()) {
        return;
    }
    atomic_fetch_add_explicit(&c->freed_bytes, n, OPPROF_RELAXED);
    opprof_mem_attribute(0, n, live);
}

/* A block grows or shrinks from old_n to new_n bytes: counted as one
 * allocation of new_n and a free of old_n (what tracemalloc does too), with
 * live moving by the difference only.  Returns the new block's tag. */
static inline uint32_t opprof_mem_count_realloc(int64_t old_n, int64_t new_n, uint32_t old_tag)
{
    opprof_mem_counters *c = &opprof_mem_g;
    int64_t live = atomic_fetch_add_explicit(&c->live, new_n - old_n, OPPROF_RELAXED) + new_n - old_n;
    uint32_t w = opprof_mem_window();
    int recording = opprof_mem_recording();
    uint32_t tag = 0;
    if (old_tag != 0 && old_tag == w) {
        atomic_fetch_add_explicit(&c->held, new_n - old_n, OPPROF_RELAXED);
        tag = w;
    } else if (recording) {
        atomic_fetch_add_explicit(&c->held, new_n, OPPROF_RELAXED);
        tag = w;
    }
    if (!recording) {
        return tag;
    }
    atomic_fetch_add_explicit(&c->alloc_bytes, new_n, OPPROF_RELAXED);
    atomic_fetch_add_explicit(&c->alloc_count, 1, OPPROF_RELAXED);
    atomic_fetch_add_explicit(&c->freed_bytes, old_n, OPPROF_RELAXED);
    opprof_mem_raise_peak(live);
    opprof_mem_attribute(new_n, old_n, live);
    return tag;
}

#endif
