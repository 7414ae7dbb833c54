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

#include "core/options.h"
#include "parallel/buckets.h"
#include "parallel/dp.h"
#include "parallel/dp/cost.h"

typedef struct bp_dp_tune bp_dp_tune;

struct bp_dp {
    bp_dp_config cfg;
    const bp_dp_algo_ops *ops;
    const bp_backend *be; /* the replicas' (their weights, gradients, optimizer state) */
    void *state;      /* the algorithm's, from ops->create */
    bp_comm *comm;
    bp_model *model;  /* replica 0 */
    bp_optim *optim;  /* replica 0's */
    bp_model **models; /* every replica of this rank (several only for AvgPipe) */
    bp_optim *optims;
    int n_replicas;
    int64_t step;     /* steps taken */
    bool use_buckets; /* gradients of this step go through the bucketer */
    bp_bucketer bk;   /* algorithms with ops->bucket on more than one rank; n == 0 otherwise */
    bp_bucketer xchg; /* algorithms with ops->exchange on more than one rank: one bucket */
    bool exchanging;  /* an exchange runs (from bp_dp_step_begin to its wait) */
    double lr;        /* this step's learning rate */
    bool early;       /* this step updates each bucket as soon as its average arrived */
    int nonfinite;    /* lowest tensor a bucket found non-finite in this step, -1: none */
    bool step_locked; /* this step holds the algorithm's lock (ops->lock) */
    double exposed_s;
    bp_dp_tune *tune; /* --bucket-mb auto while measuring (bucket_tune.c); NULL: fixed */
};

struct bp_dp_algo_ops {
    bp_dp_kind kind; /* (the name is the registry's) */
    /* Several replicas on one rank, mixed after every step even on one rank (AvgPipe). */
    bool local_replicas;
    /* Its options, offsets within its slot of bp_dp_settings (parallel/dp/settings.h),
     * placed among train's by the registry (NULL: none). */
    const bp_option_group *options;
    /* AdamW's beta2 where --beta2 is not given (0: the common 0.95). */
    double default_beta2;
    /* Fill the settings left at their "depends on the group" value for a group of
     * `size` ranks, before check (NULL: none). */
    void (*fill_defaults)(bp_dp_config *cfg, int size);
    /* Refuse settings that cannot work on a group of `size` ranks with optimizer
     * `optim`; the message names the option. NULL: anything goes. */
    bp_status (*check)(const bp_dp_config *cfg, int size, bp_optim_kind optim, bp_err *err);
    /* Build dp->state (after the broadcast: every replica holds the common start). */
    bp_status (*create)(bp_dp *dp, bp_err *err);
    void (*destroy)(bp_dp *dp);
    /* Gradient algorithms: whether this step's gradients go through the buckets
     * (NULL: every step). */
    bool (*buckets_this_step)(const bp_dp *dp);
    /* Average bucket b of replica 0's gradients in place, on the communication
     * thread (gradient algorithms, and async during its warm-up). */
    bp_status (*bucket)(bp_dp *dp, const bp_bucket *b, bp_err *err);
    /* Weight algorithms that exchange the weights x_t while forward and backward run
     * (decentralized in Bagua's order): whether this step does (NULL: every step).
     * The engine starts ops->exchange on a communication thread in
     * bp_dp_step_begin; ops->update waits for it with bp_dp_exchange_wait. Forward
     * and backward only read the weights, so the thread may read them meanwhile.
     * An exchange that touches only the algorithm's own buffers may run on through
     * later steps until ops->after_step waits for it (streaming-diloco); meanwhile
     * no other starts, and evaluation, checkpoints and skipped steps wait for it. */
    bool (*exchanges_this_step)(const bp_dp *dp);
    bp_status (*exchange)(bp_dp *dp, bp_err *err);
    /* The update of elements [off, off + len) from this step's gradients (the
     * optimizers' clocks already count this step): once over the whole model, or,
     * with dp->early, once per bucket as soon as the bucket ran (on the thread that
     * ran backward). NULL: every replica's optimizer. */
    bp_status (*update)(bp_dp *dp, double lr, size_t off, size_t len, bp_err *err);
    /* Weight algorithms: mix weights after the update (dp->step already counts it);
     * called on more than one rank, or always with local_replicas. */
    bp_status (*after_step)(bp_dp *dp, bp_err *err);
    /* Append the algorithm's state that lasts from step to step (bp_dp_state;
     * NULL: none). */
    bp_status (*state)(bp_dp *dp, bp_state_list *l, bp_err *err);
    /* Whether step n (from 1, the warm-up's included) brings the replicas together
     * in a collective of its update or averaging (NULL: every step may). The steps
     * between two meetings can be local (parallel/step.h): each replica steps alone,
     * so the ranks' agreement waits for the next meeting instead of costing every
     * step two latencies of the slowest link (bp_dp_local_step). */
    bool (*meets)(const struct bp_dp_config *cfg, int64_t n);
    /* Stop background communication (NULL: none). */
    bp_status (*finish)(bp_dp *dp, bp_err *err);
    /* Keep a background thread from writing the weights until unlock (NULL: none). */
    void (*lock)(bp_dp *dp);
    void (*unlock)(bp_dp *dp);
    /* The settings after the name, e.g. " peers=all interval=2" (NULL: none). */
    void (*describe)(const bp_dp_config *cfg, char *buf, size_t n);
    /* What it sends and computes, for the step simulator (parallel/dp/cost.h). */
    bp_dp_cost cost;
    /* The settings plan tries and its measured statistical efficiency (cost.h). */
    bp_dp_plan plan;
};

