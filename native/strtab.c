/* pytest-opprof string tables: op names, and the text of the input shapes
 * and call sites a drain resolved (interface: strtab.h).
 *
 * Names are interned when a source registers them (any thread, under a
 * mutex) and live for the whole process, so ids cached in Python stay valid.
 * Shapes and stacks arrive as raw entry words (layouts in opprof_internal.h);
 * each distinct stack becomes text once, each distinct shape is kept as words
 * (text only for the ids a reader asks for), and the tables are kept until
 * the next opprof_start.  Depends on base.c only: no thread state, no arena.
 */
#include <Python.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opprof_internal.h"
#include "shape_word.h"
#include "strtab.h"

/* ---- byte-keyed hash map ------------------------------------------------- */

typedef struct {
    char *key; /* owned copy, NUL-terminated so text keys double as strings */
    size_t len;
    uint64_t hash;
    uint32_t id;
} hentry;

typedef struct {
    hentry *e;
    size_t cap; /* power of two, 0 when empty */
    size_t n;
} hmap;

static uint64_t fnv1a(const void *p, size_t len)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ s[i]) * 1099511628211ULL;
    return h;
}

/* Raw shape and stack keys are whole int64 words: hashed a word at a time. */
static uint64_t words_hash(const int64_t *w, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ (uint64_t)w[i]) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 31;
    }
    return h;
}

static hentry *hmap_slot(hentry *e, size_t cap, const void *key, size_t len, uint64_t hash)
{
    size_t i = hash & (cap - 1);
    while (e[i].key && !(e[i].hash == hash && e[i].len == len && memcmp(e[i].key, key, len) == 0))
        i = (i + 1) & (cap - 1);
    return &e[i];
}

static int hmap_find(const hmap *m, const void *key, size_t len, uint64_t hash, uint32_t *id)
{
    if (m->cap == 0)
        return 0;
    hentry *s = hmap_slot(m->e, m->cap, key, len, hash);
    if (!s->key)
        return 0;
    *id = s->id;
    return 1;
}

/* Adds a key known to be absent; returns the stored copy, NULL on no memory. */
static const char *hmap_add(hmap *m, const void *key, size_t len, uint64_t hash, uint32_t id)
{
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        hentry *e = calloc(cap, sizeof *e);
        if (!e)
            return NULL;
        for (size_t i = 0; i < m->cap; i++)
            if (m->e[i].key)
                *hmap_slot(e, cap, m->e[i].key, m->e[i].len, m->e[i].hash) = m->e[i];
        free(m->e);
        m->e = e;
        m->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, key, len);
    copy[len] = '\0';
    hentry *s = hmap_slot(m->e, m->cap, key, len, hash);
    s->key = copy;
    s->len = len;
    s->hash = hash;
    s->id = id;
    m->n++;
    return copy;
}

static void hmap_free(hmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->e[i].key);
    free(m->e);
    m->e = NULL;
    m->cap = m->n = 0;
}

/* Growable array of borrowed string pointers. */
typedef struct {
    const char **p;
    uint32_t n, cap;
} strvec;

static int strvec_push(strvec *v, const char *s)
{
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? 2 * v->cap : 64;
        const char **p = realloc(v->p, cap * sizeof *p);
        if (!p)
            return 0;
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n++] = s;
    return 1;
}

/* ---- text builder ------------------------------------------------------ */

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t avail = b->cap - b->n;
        int k = vsnprintf(b->p ? b->p + b->n : NULL, avail, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)k < avail) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

/* ---- names ------------------------------------------------------------- */

static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static hmap names_map;
static strvec names;

int opprof_name_intern(const char *name, uint32_t *id)
{
    if (!name || !id)
        return opprof_fail(OPPROF_E_ARG, "opprof_name_intern: name and id must not be NULL");
    size_t len = strlen(name);
    uint64_t h = fnv1a(name, len);
    int rc = OPPROF_OK;
    pthread_mutex_lock(&names_lock);
    if (!hmap_find(&names_map, name, len, h, id)) {
        const char *s = hmap_add(&names_map, name, len, h, names.n);
        if (!s || !strvec_push(&names, s))
            rc = opprof_fail(OPPROF_E_NOMEM, "opprof_name_intern: out of memory interning '%s'",
                             name);
        else
            *id = names.n - 1;
    }
    pthread_mutex_unlock(&names_lock);
    return rc;
}

