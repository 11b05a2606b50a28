/* pytest-opprof native core: draining the per-thread buffers.
 *
 * Reads the thread states through core_internal.h and turns each raw shape
 * and stack ref into a table id through strtab.h; nothing below calls back
 * into here.
 */
#include <Python.h>

#include <stdlib.h>
#include <string.h>

#include "core_internal.h"
#include "strtab.h"

/* ---- drain ------------------------------------------------------------- */

int64_t opprof_pending(void)
{
    int64_t total = 0;
    pthread_mutex_lock(&core_g.ctl);
    pthread_mutex_lock(&core_g.registry);
    uint32_t gen = atomic_load(&core_g.generation);
    for (opprof_thread *t = core_g.threads; t; t = t->next)
        if (atomic_load_explicit(&t->generation, memory_order_acquire) == gen)
            total += atomic_load_explicit(&t->count, memory_order_acquire) + t->loose_used;
    pthread_mutex_unlock(&core_g.registry);
    pthread_mutex_unlock(&core_g.ctl);
    return total;
}

/* One thread's drain: the clock conversion and the last ref -> id of each
 * table (a loop records the same shapes and call site over and over, and
 * opprof_op_shapes gives equal consecutive entries one ref). */
typedef struct {
    opprof_thread *t;
    uint32_t shape_ref, shape_id, stack_ref, stack_id;
} drain_cursor;

static inline void convert(opprof_event *out, const opprof_event *in, drain_cursor *cur,
                           core_clock clk)
{
    *out = *in;
    out->start_ns = core_clock_ns(clk, (uint64_t)in->start_ns);
    out->end_ns = core_clock_ns(clk, (uint64_t)in->end_ns);
    /* The wait is the scheduler's account, the times the TSC's.  With its reads
     * kept inside the event (hotpath.h), about one short op in 150,000 under
     * frequent preemption still read 30-180 us beyond its duration (a switch
     * between the end tick and the reading, or one the counter did not show);
     * an event cannot have waited longer than it lasted. */
    if (out->wait_ns > out->end_ns - out->start_ns)
        out->wait_ns = out->end_ns - out->start_ns;
    if (in->shape) {
        if (in->shape != cur->shape_ref) {
            cur->shape_ref = in->shape;
            cur->shape_id =
                opprof_strtab_shape(core_arena_at(&cur->t->shapes, (int64_t)in->shape - 1));
        }
        out->shape = cur->shape_id;
    }
    if (in->stack) {
        if (in->stack != cur->stack_ref) {
            cur->stack_ref = in->stack;
            cur->stack_id =
                opprof_strtab_stack(core_arena_at(&cur->t->stacks, (int64_t)in->stack - 1));
        }
        out->stack = cur->stack_id;
    }
}

int opprof_drain(opprof_event *out, int64_t capacity, int64_t *written, int64_t *dropped)
{
    if (capacity < 0 || (capacity > 0 && !out) || !written || !dropped)
        return opprof_fail(OPPROF_E_ARG, "opprof_drain: bad output buffer (capacity %lld)",
                           (long long)capacity);
    pthread_mutex_lock(&core_g.ctl);
    if (opprof_g_recording) {
        pthread_mutex_unlock(&core_g.ctl);
        return opprof_fail(OPPROF_E_STATE, "opprof_drain: the session is still recording; "
                                           "call opprof_stop first");
    }
    /* Held for the whole pass, as the ctl lock: a reader of the tables waits
     * until every id it could be given has its text. */
    opprof_strtab_lock();
    if (!opprof_strtab_ready()) {
        opprof_strtab_unlock();
        pthread_mutex_unlock(&core_g.ctl);
        return opprof_fail(OPPROF_E_NOMEM, "opprof_drain: out of memory for string tables");
    }
    int64_t n = 0, lost = 0;
    /* Stack text reads code objects: the GIL (cffi released it). */
    PyGILState_STATE g = PyGILState_Ensure();
    pthread_mutex_lock(&core_g.registry);
    uint32_t gen = atomic_load(&core_g.generation);
    core_clock clk = core_clock_now();
    for (opprof_thread *t = core_g.threads; t; t = t->next) {
        if (atomic_load_explicit(&t->generation, memory_order_acquire) != gen)
            continue;
        drain_cursor cur = {.t = t};
        int64_t cnt = atomic_load_explicit(&t->count, memory_order_acquire);
        lost += atomic_load_explicit(&t->dropped, memory_order_relaxed);
        int64_t i = 0;
        /* The chunks before the one being written are full and no commit
         * touches them again (a commit still in flight writes in t->cur or
         * after it).  Those the next session would not keep are freed as soon
         * as they are copied: the copy's fresh pages then reuse theirs, where
         * a huge round's output would otherwise fault in as much new memory
         * again (on a VM that hands back freed memory, 2-5 s a GB). */
        const core_chunk *writing = t->cur;
        int before_writing = writing != NULL;
        int64_t kept_bytes = 0;
        core_chunk **link = &t->head;
        for (int index = 0; *link && i < cnt; index++) {
            core_chunk *c = *link;
            int64_t k = cnt - i < c->cap ? cnt - i : c->cap;
            for (int64_t j = 0; j < k; j++) {
                if (n < capacity)
                    convert(&out[n++], &c->rec[j], &cur, clk);
                else
                    lost++;
            }
            i += k;
            if (c == writing)
                before_writing = 0;
            int64_t bytes = core_chunk_bytes(c);
            if (before_writing && !core_chunk_kept(index, kept_bytes, bytes)) {
                *link = c->next;
                core_chunk_free(c);
            } else {
                kept_bytes += bytes;
                link = &c->next;
            }
        }
        if (t->loose_used) {
            if (n < capacity)
                convert(&out[n++], &t->loose, &cur, clk);
            else
                lost++;
        }
    }
    /* Released only after every thread is resolved: a freed code object's
     * address could otherwise match another thread's raw stack key. */
    for (opprof_thread *t = core_g.threads; t; t = t->next)
        if (atomic_load_explicit(&t->generation, memory_order_relaxed) == gen)
            core_release_stacks(t);
    /* Everything drained belongs to an old generation now: pending() is 0
     * and each owner resets its state lazily. */
    atomic_fetch_add_explicit(&core_g.generation, 1, memory_order_release);
    pthread_mutex_unlock(&core_g.registry);
    PyGILState_Release(g);
    opprof_strtab_unlock();
    pthread_mutex_unlock(&core_g.ctl);
    *written = n;
    *dropped = lost;
    return OPPROF_OK;
}
