/* Memory accounting: the counters' interface (memory_count.c implements
 * it), for the two allocator hooks, memory.c (numpy handler) and
 * memory_pymem.c (Python allocators).  Not parsed by cffi.  The per-
 * allocation functions are inline: an allocation pays no call into the
 * counters unless a session records memory.
 *
 * Counting happens only while a session records with
 * OPPROF_OPT_PROFILE_MEMORY, inside a "window" opened by opprof_memory_reset:
 *
 * - net: bytes allocated minus bytes freed since the window opened, one
 *   relaxed atomic shared by all threads (the peak needs a global view);
 * - totals (allocated, count, freed) in per-thread counters: no atomic, no
 *   shared cache line.  A thread's counters carry the window they belong to
 *   and the owner zeroes them when it first counts in a newer window, so a
 *   reset never writes to another thread's counters;
 * - held bytes (the leak): every block allocated in the window carries the
 *   window's tag; held = allocated - (freed blocks carrying the tag), the
 *   latter counted whenever such a block is freed, also after stop.
 *
 * Outside a window the hooks only strip or write the block header: no
 * counter moves, so allocations made after stop (the drain) never count.
 */
#ifndef OPPROF_MEMORY_COUNT_H
#define OPPROF_MEMORY_COUNT_H

#include <stdatomic.h>
#include <stdint.h>

#include "hotpath.h"

#define OPPROF_MEM_TAG_MASK 0xFFFFFFu /* window tags fit the Python table's 24 bits */
#define OPPROF_MEM_SAMPLE_MIN 4096    /* smallest allocation or free that takes a sample */

/* One thread's counters (memory_count.c keeps them in a registry for summing). */
typedef struct opprof_mem_tls {
    uint32_t window; /* the window these counts belong to */
    int busy;        /* inside opprof_mem_record: do not recurse */
    int64_t alloc_bytes;
    int64_t alloc_count;
    int64_t freed_bytes;
    int64_t freed_tagged; /* bytes of freed blocks tagged with `window` */
    opprof_thread *core;  /* the core's state for this thread (see opprof_mem_attribute) */
    struct opprof_mem_tls *next;
    int dead;     /* owner thread exited; counts kept until reused */
    uint64_t tid; /* OS thread id of the owner */
    int muted;    /* this window counts nothing of this thread (muted.c) */
} opprof_mem_tls;

extern _Atomic int64_t opprof_mem_net;
extern _Atomic int64_t opprof_mem_peak;
extern _Atomic uint32_t opprof_mem_window_id; /* current window tag, never 0 */
/* initial-exec: one TLS load per allocation instead of a __tls_get_addr
 * call (-2.5 ns per malloc+free).  The core's state pointer uses it too; the
 * module's static TLS block must stay a few pointers (a dlopen'ed module
 * only gets the small static TLS surplus): keep per-thread arrays on the heap. */
extern _Thread_local opprof_mem_tls *opprof_mem_tl __attribute__((tls_model("initial-exec")));

opprof_mem_tls *opprof_mem_tls_slow(uint32_t window); /* create or roll to `window` */
void opprof_mem_sample(int64_t net);
/* Fills the counter fields of *out (opprof_memory_stats in memory.h): net,
 * peak, the window's totals summed over threads, samples. */
struct opprof_memory_stats;
void opprof_mem_count_stats(struct opprof_memory_stats *out);

/* memory_pymem.c, for opprof_memory_stats_get in memory.c. */
int opprof_mem_python_install_count(void);
int opprof_mem_python_untracked(void);

#define OPPROF_RELAXED memory_order_relaxed

/* Bytes of numpy blocks allocated in the window and not freed yet, by the op
 * that allocated them: slot 0 when no event was open, slot n + 1 for the
 * interned name n (names past the table share slot 0).  A block's header keeps
 * its slot; the table is cleared when a window opens.  What a test leaks, op
 * by op (opprof_memory_held_by_name). */
