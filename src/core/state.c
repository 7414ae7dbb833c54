#include "core/state.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

bp_status bp_state_add(bp_state_list *l, float *data, size_t n, bp_err *err, const char *fmt, ...) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        bp_state_buf *bigger = realloc(l->bufs, (size_t)cap * sizeof *bigger);
        if (!bigger) return bp_fail(err, BP_ENOMEM, "out of memory");
        l->bufs = bigger;
        l->cap = cap;
    }
    bp_state_buf *b = &l->bufs[l->n];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->name, sizeof b->name, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof b->name)
        return bp_fail(err, BP_EINTERNAL, "state buffer name too long: %s...", b->name);
    b->data = data;
    b->n = n;
    l->n++;
    return BP_OK;
}

void bp_state_list_free(bp_state_list *l) {
    free(l->bufs);
    *l = (bp_state_list){0};
}
