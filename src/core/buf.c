#include "core/buf.h"

#include <stdlib.h>
#include <string.h>

static size_t round_up(size_t n) { return (n + BP_ALIGN - 1) / BP_ALIGN * BP_ALIGN; }

void *bp_alloc(size_t bytes) {
    if (bytes == 0) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, BP_ALIGN, round_up(bytes)) != 0) return NULL;
    memset(p, 0, round_up(bytes));
    return p;
}

void bp_free(void *p) { free(p); }

bp_status bp_alloc_checked(void **out, size_t bytes, const char *what, bp_err *err) {
    *out = bp_alloc(bytes);
    if (!*out && bytes > 0)
        return bp_fail(err, BP_ENOMEM, "cannot allocate %zu bytes for %s", bytes, what);
    return BP_OK;
}

bp_status bp_arena_init(bp_arena *a, size_t bytes, bp_err *err) {
    memset(a, 0, sizeof *a);
    a->cap = round_up(bytes);
    return bp_alloc_checked((void **)&a->base, a->cap, "arena", err);
}

void bp_arena_free(bp_arena *a) {
    bp_free(a->base);
    memset(a, 0, sizeof *a);
}

void *bp_arena_take(bp_arena *a, size_t bytes) {
    size_t n = round_up(bytes);
    if (n > a->cap - a->used) return NULL;
    void *p = a->base + a->used;
    memset(p, 0, n);
    a->used += n;
    if (a->used > a->peak) a->peak = a->used;
    return p;
}

void bp_arena_reset(bp_arena *a) { a->used = 0; }