#define OPPROF_MEM_HELD_SLOTS 16384
extern _Atomic int64_t opprof_mem_held[OPPROF_MEM_HELD_SLOTS];
extern _Atomic uint32_t opprof_mem_held_top; /* slots in use since the window opened */

static inline int opprof_mem_recording(void)
{
    /* One load: opprof_g_active holds the options only while a session records. */
    return (opprof_g_active & OPPROF_OPT_PROFILE_MEMORY) != 0;
}

static inline uint32_t opprof_mem_window(void)
{
    return atomic_load_explicit(&opprof_mem_window_id, OPPROF_RELAXED);
}

/* The calling thread's counters for window w; NULL only when out of memory. */
static inline opprof_mem_tls *opprof_mem_tls_get(uint32_t w)
{
    opprof_mem_tls *tl = opprof_mem_tl;
    if (__builtin_expect(tl != NULL && tl->window == w, 1)) {
        return tl;
    }
    return opprof_mem_tls_slow(w);
}

static inline int64_t opprof_mem_move_net(int64_t delta)
{
    int64_t net = atomic_fetch_add_explicit(&opprof_mem_net, delta, OPPROF_RELAXED) + delta;
    if (delta > 0) {
        int64_t p = atomic_load_explicit(&opprof_mem_peak, OPPROF_RELAXED);
        while (net > p && !atomic_compare_exchange_weak_explicit(&opprof_mem_peak, &p, net,
                                                                 OPPROF_RELAXED, OPPROF_RELAXED)) {
        }
    }
    return net;
}

/* The per-allocation part of opprof_mem_record, inlined (a call into the
 * core per allocation and free cost more than the counting): the innermost
 * open event's counters, or the thread's summed "[memory]" record.  Returns 0
 * when opprof_mem_record must do it: the thread's first loose allocation of a
 * session, a "[memory]" event per allocation, a state from an older session. */
static inline int opprof_mem_record_fast(opprof_thread *t, int64_t alloc, int64_t freed)
{
    if (t->innermost >= 0) {
        opprof_event *ev = &t->open[t->innermost].ev;
        ev->self_alloc_bytes += alloc;
        ev->self_free_bytes += freed;
        ev->self_alloc_count += alloc > 0;
        return 1;
    }
    if ((opprof_hot_active() & OPPROF_OPT_MEMORY_EVENTS) || !t->loose_used ||
        atomic_load_explicit(&t->generation, OPPROF_RELAXED) !=
            atomic_load_explicit(&core_g.generation, memory_order_acquire)) {
        return 0;
    }
    t->loose.self_alloc_bytes += alloc;
    t->loose.self_free_bytes += freed;
    t->loose.self_alloc_count += alloc > 0;
    return 1;
}

/* Attribute to the calling thread's innermost open event (or a "[memory]"
 * event) and sample the net bytes for the counter track.  The busy flag stops
 * recursion when the core itself allocates through a hooked allocator. */
static inline void opprof_mem_attribute(opprof_mem_tls *tl, int64_t alloc, int64_t freed,
                                        int64_t net)
{
    if (tl->busy) {
        return;
    }
    /* The core's state pointer is stable for the thread's life: fetching it
     * once a window keeps its lookup and generation check off the
     * per-allocation path.  Fetched only here, while recording, never from a
     * free on a control path that may hold the core's locks. */
    opprof_thread *t = tl->core;
    if (__builtin_expect(t == NULL || !opprof_mem_record_fast(t, alloc, freed), 0)) {
        tl->busy = 1;
        if (tl->core == NULL) {
            tl->core = opprof_thread_get();
        }
        if (tl->core != NULL) {
            opprof_mem_record(tl->core, alloc, freed);
        }
        tl->busy = 0;
    }
    if (alloc >= OPPROF_MEM_SAMPLE_MIN || freed >= OPPROF_MEM_SAMPLE_MIN) {
        opprof_mem_sample(net);
    }
}

