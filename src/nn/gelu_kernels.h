/* GELU's loops, included by gelu.c (16-byte vectors) and gelu_avx512.c (64-byte);
 * private to them. See gelu.c for the function. */
#ifndef BP_NN_GELU_KERNELS_H
#define BP_NN_GELU_KERNELS_H

#include "nn/vec.h"

/* gelu_avx512.c's, for gelu.c */
void bp_gelu_forward_avx512(float *y, const float *x, size_t n);
void bp_gelu_backward_avx512(float *dx, const float *x, const float *dy, size_t n);

#define GELU_K ((bp_real)0.7978845608028654) /* sqrt(2 / pi) */
#define GELU_A ((bp_real)0.044715)

/* sigmoid(2u) for one vector of x */
static inline bp_vec gelu_gate(bp_vec x) {
    bp_vec u = GELU_K * (x + GELU_A * x * x * x);
    return 1 / (1 + bp_vexp(-2 * u));
}

static inline bp_vec gelu_fwd(bp_vec x) { return x * gelu_gate(x); }

/*   dy/dx = s + x s (1 - s) 2 u',  s = sigmoid(2u),  u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2) */
static inline bp_vec gelu_bwd(bp_vec x, bp_vec dy) {
    bp_vec s = gelu_gate(x);
    bp_vec du = GELU_K * (1 + 3 * GELU_A * x * x);
    return dy * (s + x * s * (1 - s) * 2 * du);
}

static inline void gelu_forward_loop(bp_real *y, const bp_real *x, size_t n) {
    size_t i = 0;
    for (; i + BP_VLEN <= n; i += BP_VLEN) bp_vstore(y + i, gelu_fwd(bp_vload(x + i)));
    if (i < n) bp_vstore_part(y + i, gelu_fwd(bp_vload_part(x + i, n - i)), n - i);
}

static inline void gelu_backward_loop(bp_real *dx, const bp_real *x, const bp_real *dy, size_t n) {
    size_t i = 0;
    for (; i + BP_VLEN <= n; i += BP_VLEN)
        bp_vstore(dx + i, gelu_bwd(bp_vload(x + i), bp_vload(dy + i)));
    if (i < n)
        bp_vstore_part(dx + i, gelu_bwd(bp_vload_part(x + i, n - i), bp_vload_part(dy + i, n - i)),
                       n - i);
}

#endif
