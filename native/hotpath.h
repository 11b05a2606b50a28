/* pytest-opprof native core: the per-op fast path, inlined into its callers.
 *
 * The numpy trampolines (numpy_hooks.c), record_function's builtins
 * (fastscope.c) and core.c's exported opprof_op_begin/opprof_op_end all use
 * these.  Across translation units each op paid three calls with their
 * prologues and re-checked the recording flag and the session generation
 * two or three times; inlined, a caller reads one word (opprof_g_active)
 * that says both "recording" and which options, checks the generation once
 * (opprof_hot_thread), and the rarely taken branches (CUDA, depth bound, a
 * new session, a full buffer) stay out of line.
 *
 * Internal to the extension (not cdef text); layout of the thread state in
 * core_internal.h.
 */
#ifndef OPPROF_HOTPATH_H
#define OPPROF_HOTPATH_H

#include <stdatomic.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define OPPROF_HAVE_TSC 1
#endif

#include "core_internal.h"

/* Every per-op caller gets its own copy: GCC otherwise keeps the larger
 * ones out of line where several trampolines call them. */
#define OPPROF_HOT static inline __attribute__((always_inline))

/* The calling thread's state pointer (initial-exec: see memory_count.h). */
extern __thread opprof_thread *opprof_tls_state __attribute__((tls_model("initial-exec")));

/* Out of line: first use on a thread (creates the state, then syncs it). */
opprof_thread *core_thread_first(void);
/* Out of line: the owner starts session `gen` (see core.c). */
void core_thread_reset(opprof_thread *t, uint32_t gen);
/* Out of line: room for at least one record; 0 when budget or memory ran out. */
int core_refill(opprof_thread *t);

OPPROF_HOT uint32_t opprof_hot_active(void)
{
    return __atomic_load_n(&opprof_g_active, __ATOMIC_ACQUIRE);
}

