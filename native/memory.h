/* pytest-opprof memory accounting (native/memory.c): the cffi cdef part.
 *
 * A NEP 49 numpy data-memory handler that wraps the handler numpy would
 * otherwise use and keeps a 16-byte size header in front of every block it
 * hands out.  Optionally the same counting for Python's PYMEM_DOMAIN_MEM and
 * PYMEM_DOMAIN_OBJ allocators (headerless: a pointer -> size table, so the
 * hooks can be removed again).
 *
 * Counting model (details in memory_count.h): counters move only while a
 * session records with OPPROF_OPT_PROFILE_MEMORY, inside the window opened
 * by the last opprof_memory_reset, so allocations made by the drain after
 * stop never count.  A block allocated in the window carries the window's
 * tag; held_bytes is the bytes of such blocks not freed yet (the test's leak,
 * read after gc.collect()).  Same syntax rules as opprof.h: this is cdef text.
 */

typedef struct opprof_memory_stats {
    int64_t net_bytes;        /* allocated minus freed in the window (live bytes above start) */
    int64_t peak_bytes;       /* highest net_bytes in the window; >= 0 */
    int64_t allocated_bytes;  /* bytes allocated in the window (a realloc counts its new size) */
    int64_t allocations;      /* allocations in the window (malloc, calloc, realloc) */
    int64_t freed_bytes;      /* bytes freed in the window (a realloc counts its old size) */
    int64_t held_bytes;       /* bytes of blocks allocated in the window, still held */
    int64_t samples;          /* net-bytes samples taken in the window */
    int64_t samples_dropped;  /* samples beyond the capacity, not kept */
    int32_t installed;        /* install count of the numpy handler (0 = not installed) */
    int32_t threads_covered;  /* 1: new threads and contexts use the handler too */
    int32_t python_installed; /* install count of the Python allocator hooks */
    int32_t python_untracked; /* 1: the pointer table could not grow; some blocks not counted */
} opprof_memory_stats;

/* One point of the live-bytes counter track: taken at every allocation or
 * free of at least opprof_memory_sample_min_bytes() bytes in the window. */
typedef struct opprof_memory_sample {
    int64_t time_ns;   /* core clock (opprof_now_ns), same base as event times */
    int64_t net_bytes; /* net_bytes right after that allocation or free */
} opprof_memory_sample;

/* numpy data-memory handler.  Refcounted: the first install wraps the
 * handler in effect and makes ours the default of numpy's handler context
 * variable (new threads and contexts see it); the last uninstall restores
 * both.  Takes the GIL itself.  Blocks allocated under the handler stay
 * freeable after uninstall: the handler is never freed. */
int opprof_memory_install(void);
int opprof_memory_uninstall(void);

/* on != 0: numpy blocks allocated from now on start at a cache line, the
 * same place in every process (an A/B run's partners; docs/how-it-works.md,
 * "Where a block starts"); 0: where malloc puts them.  Blocks keep their own
 * placement whatever it is set to later. */
int opprof_memory_align(int on);

/* Python object allocators (PYMEM_DOMAIN_MEM and _OBJ), refcounted like the
 * numpy handler.  Takes the GIL itself.  Uninstall fails with OPPROF_E_HOOK
 * when someone else replaced the allocator after us (then it stays ours). */
int opprof_memory_python_install(void);
int opprof_memory_python_uninstall(void);

/* Open a new measurement window: every counter reads zero, samples cleared.
 * Call before opprof_start; fails with OPPROF_E_STATE while recording. */
int opprof_memory_reset(void);
int opprof_memory_stats_get(opprof_memory_stats *out);

/* Bytes of numpy blocks allocated in the current window and still held, by
 * the op that allocated them (the name id of the innermost open event on the
 * allocating thread; 4294967295 when none was open): what a test leaks, op by
 * op.  Entries with held bytes only, at most `capacity`.  Call after stop and
 * gc.collect(), as for held_bytes. */
int opprof_memory_held_by_name(uint32_t *names, int64_t *bytes, int64_t capacity, int64_t *written);

/* Net-bytes samples of the current window, in the order taken (sort by
 * time: threads interleave).  Call after stop. */
int opprof_memory_set_sample_capacity(int64_t max_samples);
int64_t opprof_memory_sample_min_bytes(void);
int opprof_memory_samples(opprof_memory_sample *out, int64_t capacity, int64_t *written);
