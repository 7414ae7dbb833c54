/* ReLU.
 *
 *   x [n] -> y [n] = max(x, 0)   (y may alias x: the mlp applies it in place)
 *   backward from the output: dx = dy where y > 0, else 0   (dx may alias dy) */
#include "nn/layers.h"

void bp_relu_forward(bp_real *y, const bp_real *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0;
}

void bp_relu_backward(bp_real *dx, const bp_real *y, const bp_real *dy, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0 ? dy[i] : 0;
}
