/* pytest-opprof string tables (strtab.c): what the core and the drain need
 * from them.  Not parsed by cffi; the public getters (opprof_name_*,
 * opprof_shape_*, opprof_stack_*) are in opprof.h.
 *
 * The shape and stack tables are written by the drain and cleared by
 * opprof_start, each holding opprof_strtab_lock for its whole pass; the
 * public getters take it per read.  The calls below need it held.
 */
#ifndef OPPROF_STRTAB_H
#define OPPROF_STRTAB_H

#include <stdint.h>

void opprof_strtab_lock(void);
void opprof_strtab_unlock(void);

/* Creates index 0 ("none recorded") of each table; 0 when out of memory. */
int opprof_strtab_ready(void);

/* Forgets every shape and stack text (ids start over at 1). */
void opprof_strtab_clear(void);

/* The id of a record_shapes entry (the layout opprof_op_shapes documents),
 * its words kept on first sight (text only when read: opprof_shape_texts);
 * 0 when out of memory. */
uint32_t opprof_strtab_shape(const int64_t *entry);

/* The id of a with_stack entry (frame count, then one (code object, line)
 * word pair per frame), its text made on first sight; 0 when out of memory.
 * GIL held: the text reads the code objects. */
uint32_t opprof_strtab_stack(const int64_t *entry);

#endif
