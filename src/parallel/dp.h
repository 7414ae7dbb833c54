/* Data parallelism: how the replicas of one model on the ranks of a dp group agree
 * (docs/algorithms.md). One bp_dp per replica; the trainer calls, per step:
 *
 *   bp_dp_step_begin    before the first forward of the step (with its lr)
 *   bp_dp_backward_begin before the backward whose gradients are synchronized
 *                       (the last micro-batch with gradient accumulation)
 *   bp_dp_backward_end  after it: gradient algorithms wait for their buckets here
 *   bp_dp_update        the optimizer's step (already done with early updates)
 *   bp_dp_average       whatever the algorithm does to the weights after it (mixing,
 *                       elastic averaging, an outer step)
 *
 * Gradient algorithms average gradients in buckets on a communication thread that
 * starts each bucket as soon as backward has written it; weight algorithms step on
 * local gradients and then mix weights. Each algorithm is one file of parallel/dp/
 * (its rule in its opening comment), listed in parallel/dp/registry.h; the engine
 * they share is parallel/dp/engine.c. AvgPipe's elastic averaging of the replicas
 * one rank holds (--pipelines) is parallel/avgpipe.c. */
#ifndef BP_PARALLEL_DP_H
#define BP_PARALLEL_DP_H

#include <stdbool.h>
#include <stdint.h>

#include "bagpipe/comm.h"
#include "core/state.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "parallel/buckets.h"

#include "parallel/dp/settings.h"

/* "allreduce|bytegrad|...", in the order of bp_dp_algo, for option tables. */
#define BP_DP_CHOICE(id, name, ops) "|" name
#define BP_DP_ALGO_CHOICES (&BP_DP_ALGOS(BP_DP_CHOICE)[1])

/* Gradient algorithms average gradients (in buckets, the same on every replica);
 * weight algorithms let the replicas' weights differ and mix them. */
typedef enum bp_dp_kind { BP_DP_GRADIENT, BP_DP_WEIGHT } bp_dp_kind;

typedef struct bp_dp_algo_ops bp_dp_algo_ops;

#define BP_DP_BUCKET_MB 10.0 /* the default bucket size */

typedef struct bp_dp_config {
    bp_dp_algo algo;
    /* Each algorithm's own settings in its slot (parallel/dp/settings.h; typed by
     * parallel/dp/<name>.h where others read them); easgd's are also AvgPipe's. */
    bp_dp_settings settings;
    int replicas;          /* avgpipe: pipelines (replicas per rank); bp_dp_create sets it */
    bool hierarchical;     /* reduce within nodes, run the algorithm among node leaders */
    int node_size;         /* ranks per node for hierarchical (0: find by shared memory) */
    double bucket_mb;      /* gradient bucket size */
    /* Gradient algorithms: measure the first steps with several bucket sizes and
     * keep the fastest (parallel/dp/bucket_tune.c); bucket_mb is then the size
     * until the choice and for the algorithms without buckets. */
    bool bucket_auto;
    bool overlap;          /* start buckets during backward (off: after it) */
    /* The caller neither changes the gradients after bp_dp_backward_end (no
     * clipping, no tied-embedding sync) nor skips a step: then each bucket's update
     * starts as soon as its average has arrived, while later buckets travel
     * (with overlap on). */
    bool early_update;
    double poll_s;         /* bp_comm_set_poll of the dp group (its waits share cores) */
    /* An emulated device's dilation: host intervals (async's --sync-ms) this many
     * times longer, as every modeled duration is (0 or 1: as given). */
    double dilation;
    uint64_t seed;         /* PowerSGD's Q */
    /* A tensor (by name) the gradient algorithms leave out of their reduction because
     * the caller reduces it otherwise (Optimus-CC's fused embedding sync); NULL: none. */
    const char *skip_tensor;
} bp_dp_config;

