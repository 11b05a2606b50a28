/* The thread state layout and the globals the control path shares: owned by
 * core.c, read by the parts above it (drain.c, buffers.c) and by the inlined
 * fast path (hotpath.h, which the numpy trampolines and fastscope.c include).
 * Nothing declared here is implemented outside core.c.  Other .c files use
 * opprof_internal.h only. */
#ifndef OPPROF_CORE_INTERNAL_H
#define OPPROF_CORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "opprof_internal.h"

#define OPPROF_DEFAULT_CAPACITY (4LL << 20) /* events per session across threads */
#define OPPROF_FIRST_CHUNK_RECORDS 4096     /* a thread's first buffer chunk: most record little */
#define OPPROF_CHUNK_RECORDS 65536          /* records per later buffer chunk (huge pages) */
#define OPPROF_RESERVE_BLOCK 4096           /* most budget a thread claims at a time */
#define OPPROF_KEEP_CHUNKS 2                /* chunks a thread keeps between sessions, at least */
/* Beyond OPPROF_KEEP_CHUNKS a thread keeps the chunks its last session wrote,
 * up to this many bytes of chunks in all (first + 2 large = 11.9 MB: a 135k
 * event session re-uses its buffers instead of faulting in a fresh huge page
 * each time).  Freed at thread exit like the rest. */
#define OPPROF_KEEP_BYTES (16LL << 20)
#define OPPROF_ARENA_WORDS 65536     /* int64 words per arena chunk */
#define OPPROF_ARENA_MAX_CHUNKS 1024 /* arena positions stay below 2^26 */
#define OPPROF_KEEP_ARENA_CHUNKS 2

typedef struct core_chunk {
    struct core_chunk *next;
    int64_t cap; /* records in rec[] */
    opprof_event rec[];
} core_chunk;

/* Bytes a chunk holds, header included. */
static inline int64_t core_chunk_bytes(const core_chunk *c)
{
    return (int64_t)sizeof *c + c->cap * (int64_t)sizeof(opprof_event);
}

/* Gives a chunk back: a large one's mapping to the system at once. */
void core_chunk_free(core_chunk *c);

/* Whether a thread keeps the index-th chunk of its list for the next session,
 * given the bytes of the chunks kept before it: the first OPPROF_KEEP_CHUNKS,
 * then as many as fit in OPPROF_KEEP_BYTES (core_thread_reset, opprof_drain). */
static inline int core_chunk_kept(int index, int64_t kept_bytes, int64_t bytes)
{
    return index < OPPROF_KEEP_CHUNKS || kept_bytes + bytes <= OPPROF_KEEP_BYTES;
}

/* Append-only word store; a position is chunk * OPPROF_ARENA_WORDS + offset.
 * Chunks never move, so a position stays valid until the owner resets. */
typedef struct core_arena {
    int64_t *chunks[OPPROF_ARENA_MAX_CHUNKS];
    int32_t nchunks;
    int32_t cur;
    int64_t off;
} core_arena;

typedef struct core_open {
    opprof_event ev; /* in progress: start_ns holds raw ticks */
    /* 0: begun while not recording, or from an old session; 1: records;
     * 2: a scope closed by its handle before the entries above it (a hole):
     * committed already, still counted in active_depth until popped. */
    int32_t active;
    int32_t prev_innermost; /* innermost active index to restore at end */
    uint64_t token;         /* handle token of the last scope in this entry (fastscope.c) */
    int32_t hole;           /* closed out of order: popped once it is the top */
    uint32_t switches;      /* the thread's switch counter at begin (switches.c) */
    int64_t wait_base;      /* the thread's run-queue wait at begin, ns; -1 unknown */
} core_open;

