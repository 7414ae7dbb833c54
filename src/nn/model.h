/* Models as ordered lists of blocks over one flat parameter buffer.
 *
 * gpt (docs/ARCHITECTURE.md#models): blocks are [embed] [transformer block x L] [final LN +
 *   tied LM head], so num_blocks = L + 2.
 * mlp: blocks are [fc1+ReLU] ... [fcN+ReLU] [fc_out + softmax cross-entropy].
 *
 * A bp_model holds a contiguous range [block_begin, block_end) of the full model:
 * the whole model in one process, or one pipeline stage. Its parameters live in
 * one flat buffer and its gradients in another of the same layout; every tensor
 * is a view (bp_tensor_info.offset). Tensors are laid out in forward order, so
 * reverse layer order (the order backward finishes them) is the buffer read
 * from its end. The tied embedding (wte) belongs to the embed block; a range that
 * holds the head but not the embed block gets its own copy named "wte.weight"
 * (flagged `tied_copy`) that the caller keeps in sync. When one range holds both
 * (the whole model in one process), the head uses wte itself and both gradient
 * contributions add up in wte's one gradient.
 *
 * Weights are initialized tensor by tensor from streams derived from (seed, index
 * of the tensor in the full model), so a stage is initialized exactly like the same
 * blocks of the full model, whatever the range.
 *
 * Tensor parallelism (gpt only; docs/ARCHITECTURE.md#models, Megatron-style): a model created
 * with bp_model_create_tp is the shard of tp rank r out of T of its block range. In
 * every transformer block the attention heads and the MLP's hidden units are divided
 * among the T ranks: attn.c_attn is column-split (rank r holds the q, k and v rows
 * of W [3C,C] that belong to its n_head/T heads), attn.c_proj row-split (the input
 * columns of those heads), mlp.c_fc column-split (4C/T of its outputs) and
 * mlp.c_proj row-split. Forward sums the partial outputs of each row-split product
 * over the tp ranks through the caller's allreduce and then adds the (replicated)
 * bias; backward sums the partial input gradients of each column-split product. So
 * forward and backward each call the allreduce exactly twice per transformer block,
 * on contiguous [B*T, C] buffers. Everything else (LayerNorms, wte, wpe, the head, the
 * row-split biases) is replicated, and because its inputs are identical on every tp
 * rank so are its gradients: they need no tensor-parallel reduction. Boundary
 * activations and their gradients are identical on every tp rank as well.
 * nn/ does no communication of its own: the allreduce is the caller's callback.
 *
 * Activations of one micro-batch live in a bp_acts, separate from the model, so a
 * pipeline schedule can keep several micro-batches in flight. The backward
 * workspace belongs to the model and is shared by them, so calls on one model must
 * not run concurrently. */
#ifndef BP_NN_MODEL_H
#define BP_NN_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bagpipe/status.h"
#include "core/backend.h"
#include "nn/lr.h"
#include "nn/optim.h"
#include "nn/real.h"

/* The registry of model kinds: one line X(ENUM, name) a kind, in the order of the
 * enum. A kind `name` is the file nn/name.c, which defines bp_name_ops
 * (nn/model_impl.h); the code above nn/ knows a kind only through the facts below. */
#define BP_MODEL_KINDS(X) X(GPT, gpt) X(MLP, mlp)

#define BP_MODEL_KIND_ENUM_(K, name) BP_MODEL_##K,
typedef enum bp_model_kind { BP_MODEL_KINDS(BP_MODEL_KIND_ENUM_) BP_MODEL_NUM_KINDS } bp_model_kind;
/* The names of the kinds as an option's choices, "gpt|mlp", in the order of the enum:
 * the string "|gpt|mlp" past its first character. */
#define BP_MODEL_KIND_CHOICE_(K, name) "|" #name
#define BP_MODEL_KIND_CHOICES (&BP_MODEL_KINDS(BP_MODEL_KIND_CHOICE_)[1])

/* An int field of bp_model_config by the name a saved profile gives it. */
typedef struct bp_model_field {
    const char *key;
    size_t offset;
} bp_model_field;

