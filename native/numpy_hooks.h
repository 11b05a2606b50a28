/* pytest-opprof numpy capture (numpy_hooks.c): the cdef part.
 *
 * Three hooks, all installed once per session and idle unless a profile
 * records with OPPROF_OPT_CAPTURE_NUMPY:
 *   - call hooks: the per-object vectorcall pointer of a numpy.ufunc, a
 *     numpy._ArrayFunctionDispatcher, a Cython function of numpy.random or a
 *     Python function (np.ones) is swapped for one trampoline that finds
 *     the original by object address;
 *   - method hooks: ml_meth of a PyMethodDef (ndarray methods, ufunc methods,
 *     numpy's C module functions) is swapped for a per-slot trampoline; this
 *     survives CPython's call-site specialisation, which calls ml_meth directly;
 *   - slot hooks: ndarray's mp_subscript and mp_ass_subscript (a[i], a[i] = v),
 *     one trampoline each.
 * Objects are passed as id(obj); the caller keeps a reference to each while
 * hooked (and forever for any reported as foreign after uninstall).
 * Every entry point takes the GIL itself.
 */

enum {
    OPPROF_NP_SELF_NONE = 0,  /* module function: self is the module, not recorded */
    OPPROF_NP_SELF_ARRAY = 1, /* ndarray method: self is recorded as the first shape */
    OPPROF_NP_SELF_UFUNC = 2, /* ufunc method: the name comes from the ufunc (self) */
    /* a Cython method (cython_function_or_method) whose calls reach ml_meth:
     * self is its instance, not recorded; see opprof_numpy_set_method */
    OPPROF_NP_SELF_INSTANCE = 3
};
enum {
    /* A str argument of a call marked by opprof_numpy_set_params is
     * recorded as a 0-d shape whose type number is OPPROF_NP_STR_TYPE + k,
     * k indexing opprof_numpy_string_get (einsum subscripts, for FLOPs). */
    OPPROF_NP_STR_TYPE = 1000000
};
enum {
    /* ufunc methods hooked, in this order: reduce, accumulate, reduceat, outer, at */
    OPPROF_NP_UFUNC_METHODS = 5
};
enum {
    /* ndarray type slots hooked, in this order: a[key], a[key] = value */
    OPPROF_NP_SLOT_GETITEM = 0,
    OPPROF_NP_SLOT_SETITEM = 1,
    OPPROF_NP_SLOTS_HOOKED = 2
};

/* 1 if this build and interpreter can hook numpy; 0 with opprof_last_error() saying why. */
int opprof_numpy_supported(void);

/* Install every hook at once; on failure nothing stays installed.
 * calls[i] (ufunc or dispatcher) records as call_names[i]; for a ufunc,
 * ufunc_method_names[i * OPPROF_NP_UFUNC_METHODS + k] names its k-th method
 * (0 = use the method hook's own name).  methods[j] is a method descriptor or
 * builtin function whose PyMethodDef gets patched; method_self[j] is an
 * OPPROF_NP_SELF_* value and method_index[j] the ufunc method index (for
 * OPPROF_NP_SELF_UFUNC).  Objects whose hook cannot be installed (another
 * calling convention, no vectorcall) are skipped and counted in *skipped.
 * slot_names[k] (OPPROF_NP_SLOTS_HOOKED of them) names ndarray's type slot k
 * (OPPROF_NP_SLOT_*); 0 leaves that slot alone. */
int opprof_numpy_install(const intptr_t *calls, const uint32_t *call_names,
                         const uint32_t *ufunc_method_names, int64_t n_calls,
                         const intptr_t *methods, const uint32_t *method_names,
                         const uint8_t *method_self, const uint8_t *method_index, int64_t n_methods,
                         const uint32_t *slot_names, int64_t *skipped);

/* Restore every pointer that is still ours.  A pointer someone replaced after
 * us is left alone, its trampoline kept working, and counted in *foreign. */
int opprof_numpy_uninstall(int64_t *foreign);

/* What the hook of `obj` (a hooked call object, or a method whose
 * PyMethodDef is hooked) records besides positional arguments: keyword
 * arguments named in `params` (id of a tuple of str, the parameter names in
 * positional order; 0: none) land at their index; `strings` (call objects
 * only) records str arguments (see OPPROF_NP_STR_TYPE); at most `max_args`
 * arguments in all (1..8; 4 unless set here: the operands, not the options
 * no formula reads, so a call with seven arguments records four).  The caller keeps
 * `params` alive while hooked.  Strings are kept for the life of the
 * process, at most 4096 distinct ones; beyond, str arguments record as
 * unknown. */
int opprof_numpy_set_params(intptr_t obj, intptr_t params, int strings, int max_args);
const char *opprof_numpy_string_get(uint32_t k); /* NULL for an unknown k */

/* A hooked method of a class (numpy.random's Cython methods): a call object
 * called with its instance first, or an OPPROF_NP_SELF_INSTANCE method
 * (*args methods have no vectorcall pointer; their calls reach ml_meth).
 * Shapes skip the instance, and a call on `instance` (id; 0: none) records
 * as `instance_name` (np.random.rand is RandomState.rand bound to numpy's
 * global RandomState).  The caller keeps `instance` alive while hooked. */
int opprof_numpy_set_method(intptr_t obj, intptr_t instance, uint32_t instance_name);

/* opprof_numpy_set_params for n_params objects, then opprof_numpy_set_method
 * for n_methods, under one GIL hold (an install per profile made ~150 calls
 * of ~1 us each); stops at the first error and returns it. */
int opprof_numpy_set_all(const intptr_t *param_objs, const intptr_t *params, const uint8_t *strings,
                         const uint8_t *max_args, int64_t n_params, const intptr_t *method_objs,
                         const intptr_t *instances, const uint32_t *instance_names,
                         int64_t n_methods);

int opprof_numpy_installed(void);
int64_t opprof_numpy_hooked_calls(void);   /* call hooks in place */
int64_t opprof_numpy_hooked_methods(void); /* method hooks in place */
int64_t opprof_numpy_misses(void);         /* trampoline calls with no original found */
