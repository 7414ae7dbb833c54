/* Private interface between model.c (the parts every model shares: tensor table,
 * flat buffers, block ranges, initialization, activation storage, argument checks)
 * and the model kinds (gpt.c, mlp.c), which describe their blocks and run them.
 * Not part of the public API. */
#ifndef BP_NN_MODEL_IMPL_H
#define BP_NN_MODEL_IMPL_H

#include "core/buf.h"
#include "nn/model.h"

typedef enum bp_init_kind {
    BP_INIT_ZERO,
    BP_INIT_ONE,
    BP_INIT_NORMAL,  /* N(0, scale^2) */
    BP_INIT_UNIFORM, /* U(-scale, scale) */
} bp_init_kind;

/* One tensor of a block as the kind describes it. */
typedef struct bp_tensor_spec {
    char name[BP_TENSOR_NAME_MAX];
    int ndim;
    int shape[BP_TENSOR_MAX_DIM];
    bp_init_kind init;
    double scale;
    int split_dim, split_groups; /* as in bp_tensor_info; -1 and 1 unless set */
} bp_tensor_spec;

/* How a tensor of the model is initialized. */
typedef struct bp_tensor_init {
    bp_init_kind kind;
    double scale;
    uint64_t stream; /* RNG stream: index of the tensor in the full model */
} bp_tensor_init;

typedef struct bp_model_ops {
    bp_model_facts facts;
    /* The fields of cfg that make its shape, in words (bp_model_describe). */
    void (*describe)(const bp_model_config *cfg, char *buf, size_t n);
    /* Checks the kind's fields of cfg; the message names the field. */
    bp_status (*check)(const bp_model_config *cfg, bp_err *err);
    /* Checks that a valid cfg splits across tp_size > 1 ranks; NULL when the kind
     * has no tensor parallelism. */
    bp_status (*check_tp)(const bp_model_config *cfg, int tp_size, bp_err *err);
    int (*num_blocks)(const bp_model_config *cfg);
    void (*block_name)(const bp_model_config *cfg, int block, char *buf, size_t n);
    /* Fills out[] with the tensors of `block` in forward order; returns how many. */
    int (*block_tensors)(const bp_model_config *cfg, int block, bp_tensor_spec *out);
    int (*boundary_width)(const bp_model_config *cfg, int block);
    /* The name of tensor 0 of block 0 when it is tied to the head (gpt's wte), else
     * NULL. */
    const char *tied_tensor;
    /* Zeroes the fields of cfg the kind does not read (bp_model_config_trim). */
    void (*trim)(bp_model_config *cfg);
    /* The sizes the kind fixes rather than the options (see bp_model_config_init). */
    void (*fixed_sizes)(bp_model_config *cfg);
    /* What one sample is: positions (rows of activations) and input floats per
     * position (0: token ids), and the classes a position's logits score. */
    int (*sample_len)(const bp_model_config *cfg);
    int (*input_width)(const bp_model_config *cfg);
    int (*num_classes)(const bp_model_config *cfg);
    /* What the simulator costs the kind by (bp_model_block_flops, bp_model_act_bytes);
     * act_bytes counts the slots acts_slots makes, rounded as bp_acts_create rounds
     * them, without a model. */
    double (*block_flops)(const bp_model_config *cfg, int tp, int block, int B, int T);
    size_t (*act_bytes)(const bp_model_config *cfg, int tp, int b0, int b1, int B, int T);
    /* Kind-specific checks of a batch (token and target ranges, inputs present). */
    bp_status (*check_batch)(const bp_model *m, const bp_batch *b, bool backward, bp_err *err);
    /* Sizes (elements) of the activation slots for B x T; returns the slot count and
     * writes the sizes when `sizes` is not NULL. Slot 0 is always the input of the
     * range, [B*T, boundary_width(block_begin)]. */
    int (*acts_slots)(const bp_model *m, int B, int T, size_t *sizes);
    /* Elements of backward workspace for a B x T micro-batch. */
    size_t (*scratch_len)(const bp_model *m, int B, int T);
    /* Run after the generic and kind checks passed, so only the tensor-parallel
     * allreduce (bp_model_tp_allreduce) can make them fail. */
    bp_status (*forward)(bp_model *m, bp_acts *a, const bp_batch *b, double *loss, bp_err *err);
    bp_status (*backward)(bp_model *m, bp_acts *a, const bp_batch *b, const bp_real *dy,
                          bp_real *dx_in, bp_real loss_scale, bp_err *err);
    const bp_real *(*output)(const bp_acts *a);
    const bp_real *(*logits)(const bp_acts *a);
} bp_model_ops;