/* Check cfg for a dp group of `size` ranks whose replicas use optimizer `optim`;
 * the message names the option. */
bp_status bp_dp_config_check(const bp_dp_config *cfg, int size, bp_optim_kind optim, bp_err *err);
/* Elastic averaging pulls n replicas (easgd: the dp ranks; AvgPipe: the pipelines)
 * toward a center; the replicas' mean moves from the center by a factor
 * 1 - alpha (n + 1) per averaging, so alpha (n + 1) < 2 is required, and the default
 * is EASGD's beta / n with beta = 0.9 (factor 0.1 - 0.9 / n, within (-0.8, 0.1)). */
double bp_dp_ea_default_alpha(int n);
/* n for cfg on a dp group of `size` ranks (easgd: size; avgpipe: cfg->replicas). */
int bp_dp_ea_replicas(const bp_dp_config *cfg, int size);
/* --ea-alpha's default for the replicas that average (easgd's and AvgPipe's
 * fill_defaults). */
void bp_dp_ea_fill_defaults(bp_dp_config *cfg, int size);
/* The options of algorithm `algo`, offsets within its slot of bp_dp_settings
 * (NULL: it has none, or no such algorithm). */
const struct bp_option_group *bp_dp_algo_options(int algo);
/* "bytegrad" etc. */
const char *bp_dp_algo_name(int algo);
bp_dp_kind bp_dp_algo_kind(int algo);
/* The names of the --dp-algo choices of this kind, "allreduce, bytegrad, ...". */
void bp_dp_algo_list(bp_dp_kind kind, char *buf, size_t n);
/* Whether step n (from 1) needs no agreement of the dp group: the algorithm's
 * replicas meet only at some steps (easgd's and AvgPipe's averaging, DiLoCo's outer
 * steps and fragments) and n is neither one of them nor a warm-up step. Whether a
 * run takes such steps local is the caller's choice (train/config.c). */
bool bp_dp_local_step(const bp_dp_config *cfg, int64_t n);
/* Whether the algorithm has local steps at all (bp_dp_local_step true for some n). */
bool bp_dp_has_local_steps(const bp_dp_config *cfg);
/* The mean number of steps per meeting past the warm-up (1: every step), for the
 * simulator's price of the agreement. */
double bp_dp_steps_per_meeting(const bp_dp_config *cfg);
/* The algorithm and its settings in one line, e.g. "decentralized peers=shift_one interval=1". */
void bp_dp_describe(const bp_dp_config *cfg, char *buf, size_t n);

typedef struct bp_dp bp_dp;

/* Collective over comm: broadcasts rank 0's weights to every replica, then builds
 * the algorithm's state. models[0..n) and optims[0..n) (n > 1 only for avgpipe) stay
 * owned by the caller; every replica starts from rank 0's replica 0. `step` is the number
 * of steps already taken (non-zero when resuming), so that warm-ups and intervals
 * continue where they were. The state beyond the consensus model (bp_dp_state)
 * starts afresh: a resume copies it back after this call. */
bp_status bp_dp_create(bp_comm *comm, const bp_dp_config *cfg, bp_model **models, bp_optim *optims,
                       int n, int64_t step, bp_dp **out, bp_err *err);
/* Stops background communication (async ends in a round every rank agrees on). */
bp_status bp_dp_finish(bp_dp *dp, bp_err *err);
void bp_dp_destroy(bp_dp *dp);

void bp_dp_step_begin(bp_dp *dp, double lr);
void bp_dp_backward_begin(bp_dp *dp);
bp_status bp_dp_backward_end(bp_dp *dp, bp_err *err);
/* The optimizer's step over every replica (nothing left to do when the buckets
 * updated early); the step counts. */
bp_status bp_dp_update(bp_dp *dp, bp_err *err);
/* After bp_dp_update: what the algorithm does to the weights (its after_step:
 * decentralized mixing, elastic averaging, DiLoCo's outer step), then the end of the
 * step (the bucket tuner's measure, the weights' lock released). */
