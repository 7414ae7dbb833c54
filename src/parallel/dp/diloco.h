/* DiLoCo's settings and the outer step that diloco.c and streaming_diloco.c share
 * (the rule is written in diloco.c), and bagpipe.torch runs on a PyTorch model's
 * flat weights. diloco's slot holds what both read (--inner-steps, --outer-lr,
 * --outer-momentum, --outer-compress, --outer-topk, --outer-exchange);
 * streaming-diloco's its own (--fragments, --outer-delay, --outer-mix). */
#ifndef BP_PARALLEL_DP_DILOCO_H
#define BP_PARALLEL_DP_DILOCO_H

#include <stddef.h>
#include <stdint.h>

#include "bagpipe/comm.h"
#include "bagpipe/compress.h"

#include "core/backend.h"

#include "parallel/dp/algo.h"
#include "parallel/dp/settings.h"

/* How the pseudo-gradients travel, in the order of --outer-compress's choices. */
typedef enum bp_outer_compress {
    BP_OUTER_NONE,    /* float32, an allreduce */
    BP_OUTER_MINMAX8, /* MinMaxUInt8 per tensor, error feedback, an allgather */
    BP_OUTER_MINMAX4, /* MinMax with 4 bits */
    BP_OUTER_TOPK2,   /* top-k with 2-bit values */
    BP_OUTER_MINMAX2, /* MinMax with 2 bits */
} bp_outer_compress;

/* How compressed pseudo-gradients travel (--outer-exchange). */
typedef enum bp_outer_exchange {
    BP_OUTER_ALLGATHER,      /* every rank's encoding to every rank: (p - 1) messages */
    BP_OUTER_REDUCE_SCATTER, /* shards to their owners, reduced, re-encoded, allgathered */
} bp_outer_exchange;

/* What a codec leaves out of a replica's pseudo-gradient (--outer-residual). */
typedef enum bp_outer_residual {
    BP_OUTER_RESET, /* kept as error feedback; the replica restarts from the global weights */
    BP_OUTER_KEEP,  /* kept in the replica's weights: W_r = G - E_r after the outer step */
} bp_outer_residual;

typedef struct bp_diloco_settings {
    int64_t period;        /* H, inner steps between outer steps */
    double outer_lr;       /* the outer SGD's */
    double outer_momentum; /* its Nesterov momentum */
    bp_outer_compress compress;
    double topk; /* BP_OUTER_TOPK2: the fraction of each tensor sent */
    bp_outer_exchange exchange; /* with a codec */
    bp_outer_residual residual; /* with a codec */
    int64_t warmup;             /* steps of gradient allreduce before the first inner step */
} bp_diloco_settings;

typedef struct bp_streaming_diloco_settings {
    int fragments; /* F: transformer blocks b go to fragment b mod F */
    int64_t delay; /* tau: inner steps between a fragment's sync and its merge */
    double mix;    /* alpha: local = alpha local + (1 - alpha) global at the merge */
} bp_streaming_diloco_settings;

BP_DP_SETTINGS(diloco, DILOCO, bp_diloco_settings)
BP_DP_SETTINGS(streaming_diloco, STREAMING_DILOCO, bp_streaming_diloco_settings)

/* One tensor of a fragment: a range of the flat weights. */
typedef struct bp_diloco_span {
    size_t offset, numel;
} bp_diloco_span;

/* A fragment: its tensors. */
typedef struct bp_diloco_frag {
    const bp_diloco_span *spans;
    int count;
} bp_diloco_frag;

/* What an outer step reads and writes: the arrays of the weights' layout hold n
 * floats in the backend's memory (of which a fragment's spans are read and
 * written); the codecs run on the host, on copies of one tensor at a time in
 * `stage`. dp->state of both algorithms; bagpipe.torch fills one over its own
 * tensors (on the cpu backend). */