struct opprof_thread {
    _Atomic uint32_t generation; /* session this state belongs to */
    uint32_t slot;               /* stable index, high bits of event ids */
    uint64_t tid;                /* OS thread id */
    int64_t seq;
    int32_t depth;        /* open begins, including ones past OPPROF_MAX_DEPTH */
    int32_t active_depth; /* open events that record */
    int32_t innermost;    /* index in open[] of the innermost recording event, -1 none */
    int32_t alive;        /* 0 once the OS thread exited (registry lock) */
    int32_t holes;        /* open[] entries closed out of order, not yet popped */
    uint64_t scope_token; /* last token handed to a scope of this thread */
    int32_t muted;        /* records nothing this session (muted.c); owner-written */
    /* Record buffer: chunks filled in order; count is published with release. */
    core_chunk *head;
    core_chunk *cur;
    opprof_event *wptr;
    int64_t cur_used;
    int64_t room;
    int64_t reserved_left;
    _Atomic int64_t count;
    _Atomic int64_t dropped;
    core_arena shapes;   /* owner-only writes */
    int64_t shape_owner; /* id of the event whose shape entry is at the arena tail */
    uint32_t last_shape; /* ref of the last whole entry opprof_op_shapes wrote, 0 none */
    int32_t last_shape_words;
    core_arena stacks; /* written and released only under the GIL */
    /* Without OPPROF_OPT_MEMORY_EVENTS: the thread's allocations and frees
     * outside any open event, summed (opprof_mem_record), drained after the
     * buffer.  Owner-only writes; the drain reads it after stop. */
    opprof_event loose;
    int32_t loose_used;
    /* Changes whenever the OS switches this thread out or in (switches.c);
     * a constant word where that cannot be read. */
    const volatile uint32_t *switches;
    int switch_fd;
    void *switch_page;
    /* The thread's run-queue wait (schedstat), read again only after a
     * switch: wait_seen is its value when the switch counter read seen_at. */
    int sched_fd;
    uint32_t seen_at;
    int64_t wait_seen; /* -1: not readable here */
    struct opprof_thread *next;
    core_open open[OPPROF_MAX_DEPTH];
};

typedef struct core_globals {
    pthread_mutex_t ctl;      /* start/stop/drain/tables */
    pthread_mutex_t registry; /* threads list, free list */
    opprof_thread *threads;
    opprof_thread *free_list;
    uint32_t next_slot;
    _Atomic uint32_t generation;
    _Atomic int64_t budget;
    int64_t capacity;
    int64_t reserve_block; /* records a thread claims from the budget at a time */
    int use_tsc;
    double ns_per_tick;
    uint64_t base_ticks;
    int64_t base_ns;
} core_globals;

extern core_globals core_g;

/* switches.c: open the calling thread's switch counter (owner thread only),
 * and give it back (any thread, once the owner is gone or forked away). */
void core_switches_open(opprof_thread *t);
void core_switches_close(opprof_thread *t);
/* Out of line: t's switch counter moved from seen_at; read its wait again. */
void core_switches_refresh(opprof_thread *t);

int64_t core_ticks_to_ns(uint64_t ticks);

/* The tick -> ns conversion's parameters, read once for a drain's loop. */
typedef struct core_clock {
    int use_tsc;
    double ns_per_tick;
    uint64_t base_ticks;
    int64_t base_ns;
} core_clock;

static inline core_clock core_clock_now(void)
{
    core_clock c = {core_g.use_tsc, core_g.ns_per_tick, core_g.base_ticks, core_g.base_ns};
    return c;
}

/* core_ticks_to_ns with the parameters in hand (inlined in the drain loop). */
static inline int64_t core_clock_ns(core_clock c, uint64_t t)
{
    if (!c.use_tsc)
        return (int64_t)t;
    return c.base_ns + (int64_t)((double)(int64_t)(t - c.base_ticks) * c.ns_per_tick);
}
int64_t core_arena_reserve(core_arena *a, int64_t words);

static inline int64_t *core_arena_at(core_arena *a, int64_t pos)
{
    return &a->chunks[pos / OPPROF_ARENA_WORDS][pos % OPPROF_ARENA_WORDS];
}

/* Pops the holes (scopes closed out of order) now at the top of t's stack;
 * called by opprof_hot_end only while t->holes != 0. */
void core_pop_holes(opprof_thread *t);

/* Closes open[d] of t, a scope below the top of the stack (its handle says
 * which: fastscope.c): commits its event now and leaves a hole that
 * opprof_hot_end pops once the entries above it have gone.  The entry that
 * named it as parent is re-parented to its parent: an event that outlives
 * another is not its child (torch nests by intervals the same way). */
void core_close_below_top(opprof_thread *t, int32_t d, uint16_t flags);

/* Drops the code-object references in t's stack arena and empties it (the
 * drain calls it once the stacks are text).  GIL held. */
void core_release_stacks(opprof_thread *t);

#endif
