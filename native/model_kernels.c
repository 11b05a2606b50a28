/* pytest-opprof native core: event-model kernels (see model_kernels.h).
 *
 * The numpy model needs a sort to link parents and a level-by-level sweep to
 * sum subtrees; over a native drain neither is needed (children precede
 * parents on every thread), so a key_averages() over 10^6 events is a few
 * linear passes here.
 */
#include <stdlib.h>

#include "opprof_internal.h"
#include "model_kernels.h"

#define SEQ_BITS 40
#define SEQ_MASK ((INT64_C(1) << SEQ_BITS) - 1)

int opprof_model_parent_rows(const opprof_event *restrict ev, int64_t n,
                             int64_t *restrict parent_row)
{
    if (n < 0 || (n > 0 && (!ev || !parent_row)))
        return opprof_fail(OPPROF_E_ARG, "opprof_model_parent_rows: bad arguments (n %lld)",
                           (long long)n);
    if (n == 0)
        return OPPROF_OK;
    /* Slots are small (one per recording thread); bound them by n. */
    int64_t max_slot = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ev[i].id < 0 || (ev[i].id >> SEQ_BITS) > n + 64)
            return opprof_fail(OPPROF_E_UNSUPPORTED,
                               "opprof_model_parent_rows: id %lld is not a native event id",
                               (long long)ev[i].id);
        if ((ev[i].id >> SEQ_BITS) > max_slot)
            max_slot = ev[i].id >> SEQ_BITS;
    }
    int64_t slots = max_slot + 1;
    int64_t *lo = malloc((size_t)slots * sizeof *lo);
    int64_t *hi = malloc((size_t)slots * sizeof *hi);
    int64_t *base = malloc((size_t)slots * sizeof *base);
    int64_t *table = NULL;
    int status = OPPROF_OK;
    if (!lo || !hi || !base) {
        status = opprof_fail(OPPROF_E_NOMEM, "opprof_model_parent_rows: out of memory");
        goto done;
    }
    for (int64_t s = 0; s < slots; s++) {
        lo[s] = INT64_MAX;
        hi[s] = -1;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t s = ev[i].id >> SEQ_BITS, q = ev[i].id & SEQ_MASK;
        if (q < lo[s])
            lo[s] = q;
        if (q > hi[s])
            hi[s] = q;
    }
    int64_t size = 0;
    for (int64_t s = 0; s < slots; s++) {
        base[s] = size;
        if (hi[s] >= 0)
            size += hi[s] - lo[s] + 1;
        if (size > 2 * n + 4096) {
            status = opprof_fail(OPPROF_E_UNSUPPORTED,
                                 "opprof_model_parent_rows: ids too sparse for a dense table");
            goto done;
        }
    }
    table = malloc((size_t)size * sizeof *table);
    if (!table) {
        status = opprof_fail(OPPROF_E_NOMEM, "opprof_model_parent_rows: out of memory");
        goto done;
    }
    for (int64_t k = 0; k < size; k++)
        table[k] = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = ev[i].id >> SEQ_BITS;
        int64_t *cell = &table[base[s] + (ev[i].id & SEQ_MASK) - lo[s]];
        if (*cell < 0)
            *cell = i;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t p = ev[i].parent;
        int64_t row = p;
        if (p >= 0) {
            int64_t s = p >> SEQ_BITS, q = p & SEQ_MASK;
            row = s < slots && hi[s] >= 0 && q >= lo[s] && q <= hi[s] ? table[base[s] + q - lo[s]]
                                                                      : -1;
        }
        parent_row[i] = row;
    }
done:
    free(lo);
    free(hi);
    free(base);
    free(table);
    return status;
}

static int check_order(const int64_t *parent_row, int64_t n, const char *who)
{
    for (int64_t i = 0; i < n; i++)
        if (parent_row[i] >= 0 && (parent_row[i] <= i || parent_row[i] >= n))
            return opprof_fail(OPPROF_E_UNSUPPORTED,
                               "%s: row %lld has parent row %lld, not after it", who, (long long)i,
                               (long long)parent_row[i]);
    return OPPROF_OK;
}

static inline int64_t cpu_total(const opprof_event *e)
{
    return e->end_ns > e->start_ns ? e->end_ns - e->start_ns : 0;
}