typedef struct diloco {
    const bp_backend *be;
    int64_t merge_at; /* streaming: the step after which the fragment in flight merges; -1 */
    int merging;      /* streaming: that fragment */
    int fragments;
    bp_diloco_span *spans; /* the model's tensors by fragment */
    int *first;            /* fragment f's: spans[first[f] .. first[f + 1]) */
    float *global, *momentum;
    float *error;    /* with a codec: each replica's error feedback on what it sends */
    float *error_rs; /* reduce-scatter: on the reduced shard it sends again */
    float *delta;    /* the pseudo-gradients, then their averages */
    float *wire;     /* bp_diloco_wire_floats: float32 packed (backend memory), or the
                        encodings (host memory) */
    float *stage;    /* host: 3 x `largest` floats (a tensor's values, error, decoding) */
    size_t largest;  /* the largest tensor's numel */
    bp_codec *codec; /* NULL: float32 */
    bp_outer_exchange exchange;
    bool keep; /* BP_OUTER_KEEP: the replica's residual E stays in its weights */
    /* The engine's: the pseudo-gradient taken, and its average done (the averaging
     * may run on the communication thread, whose stream is another). */
    bp_dev_event *taken, *averaged;
} diloco;

/* The sources of the efficiencies both declare: docs/results/diloco measured the
 * steps to bagua_convergence's target with its settings (allreduce beside, in the
 * same study), and the mlp's with mlp_convergence's. */
#define BP_DILOCO_STUDY_GPT                                                                    \
    "docs/results/diloco: steps to loss 1.882 (bagua_convergence's target, its settings, " \
    "evaluations every 100 steps) against allreduce's 733.9 in the same study: "
#define BP_DILOCO_STUDY_MLP                                                                       \
    "docs/results/mlp_convergence's settings and target, run for docs/results/diloco: steps to " \
    "loss 0.4228 against allreduce's 693.6 beside it: "

/* The codec of settings c (NULL for float32). */
bp_status bp_diloco_codec_create(const bp_diloco_settings *c, bp_codec **out, bp_err *err);
/* The wire floats that averaging fr over p ranks needs. */
size_t bp_diloco_wire_floats(const diloco *s, bp_diloco_frag fr, int p);
/* delta = global - w on fr, then averaged over comm in place (collective; reads and
 * writes only s's arrays but w: it may run beside steps once delta is taken). */
void bp_diloco_pseudo_gradient(diloco *s, bp_diloco_frag fr, const float *w);
bp_status bp_diloco_average(diloco *s, bp_comm *comm, bp_diloco_frag fr, bp_err *err);
/* The outer step of fr from the average in delta, and the merge of the weights w
 * with the new global ones (mix 0: replaced by them). */
void bp_diloco_outer_step(diloco *s, bp_diloco_frag fr, float *w, float lr, float mu, float mix);

/* The warm-up (--outer-warmup N): whether this step's gradients are averaged (the
 * first N steps), and, after a step, whether it was one of them, in which case the
 * global weights become the replicas' (alike) and nothing else is due. */
bool bp_dp_diloco_warming_up(const bp_dp *dp);
bool bp_dp_diloco_after_warmup(bp_dp *dp);
/* Steps taken since the warm-up (dp->step - N). */
int64_t bp_dp_diloco_steps(const bp_dp *dp);
int64_t bp_dp_diloco_warmup(const bp_dp_config *c);

bp_status bp_dp_diloco_create(bp_dp *dp, int fragments, bp_err *err);
void bp_dp_diloco_destroy(bp_dp *dp);
/* The state that lasts: global weights, momentum, error feedback (with a codec)
 * and, with `in_flight`, the averaged pseudo-gradients not merged yet. */
bp_status bp_dp_diloco_state(bp_dp *dp, bool in_flight, bp_state_list *l, bp_err *err);
/* Fragment f's pseudo-gradient (global - local) into the buffer of those in flight. */
bp_status bp_dp_diloco_pseudo_gradient(bp_dp *dp, int f, bp_err *err);
/* Fragment f's pseudo-gradient, averaged over the group in place (reads and writes
 * only the state's buffers: it may run beside steps). */
bp_status bp_dp_diloco_average(bp_dp *dp, int f, bp_err *err);
/* The outer step of fragment f from its average, and the merge of the local
 * weights with the new global ones (mix 0: replaced by them). */
bp_status bp_dp_diloco_outer_step(bp_dp *dp, int f, float mix, bp_err *err);
bp_status bp_dp_diloco_check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err);
/* " H=.. outer_lr=.. outer_momentum=.. compress=..". */
void bp_dp_diloco_describe(const bp_dp_config *c, char *buf, size_t n);
/* One averaging of n floats (a fragment): seconds and bytes this rank sends. */
double bp_dp_diloco_average_cost(const bp_dp_cost_env *e, size_t n, double *bytes);

#endif