/* What a model kind is, for the layers above nn/ that must not test which kind it is. */
typedef struct bp_model_facts {
    const char *name;     /* as --model, checkpoints and profiles spell it: "gpt" */
    bool reads_tokens;    /* its input is token ids of a text (else floats of images) */
    bool accuracy;        /* evaluation scores accuracy: a sample has one label */
    bool on_cuda;         /* has forward and backward kernels for the GPU (nn/cuda/) */
    const char *unit;     /* what a position of a sample is, for progress: "tok" */
    const char *sample;   /* what a sample is, in plots: "sequences" */
    const char *loss_per; /* what the loss is the mean over, in plots: "byte" */
    /* What the kind trains on and with when the options do not say. */
    const char *data;     /* --data: "kjv", or the Fashion-MNIST directory */
    int train_samples;    /* samples in that data set, 0 for a text of endless windows */
    int batch;
    int64_t steps;        /* 0: one pass over the train_samples */
    bp_optim_kind optim;
    double lr;
    bp_lr_kind lr_schedule;
    /* The fields of bp_model_config that its shape is made of (the others are 0). */
    const bp_model_field *shape;
    int n_shape;
} bp_model_facts;

/* The facts of `kind`, or NULL for a value out of the enum. */
const bp_model_facts *bp_model_kind_facts(bp_model_kind kind);
/* The name of `kind` ("gpt"), or "?" for a value out of the enum. */
const char *bp_model_kind_name(bp_model_kind kind);
/* The kind named `name`; BP_EFORMAT with a message that gives the name and lists the
 * known ones when there is none (the caller adds where the name came from). */
bp_status bp_model_kind_parse(const char *name, bp_model_kind *out, bp_err *err);

typedef struct bp_model_config {
    bp_model_kind kind;
    /* gpt */
    int vocab;   /* vocabulary size (256: bytes) */
    int n_layer; /* L, transformer blocks */
    int n_embd;  /* C, channels */
    int n_head;  /* attention heads; n_embd % n_head == 0 */
    int seq_len; /* T, maximum sequence length (learned positions) */
    /* mlp */
    int in_dim;   /* input features (784) */
    int hidden;   /* H, width of every hidden layer */
    int n_hidden; /* number of hidden layers (2 for 784-H-H-10) */
    int n_class;  /* output classes (10) */
} bp_model_config;

#define BP_TENSOR_NAME_MAX 64
#define BP_TENSOR_MAX_DIM 4

typedef struct bp_tensor_info {
    char name[BP_TENSOR_NAME_MAX]; /* safetensors name, e.g. "h.0.attn.c_attn.weight" */
    int ndim;
    int shape[BP_TENSOR_MAX_DIM];
    size_t offset; /* in elements, into the flat parameter and gradient buffers */
    size_t numel;
    int block;      /* index (in the full model) of the block that owns the tensor */
    bool tied_copy; /* a head-side copy of the tied embedding (see above) */
    /* Tensor parallelism. shape/numel above are those of this model's shard (the
     * whole tensor when tp_size is 1 or the tensor is replicated); full_shape and
     * full_numel those of the whole tensor. split_dim is how tensor parallelism
     * splits the tensor, whatever tp_size: -1 replicated (every tp rank holds it
     * whole), 0 column-split (rows of W [out, in] and of its bias), 1 row-split
     * (columns of W). Dimension split_dim of the full tensor is made of split_groups
     * equal groups (3 for attn.c_attn: q, k, v; else 1), each cut into tp_size equal
     * pieces; the shard of tp rank r holds piece r of every group, in group order.
     * bp_tensor_shard_to_full / _from_full convert between the layouts. */
    int split_dim;
    int split_groups;
    int full_shape[BP_TENSOR_MAX_DIM];
    size_t full_numel;
    int tp_rank, tp_size; /* the shard this model holds: 0, 1 without tensor parallelism */
} bp_tensor_info;

/* One micro-batch of input. gpt: tokens and targets are [B,T] bytes as int32.
 * mlp: T == 1, images [B,in_dim] (already scaled), targets [B] class labels.
 * targets may be NULL for inference (no loss is computed). */