const char *opprof_name_get(uint32_t id)
{
    pthread_mutex_lock(&names_lock);
    const char *s = id < names.n ? names.p[id] : NULL;
    pthread_mutex_unlock(&names_lock);
    return s;
}

uint32_t opprof_name_count(void)
{
    pthread_mutex_lock(&names_lock);
    uint32_t n = names.n;
    pthread_mutex_unlock(&names_lock);
    return n;
}

int opprof_name_trim(uint32_t keep)
{
    if (opprof_is_recording())
        return opprof_fail(OPPROF_E_STATE, "opprof_name_trim: a session is recording");
    pthread_mutex_lock(&names_lock);
    if (keep < names.n) {
        /* Rebuilt from the kept entries, whose key copies stay where they are
         * (names.p[] points at them); nothing changes when there is no memory. */
        size_t cap = 64;
        while (2 * (size_t)keep > cap)
            cap *= 2;
        hmap kept = {.e = calloc(cap, sizeof(hentry)), .cap = cap};
        if (kept.e == NULL) {
            pthread_mutex_unlock(&names_lock);
            return opprof_fail(OPPROF_E_NOMEM, "opprof_name_trim: out of memory");
        }
        for (size_t i = 0; i < names_map.cap; i++) {
            hentry *e = &names_map.e[i];
            if (e->key && e->id >= keep) {
                free(e->key);
            } else if (e->key) {
                *hmap_slot(kept.e, kept.cap, e->key, e->len, e->hash) = *e;
                kept.n++;
            }
        }
        free(names_map.e);
        names_map = kept;
        names.n = keep;
    }
    pthread_mutex_unlock(&names_lock);
    return OPPROF_OK;
}

/* ---- shape and stack tables (opprof_strtab_lock held) ------------------ */

static pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;

/* Shapes: each distinct raw entry once, back to back in one word array, and
 * an open-addressing index of ids over them (no allocation per entry: a loop
 * over 500,000 slices interns 2.5M entries).  Text is made only for the
 * entries someone reads (opprof_shape_texts), from a copy of the words the
 * reader took (opprof_shape_export): the next start clears this table. */
typedef struct {
    uint64_t hash;
    uint32_t id; /* 0: empty slot */
} shape_slot;

static struct {
    int64_t *w; /* entries of ids 1.. back to back */
    size_t wn, w_cap;
    int64_t *start; /* start[id]: id's first word; start[n]: the end */
    uint32_t n;     /* ids in use, 0 included; 0 before opprof_strtab_ready */
    uint32_t start_cap;
    shape_slot *ix;
    size_t ix_cap; /* power of two, 0 when empty */
} shapes;

static hmap stack_raw;   /* (code, line) words -> stack id */
static hmap stack_texts; /* text -> stack id; owns the strings stack_text points to */
static strvec stack_text;

void opprof_strtab_lock(void) { pthread_mutex_lock(&tables_lock); }
void opprof_strtab_unlock(void) { pthread_mutex_unlock(&tables_lock); }

/* A cleared shape table keeps its memory for the next session up to these
 * sizes (index slots and ids; words): grown again from empty at each drain, a
 * test's few hundred shapes paid a calloc and a rehash per doubling.  Past
 * them (a loop of distinct shapes) it is given back, and a kept index is
 * zeroed at each clear, so it stays small. */
#define OPPROF_SHAPE_KEEP_SLOTS 4096
#define OPPROF_SHAPE_KEEP_WORDS (1 << 17)

void opprof_strtab_clear(void)
{
    if (shapes.ix_cap > OPPROF_SHAPE_KEEP_SLOTS) {
        free(shapes.ix);
        shapes.ix = NULL;
        shapes.ix_cap = 0;
    } else if (shapes.ix_cap) {
        memset(shapes.ix, 0, shapes.ix_cap * sizeof *shapes.ix);
    }
    if (shapes.w_cap > OPPROF_SHAPE_KEEP_WORDS) {
        free(shapes.w);
        shapes.w = NULL;
        shapes.w_cap = 0;
    }
    if (shapes.start_cap > OPPROF_SHAPE_KEEP_SLOTS) {
        free(shapes.start);
        shapes.start = NULL;
        shapes.start_cap = 0;
    }
    shapes.wn = 0;
    shapes.n = 0;
    hmap_free(&stack_raw);
    hmap_free(&stack_texts);
    stack_text.n = 0;
}

