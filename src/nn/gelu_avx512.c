/* GELU's loops on 64-byte vectors, for CPUs with AVX-512 (nn/avx512.h). */
#include "nn/avx512.h"

#if BP_NN_AVX512
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#pragma STDC FP_CONTRACT OFF
#else
#pragma GCC target("avx512f")
#endif
#define BP_VBYTES 64
#include "nn/gelu_kernels.h"

void bp_gelu_forward_avx512(float *y, const float *x, size_t n) { gelu_forward_loop(y, x, n); }

void bp_gelu_backward_avx512(float *dx, const float *x, const float *dy, size_t n) {
    gelu_backward_loop(dx, x, dy, n);
}

void bp_gelu_backward_bias_avx512(float *dx, float *db, const float *x, const float *dy,
                                  size_t rows, size_t F) {
    gelu_backward_bias_loop(dx, db, x, dy, rows, F);
}
#ifdef __clang__
#pragma clang attribute pop
#endif
#else
typedef int bp_gelu_avx512_unused; /* an empty file is not C */
#endif