/* The table of algorithm `algo` (bp_dp_algo, BP_DP_AVGPIPE included); NULL if none. */
const bp_dp_algo_ops *bp_dp_ops(int algo);

/* The bucketer of dp->cfg's bucket size. */
bp_status bp_dp_bucketer_init(bp_dp *dp, bp_err *err);
/* --bucket-mb auto (bucket_tune.c): create starts measuring (and builds the
 * bucketer); the step calls time each step and switch sizes, then choose. */
bp_status bp_dp_tune_create(bp_dp *dp, bp_err *err);
void bp_dp_tune_destroy(bp_dp *dp);
void bp_dp_tune_step_begin(bp_dp *dp);
bp_status bp_dp_tune_step_end(bp_dp *dp, bp_err *err);

/* Engine services for the algorithms. */
/* The bucket size in floats (at least 1). */
size_t bp_dp_bucket_floats(const bp_dp_config *cfg);
/* Every replica's optimizer update of elements [off, off + len) from its gradients
 * (the optimizers' clocks already count this step). */
void bp_dp_optim_update(bp_dp *dp, double lr, size_t off, size_t len);
/* Replica 0's flat weights and their count. */
float *bp_dp_weights(bp_dp *dp, size_t *n);
/* Wait for the running exchange (the wait counts as exposed time); its status.
 * Only when dp->exchanging. */
bp_status bp_dp_exchange_wait(bp_dp *dp, bp_err *err);
/* Start ops->exchange on the communication thread now, from ops->after_step, to
 * run through the next step (lp-decentralized's ring); nothing when one runs
 * already. */
void bp_dp_exchange_start(bp_dp *dp);
/* Allocate state of `size` zeroed bytes into dp->state (freed by the engine). */
bp_status bp_dp_state_alloc(bp_dp *dp, size_t size, bp_err *err);
/* Whether a bucketed step of c updates each bucket as soon as its average arrived
 * (dp->early; --no-overlap: all sequential). The costs follow the same rule. */
bool bp_dp_updates_early(const bp_dp_config *c);

/* Parts that algorithms share: allreduce's bucket (also qadam's during warm-up and
 * powersgd's), bytegrad's state of one MinMaxUInt8 codec (also qadam's), easgd's
 * center (also AvgPipe's, parallel/avgpipe.c). */
bp_status bp_dp_allreduce_bucket(bp_dp *dp, const bp_bucket *b, bp_err *err);
double bp_dp_allreduce_bucket_cost(const bp_dp_cost_env *e, const bp_dp_cost_bucket *b, double *bytes);
bp_status bp_dp_minmax_create(bp_dp *dp, bp_err *err);
void bp_dp_minmax_destroy(bp_dp *dp);
typedef struct easgd {
    float *center; /* C, alike on every rank */
    float *diff;   /* the D's */
} easgd;
bp_status bp_dp_easgd_create(bp_dp *dp, bp_err *err);
void bp_dp_easgd_destroy(bp_dp *dp);
bp_status bp_dp_easgd_state(bp_dp *dp, bp_state_list *l, bp_err *err);
void bp_dp_easgd_describe(const bp_dp_config *c, char *buf, size_t n);
bp_status bp_dp_ea_check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err);
bool bp_dp_ea_meets(const bp_dp_config *c, int64_t n);

/* The algorithms of registry.h, the features' among them. */
#define BP_DP_DECLARE(id, name, sym) extern const bp_dp_algo_ops sym;
BP_DP_ALGOS(BP_DP_DECLARE)
BP_DP_FEATURE_ALGOS(BP_DP_DECLARE)
#undef BP_DP_DECLARE

#endif