typedef struct bp_batch {
    int B, T;
    const int32_t *tokens;
    const float *images;
    const int32_t *targets;
} bp_batch;

typedef struct bp_model bp_model;
typedef struct bp_acts bp_acts;

/* cfg zeroed, of `kind`, with the sizes the kind fixes rather than the options:
 * gpt's vocabulary of 256 bytes; mlp's inputs of 784 floats (28 x 28 images) and
 * its 10 classes (Fashion-MNIST). */
void bp_model_config_init(bp_model_config *cfg, bp_model_kind kind);
/* Zero the fields of cfg that its kind does not read, so that a configuration filled
 * from every option compares and saves as the kind's own. */
void bp_model_config_trim(bp_model_config *cfg);
/* Model facts the layers above use instead of knowing the kinds:
 * - the name of the tensor the first and last blocks share (gpt's "wte.weight": the
 *   embedding tied to the head), or NULL;
 * - what one sample is: positions (gpt: a sequence of seq_len tokens; mlp: 1, an
 *   image) and input floats per position (mlp: in_dim; gpt: 0, it reads token ids);
 * - the classes the logits of a position score (vocab or n_class). */
const char *bp_model_tied_tensor(const bp_model_config *cfg);
int bp_model_sample_len(const bp_model_config *cfg);
int bp_model_input_width(const bp_model_config *cfg);
int bp_model_num_classes(const bp_model_config *cfg);

/* The model's shape in words, e.g. "4 layers, 128 channels, 4 heads, seq 64", into
 * buf[0..n); returns buf. */
const char *bp_model_describe(const bp_model_config *cfg, char *buf, size_t n);

/* Check a configuration; the message names the offending field. */
bp_status bp_model_config_check(const bp_model_config *cfg, bp_err *err);
int bp_model_num_blocks(const bp_model_config *cfg);
/* A short human name of block i, e.g. "embed", "h.3", "head". */
const char *bp_model_block_name(const bp_model_config *cfg, int block, char *buf, size_t n);

/* The tensors of block `block` as the model kind lays them out (the whole tensors,
 * before tensor parallelism; split_dim and split_groups as in bp_tensor_info), in
 * the order of the flat buffer, into out[0..n); returns n (0 for a block out of
 * range). A model range that holds the head but not block 0 also holds a copy of
 * the tied tensor, after the head's own (see the top of this file). What the
 * simulator reads instead of a layout of its own. */
#define BP_BLOCK_MAX_TENSORS 16
typedef struct bp_tensor_layout {
    char name[BP_TENSOR_NAME_MAX];
    int ndim;
    int shape[BP_TENSOR_MAX_DIM];
    int split_dim, split_groups;
} bp_tensor_layout;
int bp_model_block_layout(const bp_model_config *cfg, int block, bp_tensor_layout *out);

/* Create the range [block_begin, block_end) of the model; block_end = -1 means
 * through the last block. Parameters are zero until bp_model_init_weights. */
bp_status bp_model_create(const bp_model_config *cfg, int block_begin, int block_end,
                          bp_model **out, bp_err *err);
void bp_model_destroy(bp_model *m);

/* Tensor parallelism. allreduce_sum replaces x[0..n) on every tp rank by its sum
 * over the tp ranks, identically on all of them (every rank must get the very same
 * bits, or the replicated tensors drift apart), and returns BP_OK or a bp_status;
 * forward and backward return that status unchanged when it is not BP_OK. All tp
 * ranks call it in the same order with the same n. Called only when size > 1. */
typedef struct bp_tp {
    int rank, size;
    bp_status (*allreduce_sum)(void *ctx, bp_real *x, size_t n);
    void *ctx;
} bp_tp;

/* Whether cfg can be split across tp_size ranks: tp_size >= 1; for tp_size > 1 only
 * gpt, with n_head divisible by tp_size. The message names the field. */
bp_status bp_model_tp_check(const bp_model_config *cfg, int tp_size, bp_err *err);
/* The shard of tp rank tp->rank out of tp->size of the range [block_begin,
 * block_end); tp == NULL or tp->size == 1 is bp_model_create. The callback and its
 * context must outlive the model. */
