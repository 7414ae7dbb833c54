/* Optimus-CC (docs/algorithms.md#optimus-cc): compression aware of 3D parallelism, all of it
 * in parallel/occ.c.
 *
 * - Compressed backpropagation (CB): the gradient a stage sends to the previous
 *   stage is PowerSGD-compressed by the sender (rank `cb_rank`, viewing it as a
 *   (micro_B*T) x width matrix); the receiver uses P Q^T. With lazy error
 *   propagation (LEP) the sender keeps the error E = M - P Q^T of a micro-batch and
 *   adds it to the next one's gradient; without, it is dropped. With
 *   `epilogue_only` stage s compresses only its last S - s backward sends of a step
 *   (the cool-down of 1F1B); sender and receiver derive that alike. The first
 *   `cb_warmup_steps` steps send every gradient whole (PowerSGD's recipe for dp
 *   gradients; on compressed backpropagation it removes only the early part of
 *   the loss gap, bench/occ/README.md). Activations going forward are never
 *   compressed. The pipeline (parallel/pipe.c) calls it.
 * - Fused embedding synchronization (FE): the tied embedding's gradient is left
 *   out of the data-parallel reduction and reduced once over the first and last
 *   stages of every replica, then divided by dp (the group is grid.c's, the sum
 *   the plain tied sync's, parallel/tied.h).
 * - Selective stage compression (SC): stages below `sc_stages` PowerSGD-compress
 *   their data-parallel gradients (they finish backward last, so their reduction
 *   is on the critical path). */
#ifndef BP_PARALLEL_OCC_H
#define BP_PARALLEL_OCC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/options.h"
#include "core/trace.h"
#include "nn/model.h"
#include "parallel/dp.h"
#include "parallel/grid.h"

/* Optimus-CC's settings as the options that occ.c declares set them; bp_occ_config
 * is what a run derives from them (bp_train_occ_config). */
typedef struct bp_occ_settings {
    bool cb;               /* compressed backpropagation on */
    int cb_rank;
    bool no_lep;           /* drop the compression error instead of carrying it */
    int64_t cb_warmup;     /* steps with every backward send whole first */
    bool cb_epilogue_only; /* compress only the 1F1B cool-down's backward sends */
    bool fused_embedding_sync;
    int sc_stages;         /* stages below this compress their dp gradients */
    int sc_rank;
    double sc_warmup;      /* fraction of --steps with full-precision dp first */
} bp_occ_settings;

extern const bp_option_group bp_occ_options;

typedef struct bp_occ_config {
    int cb_rank;        /* compressed backpropagation's rank; 0: off */
    bool lep;           /* lazy error propagation */
    bool epilogue_only; /* compress only the cool-down's backward sends */
    int64_t cb_warmup_steps; /* steps 0 .. this - 1 send every gradient whole */
    uint64_t seed;      /* of the CB codecs' Q */
    bool fused_embedding;
    int sc_stages;      /* stages below this compress their dp gradients; 0: off */
    int sc_rank;
    int64_t sc_warmup_steps; /* of full-precision reduction first */
} bp_occ_config;

/* Refuse combinations that cannot work: FE needs a model with a tied embedding
 * (`tied`), 2 stages or more and a gradient algorithm; SC compresses allreduce;
 * neither goes with AvgPipe (`avgpipe`). Messages name the option. */
bp_status bp_occ_check(const bp_occ_config *c, bool tied, int pp, int dp_algo, bool avgpipe,
                       bp_err *err);

/* Stage `stage`'s data-parallel settings d with FE (the tied tensor `tied_tensor`,
 * held by the first and last stages, left out of the reduction) and SC applied. */
void bp_occ_dp_config(const bp_occ_config *c, int stage, int pp, const char *tied_tensor,
                      bp_dp_config *d);

/* BP_EUSAGE naming --cb-rank unless a rank-r approximation of a rows x cols
 * gradient, (rows + cols) r floats, is smaller than the gradient itself: a
 * compression that sends more than it saves is a mistake in the configuration. */
bp_status bp_cb_check_shape(int rank, size_t rows, size_t cols, bp_err *err);

/* CB of one pipeline stage: codecs for N replicas, gradients of micro-batches of
 * `rows` rows, `in_n` floats received from the previous stage (whose gradient this
 * stage sends back) and `out_n` sent to the next (whose gradient it receives). */
typedef struct bp_cb bp_cb;
bp_status bp_cb_create(const bp_occ_config *c, int S, int s, int N, size_t rows, size_t in_n,
                       size_t out_n, bp_cb **out, bp_err *err);
void bp_cb_destroy(bp_cb *cb);
/* The optimizer step (0-based) the next pipeline step belongs to: the warm-up
 * rule reads it (a resumed run continues where it stopped). */
void bp_cb_set_step(bp_cb *cb, int64_t step);
/* Whether backward send number b (0-based, of n per step) of stage `sender` is
 * compressed in this step; the receiving stage asks the same question. */
bool bp_cb_compressed(const bp_cb *cb, int sender, int b, int n);
/* Floats on the wire for a gradient this stage sends / receives compressed. */
size_t bp_cb_send_floats(const bp_cb *cb);
size_t bp_cb_recv_floats(const bp_cb *cb);
/* Compress the gradient dx[in_n] of replica j into wire (with LEP, its error is
 * carried to the replica's next send), Q orthonormalized first as Optimus-CC does
 * (its warm start reused, or its first random draw); trace (or NULL) records it. Adds the
 * relative error |M - P Q^T| / |M| of this send (M = dx + the carried error) to
 * what bp_cb_take_rel_err returns. */
bp_status bp_cb_encode(bp_cb *cb, int j, const bp_real *dx, float *wire, bp_trace *trace,
                       bp_err *err);
/* Sum of the relative errors of the sends encoded since the last call. */
double bp_cb_take_rel_err(bp_cb *cb);
/* Append to l each sender codec's error (carried by LEP) and warm-started Q, by
 * replica, for a checkpoint (nothing for cb NULL, or on the first stage). */
bp_status bp_cb_state(bp_cb *cb, bp_state_list *l, bp_err *err);
/* The gradient dy[out_n] from what the next stage sent. */
bp_status bp_cb_decode(bp_cb *cb, const float *wire, bp_real *dy, bp_trace *trace, bp_err *err);

#endif
