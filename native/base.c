/* pytest-opprof native core, the part every other part reads: the session's
 * recording words and the calling thread's error text (opprof_internal.h).
 *
 * It calls nothing else in the extension, so every .c file may depend on it
 * and the rest can be ordered one way: base <- strtab, cuda <- core <- drain,
 * buffers, numpy hooks, fastscope, memory counters <- Python hooks <- numpy
 * handler.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "opprof_internal.h"

#define OPPROF_ERROR_BYTES 512

volatile int opprof_g_recording = 0;
volatile uint32_t opprof_g_options = 0;
volatile uint32_t opprof_g_active = 0;

int opprof_is_recording(void) { return __atomic_load_n(&opprof_g_recording, __ATOMIC_ACQUIRE); }

/* ---- errors ------------------------------------------------------------ */

/* The text lives on the heap, one block per thread that ever failed: a
 * dlopen'ed module only gets the small static TLS surplus (its initial-exec
 * variables put its whole TLS block there), so TLS holds one pointer. */
static __thread char *error_text;
static pthread_key_t error_key;
static pthread_once_t error_once = PTHREAD_ONCE_INIT;
static int error_key_ok;

static void error_text_free(void *p)
{
    free(p);
    error_text = NULL;
}

static void error_key_make(void)
{
    error_key_ok = pthread_key_create(&error_key, error_text_free) == 0;
}

int opprof_fail(int code, const char *fmt, ...)
{
    if (!error_text) {
        pthread_once(&error_once, error_key_make);
        if (!error_key_ok)
            return code;
        error_text = malloc(OPPROF_ERROR_BYTES);
        if (!error_text)
            return code; /* no memory to hold the text */
        pthread_setspecific(error_key, error_text);
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_text, OPPROF_ERROR_BYTES, fmt, ap);
    va_end(ap);
    return code;
}

const char *opprof_last_error(void) { return error_text ? error_text : ""; }