bp_status bp_model_create_tp(const bp_model_config *cfg, int block_begin, int block_end,
                             const bp_tp *tp, bp_model **out, bp_err *err);
int bp_model_tp_rank(const bp_model *m);
int bp_model_tp_size(const bp_model *m);

/* Shape (written to shape[0..t->ndim)) and element count of the shard of t that
 * each of `size` tp ranks holds; size must be valid for the model (bp_model_tp_check). */
size_t bp_tensor_shard_shape(const bp_tensor_info *t, int size, int *shape);
/* full [t->full_shape] <- the shard of tp rank `rank` of `size`, at its place;
 * the other ranks' places are left alone, so the shards of all ranks assemble it. */
void bp_tensor_shard_to_full(const bp_tensor_info *t, int rank, int size, const bp_real *shard,
                             bp_real *full);
/* shard <- the slice of full [t->full_shape] that tp rank `rank` of `size` holds. */
void bp_tensor_shard_from_full(const bp_tensor_info *t, int rank, int size, const bp_real *full,
                               bp_real *shard);

const bp_model_config *bp_model_get_config(const bp_model *m);
int bp_model_block_begin(const bp_model *m);
int bp_model_block_end(const bp_model *m);
bool bp_model_has_first(const bp_model *m); /* holds block 0 (takes tokens/images) */
bool bp_model_has_last(const bp_model *m);  /* holds the head (computes the loss) */

/* The backend whose memory holds the parameters, gradients, workspace and
 * activations (core/backend.h): the layers above reach them only through its
 * table. A model starts on the cpu backend; bp_model_set_backend moves it (its
 * weights kept) before any activations are made for it. The layers of nn/ run as
 * host code inside the backend's host_begin/host_end, so only backends that have
 * them take a model of nn/ (cpu, check). */
const bp_backend *bp_model_backend(const bp_model *m);
bp_status bp_model_set_backend(bp_model *m, const bp_backend *be, bp_err *err);

/* bf16 mixed precision on the cpu backend, by the rules of nn/bf16.h (bf16
 * activations and weight copies, fp32 weights, gradients and optimizer state), the
 * rounding done in software on fp32 storage. gpt only, on the cpu backend; refused
 * with one line otherwise. */
bp_status bp_model_set_bf16(bp_model *m, bp_err *err);

/* A model kind's forward and backward as kernels of a device (nn/model_impl.h), for a
 * backend whose memory the host cannot reach (cuda: nn/cuda/model_cuda.h's
 * bp_gpt_cuda). */
typedef struct bp_model_device_ops bp_model_device_ops;
/* bp_model_set_backend onto such a backend: the model keeps its tensor table, flat
 * layout and checks, and runs forward and backward through dev. bf16: activations and
 * the weights the layers read in bf16 (gradients, weights and optimizer state stay
 * fp32). What dev cannot do yet for this model is refused here, before any work, with
 * one line naming it. dev == NULL is bp_model_set_backend; with bf16 on the model's
 * own (cpu) backend, bp_model_set_bf16. */
bp_status bp_model_set_device(bp_model *m, const bp_backend *be, const bp_model_device_ops *dev,
                              bool bf16, bp_err *err);

size_t bp_model_num_params(const bp_model *m);
bp_real *bp_model_params(bp_model *m);
bp_real *bp_model_grads(bp_model *m);
int bp_model_num_tensors(const bp_model *m);
const bp_tensor_info *bp_model_tensor(const bp_model *m, int i);
/* The tensor named `name`, or NULL. */
const bp_tensor_info *bp_model_find_tensor(const bp_model *m, const char *name);

/* GPT-2 initialization for gpt (weights N(0, 0.02), residual projections
 * N(0, 0.02/sqrt(2L)), biases 0, LayerNorm gain 1); PyTorch's nn.Linear default
 * (uniform +-1/sqrt(fan_in)) for mlp. A tensor-parallel shard is the slice of the
 * tensor one process would have, so the tp ranks together equal one process. On a
 * device (bp_model_set_device) the values are drawn on the host and copied; where the
 * host copy cannot be allocated the weights become NaN, which the step refuses. */