/* Index 0 of each table means "none recorded". */
int opprof_strtab_ready(void)
{
    if (shapes.n == 0) {
        if (!shapes.start) {
            shapes.start = calloc(64, sizeof *shapes.start);
            if (!shapes.start)
                return 0;
            shapes.start_cap = 64;
        }
        shapes.start[0] = shapes.start[1] = 0;
        shapes.n = 1; /* start[0] = start[1] = 0: id 0 holds no words */
    }
    return stack_text.n > 0 || strvec_push(&stack_text, "");
}

/* numpy's NPY_TYPES numbering, stable across numpy 1.x and 2.x. */
static const char *dtype_name(int type_num)
{
    static const char *const names_by_num[] = {
        "bool", "int8",   "uint8",  "int16",   "uint16",  "int32",      "uint32",      NULL,
        NULL,   "int64",  "uint64", "float32", "float64", NULL,         "complex64",   "complex128",
        NULL,   "object", "bytes",  "str",     "void",    "datetime64", "timedelta64", "float16",
    };
    if (type_num == 7) /* NPY_LONG */
        return sizeof(long) == 8 ? "int64" : "int32";
    if (type_num == 8) /* NPY_ULONG */
        return sizeof(long) == 8 ? "uint64" : "uint32";
    if (type_num == 13) /* NPY_LONGDOUBLE */
        return sizeof(long double) == 16 ? "float128" : "float96";
    if (type_num == 16) /* NPY_CLONGDOUBLE */
        return sizeof(long double) == 16 ? "complex256" : "complex192";
    if (type_num == 2056)
        return "StringDType";
    if (type_num >= 0 && type_num < (int)(sizeof names_by_num / sizeof *names_by_num))
        return names_by_num[type_num];
    return NULL;
}

/* One argument of an entry (layout: shape_word.h): its shape as JSON (null
 * when it has none) and its dtype text ("" not an operand, "unknown", or
 * torch's concrete-argument form "Scalar=2048" / "ScalarList=[0, 1]"). */
static void shape_arg_text(sbuf *s, sbuf *d, const int64_t *w)
{
    int32_t nd = opprof_shape_word_nd(w[0]);
    int type_num = opprof_shape_word_type(w[0]);
    if (nd == OPPROF_ND_NONE || nd == OPPROF_ND_UNKNOWN || nd < OPPROF_ND_VALUE) {
        sb_printf(s, "null");
        sb_printf(d, "%s", nd == OPPROF_ND_NONE ? "" : "unknown");
        return;
    }
    if (nd == OPPROF_ND_VALUE && w[1] < 0) {
        sb_printf(s, "[]");
        if (type_num == 0) /* NPY_BOOL: torch's spelling of a concrete bool */
            sb_printf(d, "Scalar=%s", w[2] ? "True" : "False");
        else
            sb_printf(d, "Scalar=%lld", (long long)w[2]);
        return;
    }
    if (nd == OPPROF_ND_VALUE) {
        sb_printf(s, "[%lld]", (long long)w[1]);
        sb_printf(d, "ScalarList=[");
        for (int64_t i = 0; i < w[1]; i++)
            sb_printf(d, i ? ", %lld" : "%lld", (long long)w[2 + i]);
        sb_printf(d, "]");
        return;
    }
    sb_printf(s, "[");
    for (int32_t i = 0; i < nd; i++)
        sb_printf(s, i ? ", %lld" : "%lld", (long long)w[1 + i]);
    sb_printf(s, "]");
    const char *dn = dtype_name(type_num);
    if (dn)
        sb_printf(d, "%s", dn);
    else
        sb_printf(d, "type%d", type_num);
}

static int shape_same(uint32_t id, const int64_t *hdr, size_t nw)
{
    return (size_t)(shapes.start[id + 1] - shapes.start[id]) == nw &&
           memcmp(shapes.w + shapes.start[id], hdr, nw * sizeof *hdr) == 0;
}

static int shape_index_grow(void)
{
    size_t cap = shapes.ix_cap ? 2 * shapes.ix_cap : 64;
    shape_slot *ix = calloc(cap, sizeof *ix);
    if (!ix)
        return 0;
    for (size_t i = 0; i < shapes.ix_cap; i++) {
        if (!shapes.ix[i].id)
            continue;
        size_t j = shapes.ix[i].hash & (cap - 1);
        while (ix[j].id)
            j = (j + 1) & (cap - 1);
        ix[j] = shapes.ix[i];
    }
    free(shapes.ix);
    shapes.ix = ix;
    shapes.ix_cap = cap;
    return 1;
}

