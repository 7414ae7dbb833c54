/* The rounding of nn/bf16.h over arrays, on 16-byte vectors: the same integer
 * operations as bp_bf16_round1 on every lane. */
#include "nn/bf16.h"

#include "nn/vec.h"

#ifdef BP_REAL_DOUBLE
void bp_bf16_round(bp_real *x, size_t n) { bp_bf16_round_copy(x, x, n); }

void bp_bf16_round_copy(bp_real *y, const bp_real *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = bp_bf16_round1((float)x[i]);
}
#else
static inline bp_vec round_vec(bp_vec v) {
    bp_uvec u = (bp_uvec)v;
    bp_uvec nan = (u & 0x7fffffffu) > 0x7f800000u; /* all ones where NaN */
    bp_uvec up = u + 0x7fffu + ((u >> 16) & 1u);
    u = (nan & (u | 0x00400000u)) | (~nan & up);
    return (bp_vec)(u & 0xffff0000u);
}

void bp_bf16_round(bp_real *x, size_t n) { bp_bf16_round_copy(x, x, n); }

void bp_bf16_round_copy(bp_real *y, const bp_real *x, size_t n) {
    size_t i = 0;
    for (; i + BP_VLEN <= n; i += BP_VLEN) bp_vstore(y + i, round_vec(bp_vload(x + i)));
    for (; i < n; i++) y[i] = bp_bf16_round1(x[i]);
}
#endif