/* Whether row a comes before row b in canonical order (start asc, end desc, depth, id, row). */
static inline int canonical_before(const opprof_event *ev, int64_t a, int64_t b)
{
    const opprof_event *x = &ev[a], *y = &ev[b];
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns;
    int64_t xe = x->end_ns > x->start_ns ? x->end_ns : x->start_ns;
    int64_t ye = y->end_ns > y->start_ns ? y->end_ns : y->start_ns;
    if (xe != ye)
        return xe > ye;
    if (x->depth != y->depth)
        return x->depth < y->depth;
    if (x->id != y->id)
        return x->id < y->id;
    return a < b;
}

/* Open addressing over pair ids; a slot holds a pair id (-1 empty), its key
 * is read back through pair_row, so a slot is 8 bytes. */
static inline uint64_t pair_hash(const opprof_event *e, int bits)
{
    uint64_t k = ((uint64_t)e->name << 32) | e->shape;
    return (k * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - bits);
}

static int64_t *pair_slots(int bits)
{
    int64_t *slots = malloc(((size_t)1 << bits) * sizeof *slots);
    if (slots)
        for (int64_t k = 0; k < (INT64_C(1) << bits); k++)
            slots[k] = -1;
    return slots;
}

static int64_t pair_find(const opprof_event *ev, const int64_t *slots, int bits,
                         const int64_t *pair_row, const opprof_event *e)
{
    uint64_t mask = (UINT64_C(1) << bits) - 1, h = pair_hash(e, bits);
    for (;; h = (h + 1) & mask) {
        int64_t k = slots[h];
        if (k < 0 || (ev[pair_row[k]].name == e->name && ev[pair_row[k]].shape == e->shape))
            return (int64_t)h;
    }
}

/* Pairs of the events that may have one: not memory instants, and with
 * shaped_only only those with a recorded shape, and with row_group not NULL
 * only those whose group has wanted[group] set (the rest get -1). */
static int pairs_of(const opprof_event *restrict ev, int64_t n, int shaped_only,
                    const int64_t *restrict row_group, const uint8_t *restrict wanted,
                    int64_t *restrict pair, int64_t *restrict pair_row, int64_t *restrict n_pairs)
{
    int bits = 6;
    int64_t count = 0;
    int64_t *slots = pair_slots(bits);
    if (!slots)
        return opprof_fail(OPPROF_E_NOMEM, "opprof_model_pairs: out of memory");
    /* A loop repeats one (name, shape) row after row: its pair is at hand. */
    int64_t last = -1;
    for (int64_t i = 0; i < n; i++) {
        const opprof_event *e = &ev[i];
        if (e->kind == OPPROF_KIND_MEMORY || (shaped_only && e->shape == 0) ||
            (row_group && !wanted[row_group[i]])) {
            pair[i] = -1;
            continue;
        }
        const opprof_event *seen = last >= 0 ? &ev[pair_row[last]] : NULL;
        if (seen && seen->name == e->name && seen->shape == e->shape) {
            pair[i] = last;
            continue;
        }
        int64_t h = pair_find(ev, slots, bits, pair_row, e);
        if (slots[h] < 0) {
            if (2 * (count + 1) > (INT64_C(1) << bits)) {
                int64_t *grown = pair_slots(bits + 1);
                if (!grown) {
                    free(slots);
                    return opprof_fail(OPPROF_E_NOMEM, "opprof_model_pairs: out of memory");
                }
                free(slots);
                slots = grown;
                bits++;
                for (int64_t k = 0; k < count; k++)
                    slots[pair_find(ev, slots, bits, pair_row, &ev[pair_row[k]])] = k;
                h = pair_find(ev, slots, bits, pair_row, e);
            }
            pair_row[count] = i;
            slots[h] = count++;
        }
        pair[i] = last = slots[h];
    }
    free(slots);
    *n_pairs = count;
    return OPPROF_OK;
}

int opprof_model_pairs(const opprof_event *restrict ev, int64_t n, int64_t *restrict pair,
                       int64_t *restrict pair_row, int64_t *restrict n_pairs)
{
    if (n < 0 || !n_pairs || (n > 0 && (!ev || !pair || !pair_row)))
        return opprof_fail(OPPROF_E_ARG, "opprof_model_pairs: bad arguments (n %lld)",
                           (long long)n);
    return pairs_of(ev, n, 0, NULL, NULL, pair, pair_row, n_pairs);
}