uint32_t opprof_strtab_shape(const int64_t *hdr)
{
    const int64_t *w = hdr + 1;
    for (int64_t a = 0; a < hdr[0]; a++)
        w += opprof_shape_arg_words(w);
    size_t nw = (size_t)(w - hdr);
    uint64_t h = words_hash(hdr, nw);
    if (shapes.ix_cap) {
        for (size_t i = h & (shapes.ix_cap - 1); shapes.ix[i].id; i = (i + 1) & (shapes.ix_cap - 1))
            if (shapes.ix[i].hash == h && shape_same(shapes.ix[i].id, hdr, nw))
                return shapes.ix[i].id;
    }
    if (2 * ((size_t)shapes.n + 1) > shapes.ix_cap && !shape_index_grow())
        return 0;
    if (shapes.wn + nw > shapes.w_cap) {
        size_t cap = shapes.w_cap ? 2 * shapes.w_cap : 1024;
        while (cap < shapes.wn + nw)
            cap *= 2;
        int64_t *p = realloc(shapes.w, cap * sizeof *p);
        if (!p)
            return 0;
        shapes.w = p;
        shapes.w_cap = cap;
    }
    if (shapes.n + 1 >= shapes.start_cap) {
        if (shapes.n == UINT32_MAX - 1)
            return 0;
        uint32_t cap = shapes.start_cap > UINT32_MAX / 2 ? UINT32_MAX : 2 * shapes.start_cap;
        int64_t *p = realloc(shapes.start, (size_t)cap * sizeof *p);
        if (!p)
            return 0;
        shapes.start = p;
        shapes.start_cap = cap;
    }
    uint32_t id = shapes.n++;
    memcpy(shapes.w + shapes.wn, hdr, nw * sizeof *hdr);
    shapes.wn += nw;
    shapes.start[shapes.n] = (int64_t)shapes.wn;
    size_t i = h & (shapes.ix_cap - 1);
    while (shapes.ix[i].id)
        i = (i + 1) & (shapes.ix_cap - 1);
    shapes.ix[i] = (shape_slot){h, id};
    return id;
}

static const char *utf8_or(PyObject *o, const char *fallback)
{
    const char *s = o ? PyUnicode_AsUTF8(o) : NULL;
    if (!s) {
        PyErr_Clear();
        return fallback;
    }
    return s;
}

uint32_t opprof_strtab_stack(const int64_t *hdr)
{
    size_t len = (size_t)(1 + 2 * hdr[0]) * sizeof(int64_t);
    uint64_t h = words_hash(hdr, (size_t)(1 + 2 * hdr[0]));
    uint32_t id;
    if (hmap_find(&stack_raw, hdr, len, h, &id))
        return id;
    sbuf s = {0};
    for (int64_t i = 0; i < hdr[0]; i++) {
        PyCodeObject *co = (PyCodeObject *)(intptr_t)hdr[1 + 2 * i];
        sb_printf(&s, "%s%s(%lld): %s", i ? "\n" : "", utf8_or(co->co_filename, "?"),
                  (long long)hdr[2 + 2 * i], utf8_or(co->co_name, "?"));
    }
    if (s.oom)
        goto fail;
    uint64_t th = fnv1a(s.p, s.n);
    if (!hmap_find(&stack_texts, s.p, s.n, th, &id)) {
        id = stack_text.n;
        const char *text = hmap_add(&stack_texts, s.p, s.n, th, id);
        if (!text || !strvec_push(&stack_text, text))
            goto fail;
    }
    free(s.p);
    if (!hmap_add(&stack_raw, hdr, len, h, id))
        return 0;
    return id;
fail:
    free(s.p);
    return 0;
}

static const char *table_get(const strvec *v, uint32_t id)
{
    pthread_mutex_lock(&tables_lock);
    const char *s = id < v->n ? v->p[id] : NULL;
    pthread_mutex_unlock(&tables_lock);
    return s;
}

static uint32_t table_count(const strvec *v)
{
    pthread_mutex_lock(&tables_lock);
    uint32_t n = v->n;
    pthread_mutex_unlock(&tables_lock);
    return n;
}

uint32_t opprof_shape_count(void)
{
    pthread_mutex_lock(&tables_lock);
    uint32_t n = shapes.n;
    pthread_mutex_unlock(&tables_lock);
    return n;
}

int64_t opprof_shape_words(void)
{
    pthread_mutex_lock(&tables_lock);
    int64_t n = (int64_t)shapes.wn;
    pthread_mutex_unlock(&tables_lock);
    return n;
}

