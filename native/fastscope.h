/* record_function's fast path: builtin functions that open and close a scope
 * with the GIL held (no cffi call, no GIL release per scope).
 *
 * opprof_install_scope_functions(id(module)) takes the GIL and sets on that
 * module two builtins taking one int and returning the status code (0 = OK):
 *   scope_push_fast(name_id)  -- as opprof_scope_push
 *   scope_pop_fast(flags)     -- as opprof_scope_pop
 * Returns OPPROF_OK, or an error code with opprof_last_error() set. */
int opprof_install_scope_functions(intptr_t module_id);
