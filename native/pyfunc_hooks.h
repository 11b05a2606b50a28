/* pytest-opprof capture of Python-level library functions (pyfunc_hooks.c): the cdef part.
 *
 * scipy's public API is mostly Python (scipy.linalg.solve checks its arguments,
 * picks a LAPACK driver and calls it; scipy.signal.lfilter is Python over numpy
 * and a Cython kernel), so the compiled ops alone leave much of a test's time
 * unnamed.  A Python function's call never passes through a pointer of its own
 * that CPython 3.11 honours (its call sites inline the frame), but every frame
 * is evaluated through the interpreter's frame-evaluation function (PEP 523).
 * While armed, a native evaluator looks the frame's code object up in a table
 * and, when the code is a captured function's and a profile records with the
 * entry's option bit, records the call as a library op (OPPROF_KIND_NUMPY).
 * Every entry point takes the GIL itself; codes are passed as id(code) and the
 * caller keeps them alive while installed.
 */

/* 1 when this Python's frames can be read (3.10 to 3.13) and no other frame
 * evaluator is installed right now, else 0 with the reason in opprof_last_error. */
int opprof_pyfunc_supported(void);

/* Fill the table: codes[i] records as names[i] while options[i] is set in the
 * recording word (OPPROF_OPT_CAPTURE_SCIPY, ...).  Replaces an earlier table. */
int opprof_pyfunc_install(const intptr_t *codes, const uint32_t *names, const uint32_t *options,
                          int64_t n);

/* Disarm and empty the table. */
int opprof_pyfunc_uninstall(void);

/* Arm (on != 0) or disarm the evaluator around a recording session: it costs
 * every Python call about 20 ns while armed, so it is armed only then.  Arming
 * leaves another frame evaluator (a debugger, torch.compile) in place and
 * counts it in *foreign; disarming restores what arming replaced, unless
 * someone replaced ours meanwhile (left in place, counted in *foreign). */
int opprof_pyfunc_arm(int on, int64_t *foreign);

int opprof_pyfunc_armed(void); /* 1 while our evaluator is the interpreter's */
