/* The layers of nn/: plain forward and backward functions over flat bp_real arrays.
 *
 * Shapes are given as [rows, columns] in row-major order; N is the number of rows
 * (B*T for gpt). Unless a function says otherwise, backward *accumulates* (+=) into
 * parameter gradients (so micro-batches add up) and *overwrites* the input gradient
 * (the caller decides where it goes). No function allocates memory. */
#ifndef BP_NN_LAYERS_H
#define BP_NN_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "nn/real.h"

/* linear.c: y = x W^T + b, W stored [OC, IC] like PyTorch nn.Linear. */
void bp_linear_forward(bp_real *y, const bp_real *x, const bp_real *w, const bp_real *b, int N,
                       int IC, int OC);
void bp_linear_backward(bp_real *dx, bp_real *dw, bp_real *db, const bp_real *dy, const bp_real *x,
                        const bp_real *w, int N, int IC, int OC);

/* layernorm.c: y = (x - mean) / sqrt(var + 1e-5) * w + b over each row of C. */
void bp_layernorm_forward(bp_real *y, bp_real *mean, bp_real *rstd, const bp_real *x,
                          const bp_real *w, const bp_real *b, int N, int C);
/* res = a + b (res may alias a or b), then y = layernorm(res): bp_residual_forward
 * and bp_layernorm_forward in one pass over the rows, with their bits. */
void bp_residual_layernorm_forward(bp_real *res, bp_real *y, bp_real *mean, bp_real *rstd,
                                   const bp_real *a, const bp_real *b, const bp_real *w,
                                   const bp_real *bias, int N, int C);
void bp_layernorm_backward(bp_real *dx, bp_real *dw, bp_real *db, const bp_real *dy,
                           const bp_real *x, const bp_real *w, const bp_real *mean,
                           const bp_real *rstd, int N, int C);

/* attention.c: causal multi-head self-attention on the output of c_attn. */
void bp_attention_forward(bp_real *out, bp_real *att, const bp_real *qkv, int B, int T, int C,
                          int NH);
void bp_attention_backward(bp_real *dqkv, bp_real *datt, const bp_real *dout, const bp_real *qkv,
                           const bp_real *att, int B, int T, int C, int NH);

/* gelu.c: GELU, tanh approximation (GPT-2's, PyTorch approximate="tanh"). */
void bp_gelu_forward(bp_real *y, const bp_real *x, size_t n);
void bp_gelu_backward(bp_real *dx, const bp_real *x, const bp_real *dy, size_t n);
/* bp_gelu_backward over rows x F, and db [F] += the sum of dx's rows: the bias
 * gradient of the product that made x, in the same pass, with the bits of
 * bp_gelu_backward then bp_linear_backward's db. */
void bp_gelu_backward_bias(bp_real *dx, bp_real *db, const bp_real *x, const bp_real *dy,
                           size_t rows, size_t F);

/* relu.c */
void bp_relu_forward(bp_real *y, const bp_real *x, size_t n);
void bp_relu_backward(bp_real *dx, const bp_real *y, const bp_real *dy, size_t n);

/* residual.c: out = a + b. Its backward is the identity into both inputs, which the
 * models get for free by letting both branches share one gradient buffer. */
void bp_residual_forward(bp_real *out, const bp_real *a, const bp_real *b, size_t n);

/* embedding.c: token embedding plus learned position embedding. */
void bp_embedding_forward(bp_real *out, const int32_t *tokens, const bp_real *wte,
                          const bp_real *wpe, int B, int T, int C);
void bp_embedding_backward(bp_real *dwte, bp_real *dwpe, const bp_real *dout, const int32_t *tokens,
                           int B, int T, int C);

/* crossentropy.c: softmax + mean cross-entropy over N rows of V logits. */
double bp_crossentropy_forward(bp_real *lse, const bp_real *logits, const int32_t *targets, int N,
                               int V);
void bp_crossentropy_backward(bp_real *dlogits, const bp_real *logits, const bp_real *lse,
                              const int32_t *targets, int N, int V, bp_real scale);

#endif