/* A new block of n bytes.  Returns its window tag (0 outside a window). */
static inline uint32_t opprof_mem_count_alloc(int64_t n)
{
    if (!opprof_mem_recording()) {
        return 0;
    }
    uint32_t w = opprof_mem_window();
    opprof_mem_tls *tl = opprof_mem_tls_get(w);
    if (tl == NULL || tl->muted) {
        return 0;
    }
    tl->alloc_bytes += n;
    tl->alloc_count++;
    opprof_mem_attribute(tl, n, 0, opprof_mem_move_net(n));
    return w;
}

/* The held-bytes slot of a block the calling thread allocates now in the
 * window: its innermost open event's name (after opprof_mem_count_alloc,
 * which fetched the thread's core state). */
static inline uint32_t opprof_mem_held_slot(void)
{
    opprof_mem_tls *tl = opprof_mem_tl;
    opprof_thread *t = tl != NULL ? tl->core : NULL;
    if (t == NULL || t->innermost < 0) {
        return 0;
    }
    uint32_t name = t->open[t->innermost].ev.name;
    return name < OPPROF_MEM_HELD_SLOTS - 1 ? name + 1 : 0;
}

/* A load and a store, not an atomic add: numpy allocates and frees its data
 * with the GIL held, so two threads rarely move one slot at once, and a lost
 * update would only blur which op a leak names, never a test's figures (those
 * are the per-thread counters).  An atomic add cost 10 ns a malloc + free pair. */
static inline void opprof_mem_held_move(uint32_t slot, int64_t delta)
{
    int64_t held = atomic_load_explicit(&opprof_mem_held[slot], OPPROF_RELAXED);
    atomic_store_explicit(&opprof_mem_held[slot], held + delta, OPPROF_RELAXED);
    /* The top grows only as a window meets a new op: a compare-and-swap then. */
    uint32_t top = atomic_load_explicit(&opprof_mem_held_top, OPPROF_RELAXED);
    while (slot >= top &&
           !atomic_compare_exchange_weak_explicit(&opprof_mem_held_top, &top, slot + 1,
                                                  OPPROF_RELAXED, OPPROF_RELAXED)) {
    }
}

/* A block of n bytes with window tag `tag` is freed. */
static inline void opprof_mem_count_free(int64_t n, uint32_t tag)
{
    int recording = opprof_mem_recording();
    if (!recording && tag == 0) {
        return;
    }
    uint32_t w = opprof_mem_window();
    opprof_mem_tls *tl = opprof_mem_tls_get(w);
    if (tl == NULL) {
        return;
    }
    if (tag == w) {
        tl->freed_tagged += n;
    }
    /* A muted thread's frees count only for blocks of the window (not its own). */
    if (recording && (!tl->muted || tag == w)) {
        tl->freed_bytes += n;
        opprof_mem_attribute(tl, 0, n, opprof_mem_move_net(-n));
    }
}

/* A block moves from old_n to new_n bytes: one allocation of new_n and a free
 * of old_n (what tracemalloc counts too).  Returns the new block's tag.
 * Outside a window a tagged block leaves the window (its old size counts as
 * freed from it) and comes back untagged. */
static inline uint32_t opprof_mem_count_realloc(int64_t old_n, int64_t new_n, uint32_t old_tag)
{
    int recording = opprof_mem_recording();
    if (!recording && old_tag == 0) {
        return 0;
    }
    uint32_t w = opprof_mem_window();
    opprof_mem_tls *tl = opprof_mem_tls_get(w);
    if (tl == NULL) {
        return 0;
    }
    if (old_tag == w) {
        tl->freed_tagged += old_n;
    }
    if (!recording) {
        return 0;
    }
    if (tl->muted) { /* as in a free: the old block counts only if the window's */
        if (old_tag == w) {
            tl->freed_bytes += old_n;
            opprof_mem_move_net(-old_n);
        }
        return 0;
    }
    tl->alloc_bytes += new_n;
    tl->alloc_count++;
    tl->freed_bytes += old_n;
    opprof_mem_attribute(tl, new_n, old_n, opprof_mem_move_net(new_n - old_n));
    return w;
}

#endif
