/* Gradient buckets and the communication thread that overlaps them with backward.
 *
 * A bucket is a run of whole tensors, contiguous in the flat gradient buffer, of
 * about `bucket_bytes`, taken from the end of the buffer: reverse layer order, the
 * order in which backward finishes gradients. Bucket i is ready once backward has
 * finished the block of its first (lowest) tensor.
 *
 * One thread per bucketer runs the buckets strictly in order 0, 1, 2, ... on every
 * rank (collectives must be issued in the same order everywhere), each as soon as
 * it is ready, by calling the `run` function given at creation. The thread that
 * runs backward only marks blocks done and, at the end, waits for all buckets (or
 * takes each as it ran, bp_bucketer_next). */
#ifndef BP_PARALLEL_BUCKETS_H
#define BP_PARALLEL_BUCKETS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "bagpipe/status.h"
#include "nn/model.h"

typedef struct bp_bucket {
    size_t offset, len;         /* elements of the gradient buffer */
    int first_tensor, n_tensors; /* model tensor indices */
    int min_block;              /* ready when backward has finished this block */
} bp_bucket;

/* A tensor as the planner sees it: where it lies in the flat buffer and which
 * block's backward finishes it. */
typedef struct bp_bucket_tensor {
    size_t offset, numel;
    int block;
} bp_bucket_tensor;

/* The buckets over t[0..nt) (forward order, contiguous) into out[nt], as the
 * bucketer plans them for bucket_bytes, leaving tensor `skip` (-1: none) out; the
 * number of buckets. The simulator plans with it too, so both cut alike. */
int bp_buckets_plan(const bp_bucket_tensor *t, int nt, size_t bucket_bytes, int skip,
                    bp_bucket *out);

/* Communicate bucket i; returns a status (message in err). */
typedef bp_status (*bp_bucket_fn)(void *ctx, const bp_bucket *b, bp_err *err);

typedef struct bp_bucketer {
    bp_bucket *buckets;
    int n;
    bp_bucket_fn run;
    void *ctx;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int lowest_done;  /* lowest block finished in this round (INT_MAX: none) */
    int next;         /* next bucket to run in this round; n when all ran */
    bool round_open;  /* a round is running: buckets may start */
    bool quit;
    bp_status status;
    bp_err err;
} bp_bucketer;

/* Plan buckets over m's tensors (bucket_bytes > 0) and start the thread. Tensor
 * `skip` (an index, -1 for none) is in no bucket; a bucket never spans it. */
bp_status bp_bucketer_init(bp_bucketer *bk, const bp_model *m, size_t bucket_bytes, int skip,
                           bp_bucket_fn run, void *ctx, bp_err *err);
void bp_bucketer_free(bp_bucketer *bk);

/* Start a round: no block is done yet. */
void bp_bucketer_begin(bp_bucketer *bk);
/* Backward finished `block` (as a bp_grad_ready_fn). */
void bp_bucketer_block_done(void *bucketer, int block);
/* Every block marked done, then bucket i of the round (i = 0, 1, ... in turn) as soon
 * as it ran, while the thread goes on with the later ones; NULL after the last or
 * after a failure. The caller uses each (an early update) and says when it failed. */
const bp_bucket *bp_bucketer_next(bp_bucketer *bk, int i);
void bp_bucketer_fail(bp_bucketer *bk, bp_status rc, const bp_err *err);
/* Every block marked done, the round waited for to its end; the first failure's
 * status (the thread's or the caller's). */
bp_status bp_bucketer_finish(bp_bucketer *bk, bp_err *err);

#endif