bp_status bp_dp_average(bp_dp *dp, bp_err *err);

/* A stream of steps without a flush (AvgPipe's local steps, parallel/step.h): its
 * steps but the last update each replica inline, as soon as its gradients are
 * complete (with that step's lr), instead of bp_dp_update; after the stream, and
 * before the last step's bp_dp_update, bp_dp_count_steps counts them, each followed
 * by the algorithm's after-step work (for AvgPipe's local steps: none). Only for
 * algorithms without buckets and without an update of their own (avgpipe). */
void bp_dp_replica_update(bp_dp *dp, int j, double lr);
bp_status bp_dp_count_steps(bp_dp *dp, int n, bp_err *err);

/* Append to l what this rank keeps beyond the consensus model that a checkpoint's
 * shard holds, for an exact resume on the same grid: the replicas' own weights and
 * optimizer buffers where replicas differ (not async's: its background thread
 * writes them at times of its own, so its runs do not repeat anyway), and the
 * algorithm's state (the elastic center, PowerSGD's errors and Q, the
 * lp-decentralized replicas). The entries point into the live buffers. */
bp_status bp_dp_state(bp_dp *dp, bp_state_list *l, bp_err *err);

/* Whether the replicas may hold different weights (weight algorithms on > 1 rank). */
bool bp_dp_replicas_differ(const bp_dp *dp);
/* Collective: the average over all replicas (this rank's and the other ranks') of
 * the weights and the optimizer's buffers, into params, m and v (m and v may be
 * NULL: not wanted, or the optimizer has none). */
bp_status bp_dp_average_replicas(bp_dp *dp, float *params, float *m, float *v, bp_err *err);
/* Collective: replica 0 of this rank holds the average of all replicas' weights
 * (computed into avg) until bp_dp_swap_back, its own weights kept in saved; the
 * async averaging thread waits meanwhile. avg and saved hold the model's params. */
bp_status bp_dp_swap_in_average(bp_dp *dp, float *avg, float *saved, bp_err *err);
void bp_dp_swap_back(bp_dp *dp, const float *saved);

/* The lowest model tensor index in which a bucket of this step found a NaN or an
 * infinity (-1: none). Such values are replaced by zeros before they are sent, so
 * that compressed collectives (which refuse them) stay in step on every rank; the
 * caller must then agree with the other ranks to skip the step or stop. */
int bp_dp_nonfinite_tensor(const bp_dp *dp);
/* Instead of bp_dp_update and bp_dp_average: this step's update is dropped (on every rank alike). */
void bp_dp_skip_step(bp_dp *dp);
/* Whether this step exchanges weights during forward and backward (decentralized,
 * started by bp_dp_step_begin): such a step is not abandoned half-way. */
bool bp_dp_exchanging(const bp_dp *dp);
/* Instead of bp_dp_update, before backward ended and while nothing is exchanging:
 * the step never happened (its step count and state stay as they were). */
void bp_dp_abandon_step(bp_dp *dp);

/* --bucket-mb auto: the sizes measured and the choice. */
#define BP_DP_TUNE_SIZES 6
typedef struct bp_dp_tune_result {
    int64_t step;                       /* the choice holds from the step after this one */
    double size_mb[BP_DP_TUNE_SIZES];   /* the candidates */
    float step_ms[BP_DP_TUNE_SIZES];    /* their median step times, averaged over the
                                         * ranks; -1: not measured (same buckets as the
                                         * size before) */
    double chosen_mb;
} bp_dp_tune_result;
/* True once, after the step in which the choice was made (the same on every rank). */
bool bp_dp_bucket_tune_result(bp_dp *dp, bp_dp_tune_result *out);

/* Seconds this step spent waiting for communication (not hidden behind compute). */
double bp_dp_exposed_seconds(const bp_dp *dp);

#endif
