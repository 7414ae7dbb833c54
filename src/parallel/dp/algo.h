/* What a data-parallel algorithm is to the engine (parallel/dp/engine.c): a table
 * of operations, one per file of this folder, listed in parallel/dp/registry.h.
 *
 * The engine owns what every algorithm shares: rank 0's weights broadcast at the
 * start, the gradient buckets and their communication thread, the non-finite scrub,
 * the optimizer step of each replica, the exposed-time clock and the averaging of
 * replicas for evaluation and checkpoints. An algorithm adds its rule at one of
 * three points: per bucket (gradient algorithms), in place of the optimizer update,
 * or after it (weight algorithms). Not part of the public API: parallel/dp.h is. */
#ifndef BP_PARALLEL_DP_ALGO_H
#define BP_PARALLEL_DP_ALGO_H

#include "parallel/buckets.h"
#include "parallel/dp.h"

struct bp_dp {
    bp_dp_config cfg;
    const bp_dp_algo_ops *ops;
    void *state;      /* the algorithm's, from ops->create */
    bp_comm *comm;
    bp_model *model;  /* replica 0 */
    bp_optim *optim;  /* replica 0's */
    bp_model **models; /* every replica of this rank (several only for AvgPipe) */
    bp_optim *optims;
    int n_replicas;
    int64_t step;     /* steps taken */
    bool use_buckets; /* gradients of this step go through the bucketer */
    bp_bucketer bk;   /* gradient algorithms on more than one rank; n == 0 otherwise */
    int nonfinite;    /* lowest tensor a bucket found non-finite in this step, -1: none */
    bool step_locked; /* this step holds the algorithm's lock (ops->lock) */
    double exposed_s;
};

struct bp_dp_algo_ops {
    bp_dp_kind kind; /* (the name is the registry's) */
    /* Several replicas on one rank, mixed after every step even on one rank (AvgPipe). */
    bool local_replicas;
    /* Refuse settings that cannot work on a group of `size` ranks with optimizer
     * `optim`; the message names the option. NULL: anything goes. */
    bp_status (*check)(const bp_dp_config *cfg, int size, bp_optim_kind optim, bp_err *err);
    /* Build dp->state (after the broadcast: every replica holds the common start). */
    bp_status (*create)(bp_dp *dp, bp_err *err);
    void (*destroy)(bp_dp *dp);
    /* Gradient algorithms: whether this step's gradients go through the buckets
     * (NULL: every step). */
    bool (*buckets_this_step)(const bp_dp *dp);
    /* Gradient algorithms: average bucket b of replica 0's gradients in place, on the
     * communication thread. */
    bp_status (*bucket)(bp_dp *dp, const bp_bucket *b, bp_err *err);
    /* The update from this step's gradients; NULL: every replica's optimizer. */
    bp_status (*update)(bp_dp *dp, double lr, bp_err *err);
    /* Weight algorithms: mix weights after the update (dp->step already counts it);
     * called on more than one rank, or always with local_replicas. */
    bp_status (*after_step)(bp_dp *dp, bp_err *err);
    /* Stop background communication (NULL: none). */
    bp_status (*finish)(bp_dp *dp, bp_err *err);
    /* Keep a background thread from writing the weights until unlock (NULL: none). */
    void (*lock)(bp_dp *dp);
    void (*unlock)(bp_dp *dp);
    /* The settings after the name, e.g. " peers=all interval=2" (NULL: none). */
    void (*describe)(const bp_dp_config *cfg, char *buf, size_t n);
};

/* Engine services for the algorithms. */
/* Every replica's optimizer step on its own gradients. */
void bp_dp_optim_step(bp_dp *dp, double lr);
/* Replica 0's flat weights and their count. */
float *bp_dp_weights(bp_dp *dp, size_t *n);
/* Allocate state of `size` zeroed bytes into dp->state (freed by the engine). */
bp_status bp_dp_state_alloc(bp_dp *dp, size_t size, bp_err *err);

/* Parts that algorithms share: allreduce's bucket (also qadam's during warm-up and
 * powersgd's), bytegrad's state of one MinMaxUInt8 codec (also qadam's), easgd's
 * center (also AvgPipe's, parallel/avgpipe.c). */
bp_status bp_dp_allreduce_bucket(bp_dp *dp, const bp_bucket *b, bp_err *err);
bp_status bp_dp_minmax_create(bp_dp *dp, bp_err *err);
void bp_dp_minmax_destroy(bp_dp *dp);
typedef struct easgd {
    float *center; /* C, alike on every rank */
    float *diff;   /* the D's */
} easgd;
bp_status bp_dp_easgd_create(bp_dp *dp, bp_err *err);
void bp_dp_easgd_destroy(bp_dp *dp);
void bp_dp_easgd_describe(const bp_dp_config *c, char *buf, size_t n);
bp_status bp_dp_ea_check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err);

/* The algorithms of registry.h and AvgPipe's (parallel/avgpipe.c). */
#define BP_DP_DECLARE(id, name, sym) extern const bp_dp_algo_ops sym;
BP_DP_ALGOS(BP_DP_DECLARE)
#undef BP_DP_DECLARE
extern const bp_dp_algo_ops bp_avgpipe_ops;

#endif
