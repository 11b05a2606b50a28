/* pytest-opprof native core: the open-addressing table that maps a hooked
 * object's address to its entry (numpy_hooks.c, scipy_hooks.c,
 * pyfunc_hooks.c).  Internal to the extension (not cdef text).
 *
 * A table is an array of cells whose first member is the key, a pointer
 * (NULL: an empty cell); its length is a power of two and it is at most half
 * full, so a lookup ends at the key or at an empty cell within a probe or
 * two.  Cells are never removed one by one: a table is filled whole and
 * emptied whole.  Everything here is static inline and a lookup is always
 * inlined: a trampoline's lookup compiles to the loop a hand-written one
 * would be (cell size and mask are constants or one load each).
 */
#ifndef OPPROF_PTR_TABLE_H
#define OPPROF_PTR_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Home cell of an address, before the mask (objects are 16-byte aligned:
 * the low four bits carry nothing). */
static inline size_t opprof_ptr_hash(const void *p)
{
    return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 32);
}

/* Cells for a table of n keys: a power of two, at least 16 and twice n. */
static inline size_t opprof_ptr_table_cells(size_t n)
{
    size_t cells = 16;
    while (cells < 2 * n)
        cells <<= 1;
    return cells;
}

/* A cell's key, whatever pointer type the cell declares it with. */
static inline const void *opprof_ptr_cell_key(const void *cell)
{
    const void *key;
    memcpy(&key, cell, sizeof key);
    return key;
}

/* The cell holding key, or NULL when the table has none. */
static inline __attribute__((always_inline)) void *
opprof_ptr_table_find(void *cells, size_t cell_size, size_t mask, const void *key)
{
    for (size_t i = opprof_ptr_hash(key) & mask;; i = (i + 1) & mask) {
        void *cell = (char *)cells + i * cell_size;
        const void *k = opprof_ptr_cell_key(cell);
        if (k == key)
            return cell;
        if (k == NULL)
            return NULL;
    }
}

/* The cell holding key, or else the empty cell where it goes (the caller
 * stores the key there).  The table must have an empty cell. */
static inline void *opprof_ptr_table_place(void *cells, size_t cell_size, size_t mask,
                                           const void *key)
{
    for (size_t i = opprof_ptr_hash(key) & mask;; i = (i + 1) & mask) {
        void *cell = (char *)cells + i * cell_size;
        const void *k = opprof_ptr_cell_key(cell);
        if (k == key || k == NULL)
            return cell;
    }
}

/* The two above typed by the table: cells is an array of cells or a pointer
 * to its first, mask the length less one. */
#define OPPROF_PTR_FIND(cells, mask, key) \
    ((__typeof__(&(cells)[0]))opprof_ptr_table_find((cells), sizeof(cells)[0], (mask), (key)))
#define OPPROF_PTR_PLACE(cells, mask, key) \
    ((__typeof__(&(cells)[0]))opprof_ptr_table_place((cells), sizeof(cells)[0], (mask), (key)))

#endif
