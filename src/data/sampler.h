/* Shuffled epochs over a fixed set of items (used for image classification).
 *
 * Epoch e visits the items in a permutation drawn from the stream (seed, e), so the
 * whole sampler state is (epoch, pos): a checkpoint stores those two numbers and a
 * resumed run continues with the same batches. A batch is the next B_global
 * positions of the permutation; an epoch ends when fewer than B_global remain
 * (the incomplete last batch is dropped, so every step has the same batch size).
 * Every rank walks the same permutation and takes its own B_global/world rows. */
#ifndef BP_DATA_SAMPLER_H
#define BP_DATA_SAMPLER_H

#include <stdint.h>

#include "bagpipe/status.h"

typedef struct bp_epoch_sampler {
    uint64_t seed;
    int n;         /* items */
    int64_t epoch; /* current epoch */
    int pos;       /* next position in the current permutation */
    int *perm;     /* [n], permutation of the current epoch */
} bp_epoch_sampler;

bp_status bp_epoch_sampler_init(bp_epoch_sampler *s, int n, uint64_t seed, bp_err *err);
void bp_epoch_sampler_free(bp_epoch_sampler *s);
/* Continue from (epoch, pos), e.g. after loading a checkpoint. */
void bp_epoch_sampler_seek(bp_epoch_sampler *s, int64_t epoch, int pos);
/* The same for a state read from a file: refuses an epoch below 0 or near the
 * counter's limit, and a position outside [0, n], naming the field. */
bp_status bp_epoch_sampler_restore(bp_epoch_sampler *s, int64_t epoch, int64_t pos, bp_err *err);
/* Item indices of this rank's rows of the next global batch: [B_global/world]. */
void bp_epoch_sampler_next(bp_epoch_sampler *s, int B_global, int rank, int world, int *idx);

#endif
