/* pytest-opprof native core: event-model kernels (native/model_kernels.c).
 *
 * Part of the cffi cdef (no preprocessor lines).  These serve
 * pytest_opprof/model: one linear pass each over a drained opprof_event
 * array, no sort.  They rely on what the drain guarantees: ids are
 * (slot << 40) | seq with seq dense per thread, and each thread's events
 * come in END order, so a child's row precedes its parent's.  Where input
 * breaks that (records merged from other sources, hand-made ids) they return
 * OPPROF_E_UNSUPPORTED and the model uses its numpy path instead.
 */

enum {
    OPPROF_GROUP_COUNT = 0,        /* events in the group */
    OPPROF_GROUP_CPU_TOTAL = 1,    /* ns */
    OPPROF_GROUP_CPU_SELF = 2,     /* ns */
    OPPROF_GROUP_DEVICE_TOTAL = 3, /* ns */
    OPPROF_GROUP_DEVICE_SELF = 4,  /* ns */
    OPPROF_GROUP_MEM_TOTAL = 5,    /* bytes */
    OPPROF_GROUP_MEM_SELF = 6,     /* bytes */
    OPPROF_GROUP_FLOPS = 7,        /* every event's FLOPs */
    OPPROF_GROUP_SELF_FLOPS = 8,   /* FLOPs of events with no FLOP-carrying descendant */
    OPPROF_GROUP_COLUMNS = 9
};

/* parent_row[i]: row of the event whose id is ev[i].parent; -1 when parent
 * is -1 or names no event in ev (dropped at capacity); any other negative
 * parent (-2, "unknown") is copied.  Duplicate ids resolve to the first row.
 * OPPROF_E_UNSUPPORTED when ids are negative or too sparse for a dense
 * per-slot table (more than 2n + 4096 entries). */
int opprof_model_parent_rows(const opprof_event *ev, int64_t n, int64_t *parent_row);

/* pair[i]: a dense id per distinct (name, shape) among the events, numbered
 * in first-seen order (-1 for OPPROF_KIND_MEMORY events); pair_row[k] the
 * first row of pair k (room for n entries); *n_pairs the number of pairs.
 * A hash table, so the work is linear in n whatever the number of names and
 * shapes: FLOP formulas then run once per pair that occurs. */
int opprof_model_pairs(const opprof_event *ev, int64_t n, int64_t *pair, int64_t *pair_row,
                       int64_t *n_pairs);

/* key_averages in one pass over a native drain (each thread's events in END
 * order, so a node's children are the pending entries on top of a stack
 * when it arrives).  Fills parent_row[i] (row of ev[i]'s parent, -1 for
 * none), and per group g (group == NULL: by ev[i].name, OPPROF_KIND_MEMORY
 * events in memory_group) the sums[g * OPPROF_GROUP_COLUMNS + OPPROF_GROUP_*]
 * and first_row[g], the group's first event in canonical order (start asc,
 * end desc, depth, id, row; -1 for an empty group).  The FLOP columns are
 * zero (opprof_model_flops fills them).  Per event: CPU total end - start (0
 * when end < start), CPU self the total minus its direct children's totals;
 * memory self self_alloc - self_free, device self device_ns (-1 counts 0);
 * their totals sum self over the subtree.  *device_events counts events with
 * device_ns >= 0.  A child whose parent id is in no row (its parent dropped
 * at the event limit) is a root.  OPPROF_E_UNSUPPORTED when a parent is -2 or
 * when some parent id is in a row but not found after its child (other order):
 * the model then takes its numpy path.  With corrections not NULL, also fills
 * corrections[g] (m entries, ns), the profiler's own cost inside the group's
 * self time: inside_ns[kind] summed over the group's events plus
 * outside_ns[kind] over the direct children of its events
 * (OPPROF_KIND_MEMORY events and kinds >= n_kinds cost nothing; n_kinds
 * entries each), in the same pass: each pass streams the whole event array
 * from memory. */
int opprof_model_key_sums(const opprof_event *ev, int64_t n, const int64_t *group,
                          int64_t memory_group, int64_t m, int64_t *parent_row, int64_t *sums,
                          int64_t *first_row, int64_t *device_events, const double *inside_ns,
                          const double *outside_ns, int64_t n_kinds, double *corrections);

/* FLOPs and self FLOPs ("innermost wins": only when no descendant carries
 * FLOPs) summed per group: an event's FLOPs are pair_flops[pair[i]] (0 for
 * pair -1 and for an event flagged OPPROF_FLAG_EXCEPTION: a call that raised
 * counts no work), pair from opprof_model_pairs; sums stop at INT64_MAX
 * instead of wrapping.  Groups as in opprof_model_key_sums
 * (group == NULL: by name, memory events in memory_group).  Rows must
 * precede their parents.  Writes
 * sums[g * OPPROF_GROUP_COLUMNS + OPPROF_GROUP_FLOPS] and ..._SELF_FLOPS. */
int opprof_model_flops(const opprof_event *ev, const int64_t *pair, const int64_t *parent_row,
                       const int64_t *group, int64_t memory_group, int64_t n,
                       const int64_t *pair_flops, int64_t n_pairs, int64_t m, int64_t *sums);

/* A test round's figures in as few passes as the drain allows: the sums of
 * opprof_model_key_sums (no corrections; FLOP columns zero) over dense
 * groups: groups[0..*n_groups) the name ids that have events (memory events
 * as memory_group), ascending, sums row j theirs, row_group[i] row i's j
 * (room for min(n, m) groups: a round touches a few of the name table's
 * ids), with parent_row as it fills them; *library_self_ns the self time of
 * every event that is not OPPROF_KIND_SCOPE or OPPROF_KIND_MEMORY (its total
 * less its direct children's); *n_waited the events that waited for a CPU
 * (wait_ns > 0: model.waits reads only those, and most rounds have none).
 * OPPROF_E_UNSUPPORTED as opprof_model_key_sums. */
int opprof_model_round_sums(const opprof_event *ev, int64_t n, int64_t memory_group, int64_t m,
                            int64_t *parent_row, int64_t *sums, int64_t *groups, int64_t *n_groups,
                            int64_t *row_group, int64_t *library_self_ns, int64_t *n_waited);

/* The pairs of opprof_model_pairs over only the events a FLOP formula counts:
 * with a recorded shape (shape != 0) and in a group g (row_group[i], of k)
 * whose op has a formula (formula[g] != 0); the rest get -1.  For
 * opprof_model_flops with group = row_group.  A round of many shapes is
 * mostly indexing (each scalar index recorded by value is its own shape):
 * those events make no pairs at all. */
int opprof_model_formula_pairs(const opprof_event *ev, int64_t n, const int64_t *row_group,
                               const uint8_t *formula, int64_t k, int64_t *pair, int64_t *pair_row,
                               int64_t *n_pairs);
