/* AvgPipe (DESIGN.md section 6): N parallel pipelines joined by elastic averaging,
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

#include <stddef.h>

#include "nn/model.h"

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
