/* pytest-opprof capture of f2py routines (scipy_hooks.c): the cdef part.
 *
 * scipy's LAPACK and BLAS wrappers (scipy.linalg.lapack.dgesv, ...) and every
 * other f2py-built routine are objects of a type named `fortran`, one per f2py
 * extension module (each compiles its own copy), called through the type's
 * tp_call (no vectorcall, so CPython's call sites reach tp_call every time).
 * One trampoline in those slots finds the called object's name by address and records it as a library op (OPPROF_KIND_NUMPY)
 * while a profile records with OPPROF_OPT_CAPTURE_SCIPY.  Objects are passed
 * as id(obj); the caller keeps a reference to each while hooked.  Every entry
 * point takes the GIL itself.
 */

/* Swap the tp_call of each of the n_types types for the trampoline (every
 * routine in objs is of one of them); objs[i] records as names[i], any other
 * object of the types as other_name.  params[i], when not 0, is the id of a
 * tuple of objs[i]'s parameter names in positional order: with record_shapes
 * its keyword arguments are recorded at their index, at most max_args[i]
 * (1..8) arguments in all (what a FLOP formula reads: compute_uv=, trans_a=).
 * Fails (nothing changed) when already hooked, a type has vectorcall or no
 * tp_call, or there are more than 64. */
int opprof_f2py_install(const intptr_t *types, int64_t n_types, const intptr_t *objs,
                        const uint32_t *names, const intptr_t *params, const uint8_t *max_args,
                        int64_t n, uint32_t other_name);

/* Restore every tp_call still ours; *foreign counts those someone replaced
 * after us (their trampoline stays in place and keeps working). */
int opprof_f2py_uninstall(int64_t *foreign);

int opprof_f2py_installed(void);

/* Cython functions (scipy.linalg._decomp_lu_cython.lu_dispatcher, ...) are
 * called through a per-object vectorcall pointer, as numpy's dispatchers are:
 * objs[i]'s pointer is swapped for a trampoline that records it as names[i].
 * Objects without a vectorcall pointer are skipped and counted in *skipped.
 * Fails (nothing changed) when already installed. */
int opprof_vcall_install(const intptr_t *objs, const uint32_t *names, int64_t n, int64_t *skipped);

/* Restore every pointer still ours; *foreign counts those replaced after us
 * (their trampoline keeps working, the objects must stay alive). */
int opprof_vcall_uninstall(int64_t *foreign);
