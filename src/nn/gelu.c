/* GELU, tanh approximation (GPT-2; PyTorch's gelu(approximate="tanh")).
 *
 *   x [n] -> y [n],  y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *
 * Computed through the identity 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)):
 * the same function, but exp is about ten times cheaper than tanh in libm, and the
 * form has no cancellation near u = 0. For large |u| exp overflows to inf and the
 * result correctly goes to 0 (or x), never NaN. */
#include "nn/layers.h"

#define GELU_K ((bp_real)0.7978845608028654) /* sqrt(2 / pi) */
#define GELU_A ((bp_real)0.044715)

void bp_gelu_forward(bp_real *y, const bp_real *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        bp_real xi = x[i];
        bp_real u = GELU_K * (xi + GELU_A * xi * xi * xi);
        y[i] = xi / (1 + bp_rexp(-2 * u));
    }
}

/*   dx = dy * (s + x s (1 - s) 2 u'),  s = sigmoid(2u),  u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 * dx may alias dy. */
void bp_gelu_backward(bp_real *dx, const bp_real *x, const bp_real *dy, size_t n) {
    for (size_t i = 0; i < n; i++) {
        bp_real xi = x[i];
        bp_real u = GELU_K * (xi + GELU_A * xi * xi * xi);
        bp_real du = GELU_K * (1 + 3 * GELU_A * xi * xi);
        bp_real s = 1 / (1 + bp_rexp(-2 * u));
        dx[i] = dy[i] * (s + xi * s * (1 - s) * 2 * du);
    }
}