int opprof_model_formula_pairs(const opprof_event *restrict ev, int64_t n,
                               const int64_t *restrict row_group, const uint8_t *restrict formula,
                               int64_t k, int64_t *restrict pair, int64_t *restrict pair_row,
                               int64_t *restrict n_pairs)
{
    if (n < 0 || k < 0 || !n_pairs ||
        (n > 0 && (!ev || !row_group || !formula || !pair || !pair_row)))
        return opprof_fail(OPPROF_E_ARG, "opprof_model_formula_pairs: bad arguments (n %lld)",
                           (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (row_group[i] < 0 || row_group[i] >= k)
            return opprof_fail(OPPROF_E_ARG,
                               "opprof_model_formula_pairs: row %lld has group %lld of %lld",
                               (long long)i, (long long)row_group[i], (long long)k);
    return pairs_of(ev, n, 1, row_group, formula, pair, pair_row, n_pairs);
}

typedef struct {
    int64_t row, parent, cpu_total, mem_total, dev_total;
    double outside_ns; /* the profiler's cost this child leaves in its parent's self time */
} pending;

/* The profiler's per-kind cost of one event (inside_ns/outside_ns): 0 for
 * memory instants (not timed calls) and kinds past the tables. */
static inline double kind_cost(const double *table, int64_t n_kinds, int64_t kind)
{
    return kind == OPPROF_KIND_MEMORY || kind >= n_kinds ? 0.0 : table[kind];
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Whether the children still waiting at the end of the pass are orphans: their
 * parents are in no row (dropped at the event limit, which cuts a session's
 * latest events).  Then they are roots, as the tree makes them, and the sums
 * stand: a waiting child only ever adds to its parent when that parent's row
 * comes.  A waiting child whose parent is in some row was passed over (another
 * order than children-then-parent): not so. */
static int all_orphans(const opprof_event *ev, int64_t n, const pending *waiting, int64_t k)
{
    int64_t *parents = malloc((size_t)k * sizeof *parents);
    if (!parents)
        return 0;
    for (int64_t j = 0; j < k; j++)
        parents[j] = waiting[j].parent;
    qsort(parents, (size_t)k, sizeof *parents, cmp_i64);
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
        int64_t id = ev[i].id;
        if (id >= parents[0] && id <= parents[k - 1])
            ok = !bsearch(&id, parents, (size_t)k, sizeof *parents, cmp_i64);
    }
    free(parents);
    return ok;
}

int opprof_model_key_sums(const opprof_event *restrict ev, int64_t n, const int64_t *restrict group,
                          int64_t memory_group, int64_t m, int64_t *restrict parent_row,
                          int64_t *restrict sums, int64_t *restrict first_row,
                          int64_t *restrict device_events, const double *restrict inside_ns,
                          const double *restrict outside_ns, int64_t n_kinds,
                          double *restrict corrections)
{
    int bad_kinds = corrections && (n_kinds < 0 || (n_kinds > 0 && (!inside_ns || !outside_ns)));
    if (n < 0 || m < 0 || (n > 0 && (!ev || !parent_row)) || (m > 0 && (!sums || !first_row)) ||
        !device_events || bad_kinds)
        return opprof_fail(OPPROF_E_ARG, "opprof_model_key_sums: bad arguments (n %lld, m %lld)",
                           (long long)n, (long long)m);
    for (int64_t g = 0; g < m; g++) {
        first_row[g] = -1;
        for (int c = 0; c < OPPROF_GROUP_COLUMNS; c++)
            sums[g * OPPROF_GROUP_COLUMNS + c] = 0;
        if (corrections)
            corrections[g] = 0.0;
    }
    int64_t cap = 256, top = 0, devices = 0;
    pending *stack = malloc((size_t)cap * sizeof *stack);
    if (!stack)
        return opprof_fail(OPPROF_E_NOMEM, "opprof_model_key_sums: out of memory");
    int status = OPPROF_OK;
    for (int64_t i = 0; i < n; i++) {
        const opprof_event *e = &ev[i];
        if (e->parent < -1) {
            status =
                opprof_fail(OPPROF_E_UNSUPPORTED,
                            "opprof_model_key_sums: row %lld has no native parent", (long long)i);
            break;
        }
        int64_t g = group ? group[i] : e->kind == OPPROF_KIND_MEMORY ? memory_group : e->name;
        if (g < 0 || g >= m) {
            status = opprof_fail(OPPROF_E_ARG,
                                 "opprof_model_key_sums: row %lld has group %lld, "
                                 "not in [0, %lld)",
                                 (long long)i, (long long)g, (long long)m);
            break;
        }
        int64_t total = cpu_total(e), child_cpu = 0;
        int64_t mem_self = e->self_alloc_bytes - e->self_free_bytes;
        int64_t dev_self = e->device_ns > 0 ? e->device_ns : 0;
        int64_t mem_total = mem_self, dev_total = dev_self;
        double overhead = corrections ? kind_cost(inside_ns, n_kinds, e->kind) : 0.0;
        while (top > 0 && stack[top - 1].parent == e->id) {
            pending *c = &stack[--top];
            parent_row[c->row] = i;
            child_cpu += c->cpu_total;
            mem_total += c->mem_total;
            dev_total += c->dev_total;
            overhead += c->outside_ns;
        }
        parent_row[i] = -1;
        if (e->parent >= 0) {
            if (top == cap) {
                pending *grown = realloc(stack, (size_t)(2 * cap) * sizeof *stack);
                if (!grown) {
                    status = opprof_fail(OPPROF_E_NOMEM, "opprof_model_key_sums: out of memory");
                    break;
                }
                stack = grown;
                cap *= 2;
            }
            double outside = corrections ? kind_cost(outside_ns, n_kinds, e->kind) : 0.0;
            stack[top++] = (pending){i, e->parent, total, mem_total, dev_total, outside};
        }
        devices += e->device_ns >= 0;
        int64_t *s = &sums[g * OPPROF_GROUP_COLUMNS];
        s[OPPROF_GROUP_COUNT] += 1;
        s[OPPROF_GROUP_CPU_TOTAL] += total;
        s[OPPROF_GROUP_CPU_SELF] += total - child_cpu;
        s[OPPROF_GROUP_DEVICE_TOTAL] += dev_total;
        s[OPPROF_GROUP_DEVICE_SELF] += dev_self;
        s[OPPROF_GROUP_MEM_TOTAL] += mem_total;
        s[OPPROF_GROUP_MEM_SELF] += mem_self;
        if (corrections)
            corrections[g] += overhead;
        if (first_row[g] < 0 || canonical_before(ev, i, first_row[g]))
            first_row[g] = i;
    }
    if (status == OPPROF_OK && top > 0 && !all_orphans(ev, n, stack, top))
        status = opprof_fail(OPPROF_E_UNSUPPORTED,
                             "opprof_model_key_sums: parent %lld of row %lld not found after it",
                             (long long)stack[top - 1].parent, (long long)stack[top - 1].row);
    free(stack);
    *device_events = devices;
    return status;
}

static inline int64_t group_of(const opprof_event *ev, const int64_t *group, int64_t memory_group,
                               int64_t i)
{
    return group ? group[i] : ev[i].kind == OPPROF_KIND_MEMORY ? memory_group : ev[i].name;
}

/* FLOP sums stop at INT64_MAX instead of wrapping negative. */
static inline void add_saturated(int64_t *sum, int64_t flops)
{
    if (__builtin_add_overflow(*sum, flops, sum))
        *sum = INT64_MAX;
}

int opprof_model_flops(const opprof_event *restrict ev, const int64_t *restrict pair,
                       const int64_t *restrict parent_row, const int64_t *restrict group,
                       int64_t memory_group, int64_t n, const int64_t *restrict pair_flops,
                       int64_t n_pairs, int64_t m, int64_t *restrict sums)
{
    if (n < 0 || m < 0 || n_pairs < 0 || (n > 0 && (!ev || !pair || !parent_row)) ||
        (n_pairs > 0 && !pair_flops) || (m > 0 && !sums))
        return opprof_fail(OPPROF_E_ARG, "opprof_model_flops: bad arguments");
    int status = check_order(parent_row, n, "opprof_model_flops");
    if (status != OPPROF_OK)
        return status;
    /* under[i]: some descendant of row i carries FLOPs ("innermost wins"). */
    unsigned char *under = calloc(n > 0 ? (size_t)n : 1, 1);
    if (!under)
        return opprof_fail(OPPROF_E_NOMEM, "opprof_model_flops: out of memory");
    for (int64_t g = 0; g < m; g++)
        sums[g * OPPROF_GROUP_COLUMNS + OPPROF_GROUP_FLOPS] =
            sums[g * OPPROF_GROUP_COLUMNS + OPPROF_GROUP_SELF_FLOPS] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = pair[i];
        if (k >= n_pairs) {
            free(under);
            return opprof_fail(OPPROF_E_ARG, "opprof_model_flops: pair %lld outside the table",
                               (long long)k);
        }
        /* A call that raised did no work we can count (a singular solve, an
         * outer product too large to allocate): 0, decided where the failure is
         * known, not from its shapes. */
        int64_t flops = k >= 0 && !(ev[i].flags & OPPROF_FLAG_EXCEPTION) ? pair_flops[k] : 0;
        if (parent_row[i] >= 0 && (flops > 0 || under[i]))
            under[parent_row[i]] = 1;
        if (flops == 0)
            continue;
        int64_t g = group_of(ev, group, memory_group, i);
        if (g < 0 || g >= m) {
            free(under);
            return opprof_fail(OPPROF_E_ARG, "opprof_model_flops: row %lld has group %lld",
                               (long long)i, (long long)g);
        }
        add_saturated(&sums[g * OPPROF_GROUP_COLUMNS + OPPROF_GROUP_FLOPS], flops);
        if (!under[i])
            add_saturated(&sums[g * OPPROF_GROUP_COLUMNS + OPPROF_GROUP_SELF_FLOPS], flops);
    }
    free(under);
    return OPPROF_OK;
}

static inline int is_library(const opprof_event *e)
{
    return e->kind != OPPROF_KIND_SCOPE && e->kind != OPPROF_KIND_MEMORY;
}

/* Dense groups for a round: the distinct name ids (memory events as
 * memory_group) ascending in groups[0..*k), and each row's index among them
 * in row_group.  The slot table has one word per name id, far less to clear
 * than the sums the pass would otherwise keep for every id. */
static int dense_groups(const opprof_event *restrict ev, int64_t n, int64_t memory_group, int64_t m,
                        int64_t *restrict groups, int64_t *restrict row_group,
                        int64_t *restrict k_out)
{
    int64_t *slot = malloc((size_t)(m > 0 ? m : 1) * sizeof *slot);
    if (!slot)
        return opprof_fail(OPPROF_E_NOMEM, "opprof_model_round_sums: out of memory");
    for (int64_t g = 0; g < m; g++)
        slot[g] = -1;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t g = ev[i].kind == OPPROF_KIND_MEMORY ? memory_group : ev[i].name;
        if (g < 0 || g >= m) {
            free(slot);
            return opprof_fail(OPPROF_E_ARG,
                               "opprof_model_round_sums: row %lld has group %lld, not in [0, %lld)",
                               (long long)i, (long long)g, (long long)m);
        }
        if (slot[g] < 0) {
            slot[g] = 0;
            groups[k++] = g;
        }
        row_group[i] = g;
    }
    qsort(groups, (size_t)k, sizeof *groups, cmp_i64);
    for (int64_t j = 0; j < k; j++)
        slot[groups[j]] = j;
    for (int64_t i = 0; i < n; i++)
        row_group[i] = slot[row_group[i]];
    free(slot);
    *k_out = k;
    return OPPROF_OK;
}

