/* pytest-opprof native core (drain_pool.c): memory for drained events.
 * Part of the cdef: no preprocessor lines.
 *
 * A drain writes every event once into fresh memory, and on a VM first-touch
 * page faults cost more than the copy (a 100k-event drain: 8.8 MB, about 2,150
 * faults).  The pool keeps blocks given back (when the Records array holding
 * them is collected) so the next drain writes into pages already mapped.
 *
 * opprof_pool_take: a block of at least `bytes` (the smallest kept one that
 * fits, else a new one), NULL when out of memory.  opprof_pool_give: hand a
 * block back; it is kept while the pool holds at most OPPROF_POOL_KEEP_BYTES,
 * else freed.  opprof_pool_held: bytes kept now.  Thread-safe. */
void *opprof_pool_take(int64_t bytes);
void opprof_pool_give(void *block);
int64_t opprof_pool_held(void);
