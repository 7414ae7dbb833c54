/* ReLU.
 *
 *   x [n] -> y [n] = max(x, 0)   (y may alias x: the mlp applies it in place)
 *   backward from the output: dx = dy where y > 0, else 0   (dx may alias dy)
 *
 * Vector selects (nn/vec.h) rather than a scalar conditional, which compiles to a
 * branch that mispredicts on half the elements. */
#include "nn/layers.h"
#include "nn/vec.h"

static inline bp_vec relu_mask(bp_vec y, bp_vec v) {
    return bp_vselect(y > bp_vsplat(0), v, bp_vsplat(0));
}

void bp_relu_forward(bp_real *y, const bp_real *x, size_t n) {
    size_t i = 0;
    for (; i + BP_VLEN <= n; i += BP_VLEN) {
        bp_vec v = bp_vload(x + i);
        bp_vstore(y + i, relu_mask(v, v));
    }
    for (; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0;
}

void bp_relu_backward(bp_real *dx, const bp_real *y, const bp_real *dy, size_t n) {
    size_t i = 0;
    for (; i + BP_VLEN <= n; i += BP_VLEN)
        bp_vstore(dx + i, relu_mask(bp_vload(y + i), bp_vload(dy + i)));
    for (; i < n; i++) dx[i] = y[i] > 0 ? dy[i] : 0;
}