void bp_model_init_weights(bp_model *m, uint64_t seed);
void bp_model_zero_grad(bp_model *m);

/* Width of the activation passed between blocks at a range boundary, per row:
 * n_embd for gpt; for mlp the width of the previous layer's output. The boundary
 * activation of a micro-batch is [B*T, width] (T == 1 for mlp). `block` is the
 * index of the block the activation enters, in [0, num_blocks]: for mlp, block 0
 * gives in_dim and num_blocks gives n_class; 0 for a block out of range. */
int bp_model_boundary_width(const bp_model_config *cfg, int block);

/* What the simulator costs a model by, on one of tp ranks: the forward FLOPs of block
 * `block` on a B x T micro-batch (matrix products and attention; backward is twice as
 * many), and the bytes of activations that blocks [b0, b1) hold for one micro-batch
 * until its backward, as bp_acts_create would allocate them. */
double bp_model_block_flops(const bp_model_config *cfg, int tp, int block, int B, int T);
size_t bp_model_act_bytes(const bp_model_config *cfg, int tp, int b0, int b1, int B, int T);

/* Activations for micro-batches of up to B x T (T <= seq_len). */
bp_status bp_acts_create(const bp_model *m, int B, int T, bp_acts **out, bp_err *err);
void bp_acts_destroy(bp_acts *a);
/* Bytes of activation storage one micro-batch in flight holds. */
size_t bp_acts_bytes(const bp_acts *a);
/* Bytes of the backward workspace, which the model allocates at its first backward
 * (and grows for a larger micro-batch) and shares between all micro-batches. */
size_t bp_model_workspace_bytes(const bp_model *m);

/* Forward over the model's blocks.
 * x_in: boundary input [B*T, width(block_begin)] when !has_first, else NULL. It is
 * copied into the activations, so the caller may reuse its buffer at once.
 * On success, when has_last and batch->targets != NULL, *loss is the mean
 * cross-entropy over the B*T (gpt) or B (mlp) targets; otherwise *loss is 0.
 * loss may be NULL. Token and target ids out of range fail with BP_EUSAGE. A failing
 * tensor-parallel allreduce fails with its status and leaves the activations as
 * if no forward had run on them. */
bp_status bp_model_forward(bp_model *m, bp_acts *a, const bp_batch *batch, const bp_real *x_in,
                           double *loss, bp_err *err);

/* The boundary output of the last forward [B*T, width(block_end)] when !has_last. */
const bp_real *bp_acts_output(const bp_acts *a);
/* Logits of the last forward, [B*T, vocab] or [B, n_class], when has_last. */
const bp_real *bp_acts_logits(const bp_acts *a);

/* Called by bp_model_backward each time the gradients of a block are final, from
 * the last block of the range down to the first, so that a caller can start
 * sending them while backward goes on. Tensors lie in forward order, so after
 * block b the gradients from its first tensor to the end of the buffer are final.
 * fn == NULL removes the hook. The hook runs on the thread calling backward. */
typedef void (*bp_grad_ready_fn)(void *ctx, int block);
void bp_model_set_grad_hook(bp_model *m, bp_grad_ready_fn fn, void *ctx);

/* Backward: accumulates (+=) into the gradient buffer.
 * When has_last, the gradient of loss_scale * (mean loss) is propagated and dy
 * must be NULL; otherwise dy is the gradient of the boundary output.
 * dx_in receives the gradient of the boundary input when !has_first (else NULL;
 * a later stage may also pass NULL when it does not need it).
 * batch must be the one of the last forward on `a`; `a` is not modified, so a
 * second backward adds the same gradient again. A failing tensor-parallel allreduce
 * fails with its status and leaves the gradient buffer partly accumulated (the
 * caller zeroes it or stops). */
bp_status bp_model_backward(bp_model *m, bp_acts *a, const bp_batch *batch, const bp_real *dy,
                            bp_real *dx_in, bp_real loss_scale, bp_err *err);

#endif
