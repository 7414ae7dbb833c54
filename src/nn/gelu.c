/* GELU, tanh approximation (GPT-2; PyTorch's gelu(approximate="tanh")).
 *
 *   x [n] -> y [n],  y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *
 * Computed through the identity 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)):
 * the same function, but with one exp (vectorized, nn/vec.h) instead of libm's
 * scalar tanh, and without cancellation near u = 0. For large |u| exp saturates and
 * the result goes to 0 (or x), never NaN. The loops (gelu_kernels.h) run on 64-byte
 * vectors where the CPU has AVX-512 (gelu_avx512.c), with the same bits. */
#include "nn/avx512.h"
#include "nn/gelu_kernels.h"
#include "nn/layers.h"

void bp_gelu_forward(bp_real *y, const bp_real *x, size_t n) {
#if BP_NN_AVX512
    if (bp_nn_avx512()) {
        bp_gelu_forward_avx512(y, x, n);
        return;
    }
#endif
    gelu_forward_loop(y, x, n);
}

/* dx may alias dy. */
void bp_gelu_backward(bp_real *dx, const bp_real *x, const bp_real *dy, size_t n) {
#if BP_NN_AVX512
    if (bp_nn_avx512()) {
        bp_gelu_backward_avx512(dx, x, dy, n);
        return;
    }
#endif
    gelu_backward_loop(dx, x, dy, n);
}

/* dx may alias dy. */
void bp_gelu_backward_bias(bp_real *dx, bp_real *db, const bp_real *x, const bp_real *dy,
                           size_t rows, size_t F) {
#if BP_NN_AVX512
    if (bp_nn_avx512()) {
        bp_gelu_backward_bias_avx512(dx, db, x, dy, rows, F);
        return;
    }
#endif
    gelu_backward_bias_loop(dx, db, x, dy, rows, F);
}