int opprof_shape_export(int64_t *words, int64_t n_words, int64_t *starts, uint32_t n_ids)
{
    if (n_words < 0 || (n_words && !words) || !starts)
        return opprof_fail(OPPROF_E_ARG, "opprof_shape_export: bad output buffers");
    pthread_mutex_lock(&tables_lock);
    int rc = OPPROF_OK;
    if (n_ids != shapes.n || (size_t)n_words != shapes.wn) {
        rc = opprof_fail(OPPROF_E_STATE,
                         "opprof_shape_export: the table holds %u ids in %zu words, not %u in "
                         "%lld (a profile started or drained since it was sized)",
                         shapes.n, shapes.wn, n_ids, (long long)n_words);
    } else if (n_ids) {
        if (n_words)
            memcpy(words, shapes.w, (size_t)n_words * sizeof *words);
        memcpy(starts, shapes.start, ((size_t)n_ids + 1) * sizeof *starts);
    } else {
        starts[0] = 0;
    }
    pthread_mutex_unlock(&tables_lock);
    return rc;
}

/* The entry [w, end) as text into s and d; 0 when its arguments overrun it. */
static int shape_entry_text(sbuf *s, sbuf *d, const int64_t *w, const int64_t *end)
{
    if (w == end) /* id 0: none recorded */
        return 1;
    int64_t nargs = *w++;
    sb_printf(s, "[");
    for (int64_t a = 0; a < nargs; a++) {
        int value = opprof_shape_word_nd(w[0]) == OPPROF_ND_VALUE;
        if (w >= end || (value && w + 1 >= end) || w + opprof_shape_arg_words(w) > end)
            return 0;
        if (a) {
            sb_printf(s, ", ");
            sb_printf(d, ";"); /* not ",": a ScalarList text holds commas */
        }
        shape_arg_text(s, d, w);
        w += opprof_shape_arg_words(w);
    }
    sb_printf(s, "]");
    return w == end;
}

int opprof_shape_texts(const int64_t *words, int64_t n_words, const int64_t *starts, uint32_t n_ids,
                       const uint32_t *ids, int64_t n, char **shape_doc, char **dtype_doc)
{
    if (!starts || n < 0 || (n && !ids) || !shape_doc || !dtype_doc)
        return opprof_fail(OPPROF_E_ARG, "opprof_shape_texts: bad arguments");
    sbuf s = {0}, d = {0};
    sb_printf(&s, "[");
    sb_printf(&d, "%s", "");
    for (int64_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        if (id >= n_ids || starts[id] < 0 || starts[id] > starts[id + 1] ||
            starts[id + 1] > n_words) {
            free(s.p);
            free(d.p);
            return opprof_fail(OPPROF_E_ARG,
                               "opprof_shape_texts: shape id %u is not in a table "
                               "of %u ids and %lld words",
                               id, n_ids, (long long)n_words);
        }
        if (i) {
            sb_printf(&s, ",");
            sb_printf(&d, "\n");
        }
        if (id == 0)
            sb_printf(&s, "[]");
        if (!shape_entry_text(&s, &d, words + starts[id], words + starts[id + 1])) {
            free(s.p);
            free(d.p);
            return opprof_fail(OPPROF_E_ARG, "opprof_shape_texts: shape id %u is malformed", id);
        }
    }
    sb_printf(&s, "]");
    if (s.oom || d.oom) {
        free(s.p);
        free(d.p);
        return opprof_fail(OPPROF_E_NOMEM, "opprof_shape_texts: out of memory for %lld texts",
                           (long long)n);
    }
    *shape_doc = s.p;
    *dtype_doc = d.p;
    return OPPROF_OK;
}

void opprof_text_free(char *text) { free(text); }
const char *opprof_stack_get(uint32_t id) { return table_get(&stack_text, id); }
uint32_t opprof_stack_count(void) { return table_count(&stack_text); }

/* ---- fork (fork.c) ------------------------------------------------------- */

/* Names: a leaf lock, taken across fork().  The tables: held by the drain
 * while it waits for the GIL, so only re-initialised in the child. */
void opprof_strtab_atfork(int phase)
{
    switch (phase) {
    case OPPROF_FORK_PREPARE: pthread_mutex_lock(&names_lock); break;
    case OPPROF_FORK_PARENT: pthread_mutex_unlock(&names_lock); break;
    default:
        pthread_mutex_unlock(&names_lock);
        pthread_mutex_init(&tables_lock, NULL);
        break;
    }
}
