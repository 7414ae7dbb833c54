/* GELU's loops, included by gelu.c (16-byte vectors) and gelu_avx512.c (64-byte);
 * private to them. See gelu.c for the function. */
#ifndef BP_NN_GELU_KERNELS_H
#define BP_NN_GELU_KERNELS_H

#include "nn/vec.h"

/* gelu_avx512.c's, for gelu.c */
void bp_gelu_forward_avx512(float *y, const float *x, size_t n);
void bp_gelu_backward_avx512(float *dx, const float *x, const float *dy, size_t n);
void bp_gelu_backward_bias_avx512(float *dx, float *db, const float *x, const float *dy,
                                  size_t rows, size_t F);

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

/* gelu_backward_loop row by row, each row's dx added into db as it is stored: the
 * adds of bp_vacc(db, dx row, F) over the rows in order, in the same pass. */
static inline void gelu_backward_bias_loop(bp_real *dx, bp_real *db, const bp_real *x,
                                           const bp_real *dy, size_t rows, size_t F) {
    for (size_t r = 0; r < rows; r++) {
        size_t o = r * F, i = 0;
        for (; i + BP_VLEN <= F; i += BP_VLEN) {
            bp_vec d = gelu_bwd(bp_vload(x + o + i), bp_vload(dy + o + i));
            bp_vstore(dx + o + i, d);
            bp_vstore(db + i, bp_vload(db + i) + d);
        }
        if (i < F) {
            size_t k = F - i;
            bp_vec d = gelu_bwd(bp_vload_part(x + o + i, k), bp_vload_part(dy + o + i, k));
            bp_vstore_part(dx + o + i, d, k);
            bp_vstore_part(db + i, bp_vload_part(db + i, k) + d, k);
        }
    }
}

#endif
