/* AvgPipe (docs/algorithms.md#avgpipe): N parallel pipelines joined by elastic averaging,
 * all of it in parallel/avgpipe.c.
 *
 * - Replicas: each stage rank holds N replicas of its blocks, one per pipeline,
 *   each with its own optimizer (the stage makes them, parallel/stage.h; one model
 *   without --pipelines).
 * - Interleaving: each step, pipeline j trains replica j on its own micro-batches;
 *   the schedule runs the N x M micro-batches as one stream with the pipelines'
 *   micro-batches interleaved (micro-batch i of pipeline j is position i*N + j), so
 *   that the work of one pipeline fills the other's idle slots. Being one stream
 *   of the chosen schedule, it cannot deadlock.
 * - Elastic averaging: every tau steps the replicas are pulled toward a center on
 *   their rank, and the centers of the data-parallel ranks are averaged (the
 *   data-parallel algorithm of a run with --pipelines, bp_avgpipe_ops). */
#ifndef BP_PARALLEL_AVGPIPE_H
#define BP_PARALLEL_AVGPIPE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/options.h"
#include "nn/model.h"
#include "parallel/dp.h"

/* Each pipeline trains on its own batch (a step draws N batches), or the pipelines
 * split one batch (--avgpipe-batch). */
typedef enum bp_avgpipe_batch { BP_AVGPIPE_OWN_BATCH, BP_AVGPIPE_SPLIT_BATCH } bp_avgpipe_batch;
/* When the pipelines flush (--avgpipe-flush): where average can run, else every step
 * (auto); every step; or only where the replicas meet. */
typedef enum bp_avgpipe_flush { BP_FLUSH_AUTO, BP_FLUSH_STEP, BP_FLUSH_AVERAGE } bp_avgpipe_flush;

/* AvgPipe's settings, set by the options that avgpipe.c declares; its elastic
 * averaging takes alpha and tau from easgd's settings (--ea-alpha, --ea-period). */
typedef struct bp_avgpipe_settings {
    int pipelines; /* parallel pipelines per stage rank (0: off) */
    bp_avgpipe_batch batch;
    bp_avgpipe_flush flush;
} bp_avgpipe_settings;

/* Placed among train's options by train/config.c; bp_train_dp_config also copies
 * them into AvgPipe's slot of bp_dp_config's settings for bp_avgpipe_ops. */
extern const bp_option_group bp_avgpipe_options;
BP_DP_SETTINGS(avgpipe, AVGPIPE, bp_avgpipe_settings)

/* Refuse what AvgPipe cannot run with: another --dp-algo, and a flush only where
 * the replicas meet with `clip` or `skip_nonfinite` (which need every stage's
 * gradient norm or verdict at every step). Messages name the option. */
bp_status bp_avgpipe_check(const bp_avgpipe_settings *s, bp_dp_algo algo, bool clip,
                           bool skip_nonfinite, bp_err *err);

/* The position of micro-batch i of pipeline j in the stream, and the pipeline
 * (replica) of position v. */
static inline int bp_avgpipe_position(int i, int j, int N) { return i * N + j; }
static inline int bp_avgpipe_replica(int v, int N) { return v % N; }

/* Cut batch b (rows of `width` input floats for image models, tokens otherwise),
 * the rows of pipelines j0 .. j0+n-1 of N, into n x M micro-batches of micro_B rows:
 * pipeline j0 + k takes the k-th n-th of the rows, in M micro-batches, and its
 * micro-batch i goes to out[bp_avgpipe_position(i, j0 + k, N)]. One batch split
 * among the pipelines is j0 = 0, n = N; pipeline j's own batch is j0 = j, n = 1.
 * The micro-batches point into b. */
void bp_avgpipe_split(const bp_batch *b, int j0, int n, int N, int M, int micro_B, size_t width,
                      bp_batch *out);

#endif