int opprof_model_round_sums(const opprof_event *restrict ev, int64_t n, int64_t memory_group,
                            int64_t m, int64_t *restrict parent_row, int64_t *restrict sums,
                            int64_t *restrict groups, int64_t *restrict n_groups,
                            int64_t *restrict row_group, int64_t *restrict library_self_ns,
                            int64_t *restrict n_waited)
{
    if (n < 0 || m < 0 || !n_groups || !library_self_ns || !n_waited ||
        (n > 0 && (!ev || !groups || !row_group || !parent_row || !sums)))
        return opprof_fail(OPPROF_E_ARG, "opprof_model_round_sums: bad arguments (n %lld, m %lld)",
                           (long long)n, (long long)m);
    int64_t k = 0;
    int status = dense_groups(ev, n, memory_group, m, groups, row_group, &k);
    if (status != OPPROF_OK)
        return status;
    int64_t devices = 0;
    int64_t *first = k > 0 ? malloc((size_t)k * sizeof *first) : NULL;
    if (k > 0 && !first)
        return opprof_fail(OPPROF_E_NOMEM, "opprof_model_round_sums: out of memory");
    status = opprof_model_key_sums(ev, n, row_group, memory_group, k, parent_row, sums, first,
                                   &devices, NULL, NULL, 0, NULL);
    free(first);
    if (status != OPPROF_OK)
        return status;
    *n_groups = k;
    /* tree.library_self_ns: the library events' totals less the totals of
     * every direct child of a library event. */
    int64_t self = 0, waited = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t p = parent_row[i];
        if (is_library(&ev[i]))
            self += cpu_total(&ev[i]);
        if (p >= 0 && is_library(&ev[p]))
            self -= cpu_total(&ev[i]);
        waited += ev[i].wait_ns > 0;
    }
    *library_self_ns = self;
    *n_waited = waited;
    return OPPROF_OK;
}