OPPROF_HOT uint64_t opprof_hot_ticks(void)
{
#ifdef OPPROF_HAVE_TSC
    if (__builtin_expect(core_g.use_tsc, 1))
        return __rdtsc();
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Brings t to the current session (the owner resets lazily, see core.c). */
OPPROF_HOT void opprof_hot_sync(opprof_thread *t)
{
    uint32_t gen = atomic_load_explicit(&core_g.generation, memory_order_acquire);
    if (__builtin_expect(atomic_load_explicit(&t->generation, memory_order_relaxed) != gen, 0))
        core_thread_reset(t, gen);
}

/* The calling thread's state, synced to the current session; NULL only when
 * out of memory.  The one generation check of a per-op path. */
OPPROF_HOT opprof_thread *opprof_hot_thread(void)
{
    opprof_thread *t = opprof_tls_state;
    if (__builtin_expect(t == NULL, 0))
        return core_thread_first();
    opprof_hot_sync(t);
    return t;
}

/* A new event of t: the next id, no memory, shapes, stack or device time yet. */
OPPROF_HOT void opprof_hot_event_init(opprof_thread *t, opprof_event *ev, uint32_t name_id,
                                      uint16_t kind, int64_t parent, uint32_t depth)
{
    ev->id = ((int64_t)t->slot << 40) | ++t->seq;
    ev->parent = parent;
    ev->self_alloc_bytes = 0;
    ev->self_free_bytes = 0;
    ev->device_ns = -1;
    ev->thread = t->tid;
    ev->name = name_id;
    ev->kind = kind;
    ev->flags = 0;
    ev->shape = 0;
    ev->stack = 0;
    ev->depth = depth;
    ev->self_alloc_count = 0;
    ev->wait_ns = -1;
}

/* At an event's begin: the run-queue wait so far (re-read only when the
 * thread was switched since the last reading) and the switch counter it
 * belongs to.  Called before the start tick, so the read stays out of the
 * event's time, and again after it when the counter moved in between (see
 * opprof_hot_wait_started). */
OPPROF_HOT void opprof_hot_wait_begin(opprof_thread *t, core_open *o)
{
    if (__builtin_expect(*t->switches != t->seen_at, 0))
        core_switches_refresh(t);
    o->switches = t->seen_at;
    o->wait_base = t->wait_seen;
}

/* Right after the start tick: a switch between the wait's reading and the
 * tick waited before the event began; read the wait again so that it stays
 * out of the event's (else a short op took a whole preemption as its own
 * and waited longer than it lasted).  One load when nothing moved. */
OPPROF_HOT void opprof_hot_wait_started(opprof_thread *t, core_open *o)
{
    if (__builtin_expect(*t->switches != o->switches, 0))
        opprof_hot_wait_begin(t, o);
}

/* At an event's end, with the switch counter `at` read before the end tick
 * (a switch after the tick waits after the event): flag the event and
 * measure its wait when its thread was switched out in between; an
 * unswitched event waited 0. */
OPPROF_HOT void opprof_hot_wait_end(opprof_thread *t, core_open *o, uint32_t at)
{
    if (__builtin_expect(at == o->switches, 1)) {
        o->ev.wait_ns = o->wait_base >= 0 ? 0 : -1;
        return;
    }
    o->ev.flags |= OPPROF_FLAG_SWITCHED;
    if (at != t->seen_at)
        core_switches_refresh(t);
    o->ev.wait_ns = o->wait_base >= 0 && t->wait_seen >= 0 ? t->wait_seen - o->wait_base : -1;
}

static inline void opprof_hot_count_drop(opprof_thread *t)
{
    atomic_store_explicit(&t->dropped, atomic_load_explicit(&t->dropped, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

OPPROF_HOT void opprof_hot_commit(opprof_thread *t, const opprof_event *ev)
{
    if (__builtin_expect(t->room == 0, 0) && !core_refill(t)) {
        opprof_hot_count_drop(t);
        return;
    }
    t->room--;
    *t->wptr++ = *ev;
    /* Release: drain sees the record complete once it sees the count. */
    atomic_store_explicit(&t->count, atomic_load_explicit(&t->count, memory_order_relaxed) + 1,
                          memory_order_release);
}

/* opprof_op_begin for a caller that read `active` (opprof_hot_active) with
 * OPPROF_ACTIVE_RECORDING set, on a state from opprof_hot_thread. */
OPPROF_HOT int opprof_hot_begin_recording(opprof_thread *t, uint32_t active, uint32_t name_id,
                                          uint16_t kind)
{
    int32_t d = t->depth++;
    if (__builtin_expect(d >= OPPROF_MAX_DEPTH, 0)) {
        opprof_hot_count_drop(t);
        return -1;
    }
    if (__builtin_expect(t->muted, 0)) {
        t->open[d].active = 0; /* the end must balance, as when not recording */
        return -1;
    }
    core_open *o = &t->open[d];
    int32_t up = t->innermost;
    o->active = 1;
    o->prev_innermost = up;
    opprof_hot_event_init(t, &o->ev, name_id, kind, up >= 0 ? t->open[up].ev.id : -1,
                          (uint32_t)t->active_depth++);
    t->innermost = d;
    /* Before the start tick: the CUDA call's cost stays out of this event. */
    if (__builtin_expect(active & OPPROF_OPT_CUDA, 0))
        opprof_cuda_op_begin(name_id, o->ev.depth);
    opprof_hot_wait_begin(t, o);
    o->ev.start_ns = (int64_t)opprof_hot_ticks();
    opprof_hot_wait_started(t, o);
    return 0;
}

/* opprof_op_begin with the recording word already read. */
OPPROF_HOT int opprof_hot_begin(opprof_thread *t, uint32_t active, uint32_t name_id, uint16_t kind)
{
    if (__builtin_expect(!(active & OPPROF_ACTIVE_RECORDING), 0)) {
        /* Depth is tracked either way: the matching end must balance. */
        int32_t d = t->depth++;
        if (d < OPPROF_MAX_DEPTH)
            t->open[d].active = 0;
        return -1;
    }
    return opprof_hot_begin_recording(t, active, name_id, kind);
}

OPPROF_HOT void opprof_hot_end(opprof_thread *t, uint16_t flags)
{
    uint32_t switches = *t->switches;
    uint64_t end = opprof_hot_ticks();
    if (__builtin_expect(t->depth <= 0, 0))
        return;
    int32_t d = --t->depth;
    /* Scopes closed by their handle below this entry leave once it goes. */
    if (__builtin_expect(t->holes != 0, 0))
        core_pop_holes(t);
    if (__builtin_expect(d >= OPPROF_MAX_DEPTH, 0))
        return;
    core_open *o = &t->open[d];
    if (!o->active)
        return;
    o->active = 0;
    t->innermost = o->prev_innermost;
    t->active_depth--;
    o->ev.end_ns = (int64_t)end;
    o->ev.flags |= flags;
    opprof_hot_wait_end(t, o, switches);
    /* The options of the session the event began in (opprof_stop keeps them). */
    if (__builtin_expect(opprof_g_options & OPPROF_OPT_CUDA, 0))
        opprof_cuda_op_end(o->ev.depth, o->ev.id);
    opprof_hot_commit(t, &o->ev);
}

/* A record_function scope opens on t; 1 when the caller must now capture the
 * Python stack (opprof_op_capture_stack, GIL held). */
static inline int opprof_hot_scope_push(opprof_thread *t, uint32_t name_id)
{
    uint32_t active = opprof_hot_active();
    return opprof_hot_begin(t, active, name_id, OPPROF_KIND_SCOPE) == 0 &&
           (active & OPPROF_OPT_WITH_STACK);
}

#endif
