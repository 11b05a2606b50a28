/* pytest-opprof native core: the internal C API shared by the .c files of the
 * extension (core, numpy hooks, memory hooks, cuda).  Not parsed by cffi.
 *
 * Ownership, in the order the files depend on each other: base.c (the
 * recording words, opprof_fail) calls nothing; cuda.c (the CUDA hooks) calls
 * base.c only; core.c implements the rest and calls those two and the string
 * tables (strtab.h).  Hot-path functions are static inline where it pays
 * (hotpath.h).
 *
 * Threading model: each OS thread that records owns one opprof_thread, found
 * through a thread-local pointer; only its owner writes to it.  The global
 * recording flag and generation are read on the hot path without locks.
 * A thread notices a new session (generation change) at its next begin and
 * resets its own state; opprof_drain copies only states of the current
 * generation, reading each state's published count with acquire semantics.
 */
#ifndef OPPROF_INTERNAL_H
#define OPPROF_INTERNAL_H

#include <stdint.h>
#include <stddef.h>
#include "opprof.h"
#include "shape_word.h"

#define OPPROF_MAX_DEPTH 256 /* open events per thread; deeper ones are counted as dropped */
#define OPPROF_MAX_STACK 8   /* Python frames recorded per op with_stack */

typedef struct opprof_thread opprof_thread; /* defined in core.c */

/* base.c.  Read on the hot path.  Written by opprof_start / opprof_stop only. */
extern volatile int opprof_g_recording;
extern volatile uint32_t opprof_g_options; /* OPPROF_OPT_* of the running session */

/* Set in opprof_g_active while a session records, next to its OPPROF_OPT_*
 * bits: a per-op or per-allocation caller tests one word for "recording with
 * option X". */
#define OPPROF_ACTIVE_RECORDING 0x80000000u

/* OPPROF_ACTIVE_RECORDING | options while recording, 0 otherwise.  Written
 * by opprof_start / opprof_stop next to opprof_g_recording/opprof_g_options
 * (those stay for the control paths). */
extern volatile uint32_t opprof_g_active;

/* The calling thread's state, created on first use; NULL only when out of
 * memory.  Cheap: one TLS load and a generation compare on the fast path. */
opprof_thread *opprof_thread_get(void);

/* muted.c: whether OS thread `tid` is left out of the figures (read once per
 * session by each thread, see opprof_mute_threads). */
int opprof_thread_muted(uint64_t tid);

/* Raw clock ticks (rdtsc or clock_gettime ns); converted at drain time. */
uint64_t opprof_ticks(void);

/* Open an event on the calling thread (start time read inside).  Returns 0 on
 * success, -1 when not recording or the depth bound was hit (then the
 * matching opprof_op_end must still be called: depth is tracked either way). */
int opprof_op_begin(opprof_thread *t, uint32_t name_id, uint16_t kind);

/* Close the innermost open event (end time read inside) and commit it to the
 * thread's buffer.  flags are OR-ed into the event's flags. */
void opprof_op_end(opprof_thread *t, uint16_t flags);

/* record_shapes: add one argument to the innermost open event.  ndim < 0
 * records a non-array argument (null).  type_num is numpy's NPY_TYPES value
 * (-1 when unknown).  Bounded by OPPROF_MAX_SHAPE_ARGS/DIMS; beyond, the
 * event is flagged OPPROF_FLAG_TRUNCATED.  Copies dims into the thread's shape
 * arena; interning into text happens at drain. */
void opprof_op_shape_arg(opprof_thread *t, int ndim, const int64_t *dims, int type_num);

/* record_shapes, a whole entry at once (what the numpy hooks use), laid out
 * as shape_word.h says; `words` in all, at most OPPROF_SHAPE_ENTRY_WORDS.  An
 * entry equal to the thread's previous one shares its ref: no arena write,
 * and the drain resolves the ref once.  flags are OR-ed into the event's. */
void opprof_op_shapes(opprof_thread *t, const int64_t *entry, int32_t words, uint16_t flags);

/* with_stack: record the current Python call site (up to OPPROF_MAX_STACK
 * frames, innermost first) on the innermost open event.  GIL must be held.
 * Frames are resolved to text at drain time. */
void opprof_op_capture_stack(opprof_thread *t);

/* Memory accounting for the calling thread (both allocator hooks call this
 * through memory_count.h, GIL not assumed).  Adds to the innermost open event's
 * self_alloc/self_free/self_alloc_count, or, with no open event and a
 * session recording with OPPROF_OPT_PROFILE_MEMORY, commits a
 * OPPROF_KIND_MEMORY event named "[memory]" at the current time. */
void opprof_mem_record(opprof_thread *t, int64_t alloc_bytes, int64_t freed_bytes);

/* cuda.c: CUDA event pair of the event being opened / closed at active
 * depth `depth`; the core calls these only while OPPROF_OPT_CUDA is set. */
void opprof_cuda_op_begin(uint32_t name_id, uint32_t depth);
void opprof_cuda_op_end(uint32_t depth, int64_t event_id);

/* fork.c: around fork(), each part with a lock gets the phase (see fork.c).
 * PREPARE takes a part's leaf locks in the parent, PARENT releases them;
 * CHILD releases or re-initialises every lock and forgets the threads the
 * child does not have.  Defined next to each lock. */
enum { OPPROF_FORK_PREPARE, OPPROF_FORK_PARENT, OPPROF_FORK_CHILD };
void opprof_mem_count_atfork(int phase); /* memory_count.c */
void opprof_strtab_atfork(int phase);    /* strtab.c */
void opprof_pool_atfork(int phase);      /* drain_pool.c */
void opprof_cuda_atfork(int phase);      /* cuda.c */

/* base.c: sets the calling thread's opprof_last_error() text and returns code. */
int opprof_fail(int code, const char *fmt, ...);

/* (ns on a CPU, ns waiting for one) from an open schedstat file (switches.c);
 * 0 on success, -1 when it cannot be read. */
int opprof_schedstat_read(int fd, int64_t *run, int64_t *wait);

#endif
