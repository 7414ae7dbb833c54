/* bf16 mixed precision: the one description of its rules, which the CUDA layers
 * (nn/cuda/, core/cuda/common.cuh) and the CPU's gpt (gpt.c, with m->wcopy) follow.
 *
 *   - Master weights, their gradients and the optimizer's state are fp32.
 *   - The layers read a bf16 copy of every weight (biases and LayerNorm's included),
 *     made from the fp32 weights at every forward.
 *   - Every activation a layer stores is bf16, and so is every gradient of an
 *     activation in backward: a layer computes in fp32 from its bf16 inputs and
 *     rounds each output once, to nearest, ties to even (__float2bfloat16_rn):
 *     overflow goes to infinity, NaN stays NaN.
 *   - The linear layers' matrix products multiply bf16 inputs and accumulate in fp32;
 *     a weight's gradient accumulates in fp32 and is never rounded.
 *   - Statistics saved for backward (LayerNorm's mean and rstd, the cross-entropy's
 *     log-sum-exp) and the loss are fp32.
 *
 * On the CPU a bf16 value is kept in a float (a float whose low 16 bits are zero is
 * exactly a bf16), so the layers of nn/ run unchanged and bp_bf16_round applies the
 * rounding where the rules store bf16. The linear layers' products run on the CPU's
 * bf16 instructions where it has them (core/blas.h, bp_blas_bf16_inputs), else in
 * fp32 on the same exact factors: the same products, summed in another order.
 * Private to nn/. */
#ifndef BP_NN_BF16_H
#define BP_NN_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nn/real.h"

/* x rounded to the nearest bf16, ties to even. */
static inline float bp_bf16_round1(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        u |= 0x00400000u; /* NaN: keep a mantissa bit that survives the truncation */
    else
        u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* x[0..n) rounded in place (gpt.c). */
void bp_bf16_round(bp_real *x, size_t n);
/* y[i] = x[i] rounded, in one pass (y may be x): the weights' copy. */
void bp_bf16_round_copy(bp_real *y, const bp_real *x, size_t n);

#endif
