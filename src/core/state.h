/* Named float buffers that a part of the run keeps from one step to the next
 * beyond the model and its optimizer (an elastic center, error feedback, a
 * replica's own weights): a checkpoint saves them by name and a resume copies
 * them back, so that neither side needs to know whose buffers they are. The list
 * points into its owners' memory; it owns only its array of entries. */
#ifndef BP_CORE_STATE_H
#define BP_CORE_STATE_H

#include <stddef.h>

#include "bagpipe/status.h"

enum { BP_STATE_NAME_MAX = 64 };

typedef struct bp_state_buf {
    char name[BP_STATE_NAME_MAX];
    float *data;
    size_t n; /* floats */
} bp_state_buf;

typedef struct bp_state_list {
    bp_state_buf *bufs;
    int n, cap;
} bp_state_list;

/* Append data[0..n) under the name printf(fmt, ...) (BP_EINTERNAL when the name
 * does not fit in BP_STATE_NAME_MAX - 1 bytes). */
bp_status bp_state_add(bp_state_list *l, float *data, size_t n, bp_err *err, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void bp_state_list_free(bp_state_list *l);

#endif
