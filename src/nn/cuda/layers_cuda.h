/* The layers of nn/layers.h as CUDA kernels, callable from C.
 *
 * Every layer has the shapes, the accumulate/overwrite rules and the formulas of its
 * CPU twin in nn/layers.h; pointers are device pointers. Activations and the weight
 * copies the layers read have the type `dt` (fp32, or bf16 for mixed precision as
 * llm.c's train_gpt2.cu does, by the rules of nn/bf16.h, which the CPU follows too);
 * statistics saved for backward (LayerNorm mean and rstd,
 * the cross-entropy's log-sum-exp) and every parameter gradient are fp32. Launches
 * are asynchronous on the context's stream (core/cuda/cuda.h). */
#ifndef BP_NN_CUDA_LAYERS_H
#define BP_NN_CUDA_LAYERS_H

#include "core/cuda/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y [N, OC] = x [N, IC] W^T + b; W [OC, IC]; b [OC] or NULL. cuBLAS. */
void bp_cu_linear_forward(bp_cuda *c, bp_cuda_dtype dt, void *y, const void *x, const void *w,
                          const void *b, int N, int IC, int OC);
/* dx [N, IC] = dy W (overwritten; skipped when NULL), dW [OC, IC] += dy^T x (fp32),
 * db [OC] += sum of the rows of dy (fp32; skipped when NULL). */
void bp_cu_linear_backward(bp_cuda *c, bp_cuda_dtype dt, void *dx, float *dw, float *db,
                           const void *dy, const void *x, const void *w, int N, int IC, int OC);

/* y [N, C] = (x - mean) * rstd * w + b; mean, rstd [N] fp32 (saved); eps 1e-5. */
void bp_cu_layernorm_forward(bp_cuda *c, bp_cuda_dtype dt, void *y, float *mean, float *rstd,
                             const void *x, const void *w, const void *b, int N, int C);
/* dx [N, C] += ..., dw [C] += sum dy xhat, db [C] += sum dy (fp32). */
void bp_cu_layernorm_backward(bp_cuda *c, bp_cuda_dtype dt, void *dx, float *dw, float *db,
                              const void *dy, const void *x, const void *w, const float *mean,
                              const float *rstd, int N, int C);

/* qkv [B, T, 3C] -> out [B, T, C]; att [B, NH, T, T] softmax probabilities (saved). */
void bp_cu_attention_forward(bp_cuda *c, bp_cuda_dtype dt, void *out, void *att, const void *qkv,
                             int B, int T, int C, int NH);
/* dout [B, T, C] -> dqkv [B, T, 3C] (overwritten); datt [NH, T, T] scratch. */
void bp_cu_attention_backward(bp_cuda *c, bp_cuda_dtype dt, void *dqkv, void *datt,
                              const void *dout, const void *qkv, const void *att, int B, int T,
                              int C, int NH);

/* GELU (tanh); backward: dx may alias dy. */
void bp_cu_gelu_forward(bp_cuda *c, bp_cuda_dtype dt, void *y, const void *x, size_t n);
void bp_cu_gelu_backward(bp_cuda *c, bp_cuda_dtype dt, void *dx, const void *x, const void *dy,
                         size_t n);
/* ReLU; backward from the output y, dx may alias dy. */
void bp_cu_relu_forward(bp_cuda *c, bp_cuda_dtype dt, void *y, const void *x, size_t n);
void bp_cu_relu_backward(bp_cuda *c, bp_cuda_dtype dt, void *dx, const void *y, const void *dy,
                         size_t n);
/* out = a + b (out may alias either). */
void bp_cu_residual_forward(bp_cuda *c, bp_cuda_dtype dt, void *out, const void *a, const void *b,
                            size_t n);

/* out [B, T, C] = wte[tokens] + wpe[t]; tokens [B, T] on the device. */
void bp_cu_embedding_forward(bp_cuda *c, bp_cuda_dtype dt, void *out, const int32_t *tokens,
                             const void *wte, const void *wpe, int B, int T, int C);
/* dwte [V, C] += scattered rows, dwpe [maxT, C] += summed over b (fp32 atomics). */
void bp_cu_embedding_backward(bp_cuda *c, bp_cuda_dtype dt, float *dwte, float *dwpe,
                              const void *dout, const int32_t *tokens, int B, int T, int C);

/* lse [N] (fp32, saved) and loss [N] = lse - logits[n, targets[n]] (fp32; the caller
 * sums them in double, as the CPU layer does). */
void bp_cu_crossentropy_forward(bp_cuda *c, bp_cuda_dtype dt, float *lse, float *loss,
                                const void *logits, const int32_t *targets, int N, int V);
/* dlogits [N, V] = scale / N * (softmax(logits) - onehot(targets)) (overwritten). */
void bp_cu_crossentropy_backward(bp_cuda *c, bp_cuda_dtype dt, void *dlogits, const void *logits,
                                 const float *lse, const int32_t *targets, int N, int V,
                                 float scale);

#ifdef __cplusplus
}
#endif
#endif
