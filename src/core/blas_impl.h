/* Private to core/blas*.c: one product's arguments, the libraries' entry points and
 * the per-shape choice of AUTO. */
#ifndef BP_CORE_BLAS_IMPL_H
#define BP_CORE_BLAS_IMPL_H

#include "core/blas.h"

typedef struct bp_gemm_shape {
    bool ta, tb;
    int M, N, K, lda, ldb, ldc;
} bp_gemm_shape;

typedef struct bp_gemm_args {
    bp_gemm_shape s;
    float alpha, beta;
    const float *A, *B;
    float *C;
} bp_gemm_args;

/* One product with `lib` (never AUTO); a library the build lacks runs OpenBLAS. */
void bp_blas_run(bp_blas_lib lib, const bp_gemm_args *g);
void bp_blas_libs_set_threads(int n);
/* Each library's product and thread count (blas_libs.c, blas_blis.c, blas_dnnl.c). */
void bp_blas_openblas(const bp_gemm_args *g);
void bp_blas_blis(const bp_gemm_args *g);
void bp_blas_blis_threads(int n);
void bp_blas_dnnl(const bp_gemm_args *g);
void bp_blas_dnnl_threads(int n);
/* g on the CPU's bf16 instructions (blas_dnnl.c; bp_blas_bf16_inputs): false, with C
 * untouched, where they or oneDNN are missing or oneDNN refused the product. */
bool bp_blas_dnnl_bf16(const bp_gemm_args *g);

/* AUTO (blas_auto.c): the library for g's shape, measured on copies of g's operands
 * the first time the shape comes. */
bp_blas_lib bp_blas_auto_pick(const bp_gemm_args *g);
/* Forget what was measured and read the machine's file in cache_dir ("": none). */
bp_status bp_blas_auto_open(const char *cache_dir, bp_err *err);
void bp_blas_auto_describe(char *buf, size_t n);

#endif
