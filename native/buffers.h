/* pytest-opprof native core (buffers.c): how much memory the core holds, for
 * leak checks.  Part of the cdef: no preprocessor lines.
 *
 * opprof_buffer_stats: bytes held by every thread state the core knows
 * (the state itself, its event chunks, its shape and stack arenas), and how
 * many states are live (their thread runs), dead (the thread exited; freed at
 * the next opprof_start) and parked for reuse.  Call it while no session
 * records and no other thread records scopes or numpy ops (a thread frees its
 * surplus chunks lazily, at its first event of a new session). */
int opprof_buffer_stats(int64_t *bytes, int64_t *live, int64_t *dead, int64_t *parked);
