/* record_function's fast path: builtin functions that open and close a scope
 * with the GIL held (no cffi call, no GIL release per scope).
 *
 * opprof_install_scope_functions(id(module)) takes the GIL and sets on that
 * module two builtins:
 *   scope_push_fast(name_id) -> handle (> 0), or minus opprof_scope_push's status
 *   scope_pop_fast(handle, flags) -> status (0 = OK): closes that scope, the
 *     innermost or not (a scope held across await/yield closes by its handle)
 * Returns OPPROF_OK, or an error code with opprof_last_error() set. */
int opprof_install_scope_functions(intptr_t module_id);