/* A kind's forward and backward on a device (bp_model_set_device): kernels of its
 * own over the model's flat buffers, which the backend holds, and activations in a
 * bp_acts buffer of the backend. model.c's checks of shapes, batches and arguments run
 * first, as for the host code. */
struct bp_model_device_ops {
    const char *name; /* "gpt on cuda" */
    /* Computes nothing (the emulated device): the weights are not drawn. */
    bool no_values;
    /* BP_OK when it can run m; else BP_EUSAGE with one line naming what it cannot do. */
    bp_status (*check)(const bp_model *m, bool bf16, bp_err *err);
    /* Its state (m->dev_state), made once m's buffers are on the backend. */
    bp_status (*attach)(bp_model *m, bool bf16, bp_err *err);
    void (*detach)(bp_model *m);
    /* Bytes of the activations of a B x T micro-batch. */
    size_t (*acts_bytes)(const bp_model *m, int B, int T);
    bp_status (*forward)(bp_model *m, bp_acts *a, const bp_batch *b, const bp_real *x_in,
                         double *loss, bp_err *err);
    bp_status (*backward)(bp_model *m, bp_acts *a, const bp_batch *b, const bp_real *dy,
                          bp_real *dx_in, bp_real loss_scale, bp_err *err);
    /* fp32 device pointers into a's buffer. */
    const bp_real *(*output)(const bp_acts *a);
    const bp_real *(*logits)(const bp_acts *a);
};

#define BP_MODEL_OPS_DECLARE_(K, name) extern const bp_model_ops bp_##name##_ops;
BP_MODEL_KINDS(BP_MODEL_OPS_DECLARE_)

struct bp_model {
    bp_model_config cfg;
    const bp_model_ops *ops;
    const bp_backend *be; /* where params and grads live */
    const bp_model_device_ops *dev; /* forward and backward on be's device; NULL: ops' */
    void *dev_state;
    int begin, end; /* block range [begin, end) of the full model */
    bp_tp tp;       /* size 1 without tensor parallelism */
    int ntensors;
    bp_tensor_info *tensors;
    bp_tensor_init *init; /* per tensor */
    int *block_first;     /* per block of the range: index of its first tensor */
    size_t nparams;
    bp_real *params, *grads;
    /* bf16 on the cpu (bp_model_set_bf16): the weights as the layers read them, the
     * parameters rounded to bf16 at every forward (nn/bf16.h); NULL in fp32. */
    bp_real *wcopy;
    bp_real *scratch; /* backward workspace shared by all micro-batches, grown on demand */
    size_t scratch_len;
    bp_grad_ready_fn grad_hook; /* see bp_model_set_grad_hook */
    void *grad_hook_ctx;
};

struct bp_acts {
    const bp_model *m;
    int Bmax, Tmax;
    int B, T; /* of the last successful forward; 0 before any */
    int nslots;
    bp_real **slot;
    bp_real *buf;
    size_t bytes;
};

/* Activation slots start on BP_ALIGN boundaries so that every row block is cache-line
 * aligned: the floats a slot of n takes. */
static inline size_t bp_acts_slot_floats(size_t n) {
    size_t per = BP_ALIGN / sizeof(bp_real);
    return (n + per - 1) / per * per;
}

/* Parameters and gradients of tensor j (in block order) of `block`, which must lie in
 * the model's range. */
static inline bp_real *bp_model_param(bp_model *m, int block, int j) {
    return m->params + m->tensors[m->block_first[block - m->begin] + j].offset;
}
static inline bp_real *bp_model_grad(bp_model *m, int block, int j) {
    return m->grads + m->tensors[m->block_first[block - m->begin] + j].offset;
}

/* Backward of the kinds calls this once the gradients of `block` are final. */
static inline void bp_model_block_done(bp_model *m, int block) {
    if (m->grad_hook) m->grad_hook(m->grad_hook_ctx, block);
}

/* Sums x[0..n) over the tp ranks (nothing to do without tensor parallelism); on
 * failure the message names `what` (the layer) and `block`. */
bp_status bp_model_tp_allreduce(bp_model *m, bp_real *x, size_t n, int block, const char *what,
                                bp_err *err);

/* A tensor seen as consecutive runs of len elements, count of them: run k belongs to
 * tp rank k % parts and is run k / parts of that rank's shard. parts is the tp size,
 * or 1 for a replicated tensor (every rank holds its one run). */
typedef struct bp_shard_runs {
    size_t len, count;
    int parts;
} bp_shard_runs;
bp_shard_runs bp_tensor_shard_runs(const bp_tensor_info *t, int size);

/* Fills a tensor spec, replicated: a 1-D tensor when d1 == 0. */
void bp_tensor_spec_set(bp_tensor_spec *s, const char *name, int d0, int d1, bp_init_kind init,
                        double scale);

#endif
