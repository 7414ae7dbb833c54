/* gpt and its optimizer on a GPU: the twin of a CPU bp_model (nn/model.h) and bp_optim
 * (nn/optim.h).
 *
 * A bp_gpu_model is made from a CPU model of the same block range, which it keeps as
 * its host mirror: the tensor table, initialization and checkpoints are the CPU
 * model's, and the GPU holds one fp32 buffer of parameters and one of gradients in
 * exactly its flat layout (so a checkpoint written after bp_gpu_model_download is the
 * file the CPU would write, and flat-buffer communication works unchanged). With
 * BP_CUDA_BF16 the layers read a bf16 copy of the parameters, refreshed by
 * bp_gpu_model_params_changed after each update, and keep their activations in bf16
 * (llm.c's mixed precision); gradients, master weights and optimizer state stay fp32.
 *
 * What it does not do yet: tensor parallelism (tp size 1 only), mlp, several
 * micro-batches in flight (it holds the activations of one), and the per-block
 * gradient hook. */
#ifndef BP_NN_CUDA_MODEL_H
#define BP_NN_CUDA_MODEL_H

#include "nn/cuda/layers_cuda.h"
#include "nn/model.h"
#include "nn/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bp_gpu_model bp_gpu_model;

/* host: a gpt range without tensor parallelism; its parameters are uploaded. It must
 * outlive the GPU model. Micro-batches up to Bmax x Tmax (Tmax <= seq_len). */
int bp_gpu_model_create(bp_cuda *cu, bp_model *host, bp_cuda_dtype dt, int Bmax, int Tmax,
                        bp_gpu_model **out, bp_err *err);
void bp_gpu_model_destroy(bp_gpu_model *g);
bp_model *bp_gpu_model_host(bp_gpu_model *g);
/* Device buffers, fp32, bp_model_num_params(host) elements. */
float *bp_gpu_model_params(bp_gpu_model *g);
float *bp_gpu_model_grads(bp_gpu_model *g);

/* host parameters -> GPU (and its compute copy); GPU -> host parameters or gradients. */
int bp_gpu_model_upload(bp_gpu_model *g, bp_err *err);
int bp_gpu_model_download(bp_gpu_model *g, bool grads, bp_err *err);
/* After the master parameters changed on the GPU: refresh the bf16 copy (no-op in fp32). */
void bp_gpu_model_params_changed(bp_gpu_model *g);
void bp_gpu_model_zero_grad(bp_gpu_model *g);

/* bp_model_forward on the GPU: tokens and targets are the host batch's (copied up);
 * x_in is a device [B*T, C] boundary input of the activation type when the range does
 * not hold block 0. */
int bp_gpu_model_forward(bp_gpu_model *g, const bp_batch *b, const void *x_in, double *loss,
                         bp_err *err);
/* bp_model_backward on the GPU; dy and dx_in are device buffers of the activation type. */
int bp_gpu_model_backward(bp_gpu_model *g, const bp_batch *b, const void *dy, void *dx_in,
                          float loss_scale, bp_err *err);
/* Device pointers into the activations of the last forward (activation type). */
const void *bp_gpu_model_output(const bp_gpu_model *g);
const void *bp_gpu_model_logits(const bp_gpu_model *g);

/* The optimizer on device buffers, with bp_optim's rules and constants. */
typedef struct bp_gpu_optim {
    bp_cuda *cu;
    bp_optim_config cfg;
    size_t n;
    int64_t t;
    float *m, *v;  /* device; v NULL for sgd */
    double *sumsq; /* device scalar for the gradient norm */
} bp_gpu_optim;

int bp_gpu_optim_init(bp_gpu_optim *o, bp_cuda *cu, const bp_optim_config *cfg, size_t n,
                      bp_err *err);
void bp_gpu_optim_free(bp_gpu_optim *o);
void bp_gpu_optim_step(bp_gpu_optim *o, float *params, const float *grads, double lr);
/* Sum of squares of grads [n] (device), in double, to the host. */
int bp_gpu_grad_sumsq(bp_gpu_optim *o, const float *grads, size_t n, double *out, bp_err *err);
/* bp_clip_to on the device. */
void bp_gpu_clip_to(bp_gpu_optim *o, float *grads, size_t n, double norm, double max_norm);
/* The optimizer state (moments and step count) to and from a CPU bp_optim of the same
 * size, for checkpoints. */
int bp_gpu_optim_download(bp_gpu_optim *o, bp_optim *host, bp_err *err);
int bp_gpu_optim_upload(bp_gpu_optim *o, const bp_optim *host, bp_err *err);

#ifdef __cplusplus
}
#endif
#endif
