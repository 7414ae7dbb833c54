/* Aligned buffers and a bump arena.
 *
 * Flat float buffers (parameters, gradients, activations) are allocated 64-byte
 * aligned so that BLAS and vectorized loops see cache-line aligned rows. The arena
 * hands out aligned slices of one block and is reset as a whole, which is how
 * per-step scratch space is managed without a free() per tensor. */
#ifndef BP_CORE_BUF_H
#define BP_CORE_BUF_H

#include <stddef.h>

#include "bagpipe/status.h"

#define BP_ALIGN 64

/* Zero-filled, BP_ALIGN-aligned allocation; NULL on failure or when bytes == 0. */
void *bp_alloc(size_t bytes);
void bp_free(void *p);

/* Like bp_alloc but reports failure through err with `what` naming the buffer. */
bp_status bp_alloc_checked(void **out, size_t bytes, const char *what, bp_err *err);

typedef struct bp_arena {
    unsigned char *base;
    size_t cap;  /* bytes */
    size_t used; /* bytes, always a multiple of BP_ALIGN */
    size_t peak; /* largest `used` seen since creation */
} bp_arena;

bp_status bp_arena_init(bp_arena *a, size_t bytes, bp_err *err);
void bp_arena_free(bp_arena *a);
/* An aligned, zero-filled slice of `bytes`, or NULL when the arena is full. */
void *bp_arena_take(bp_arena *a, size_t bytes);
void bp_arena_reset(bp_arena *a);

#endif
