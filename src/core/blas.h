/* The one door to the matrix libraries: every matrix product in bagpipe goes through
 * here.
 *
 * Row-major throughout: C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C, where
 * op(X) is X or its transpose (trans_a / trans_b) and lda/ldb/ldc are row strides
 * of the matrices as stored. The double version exists for gradient checks and is
 * always OpenBLAS's.
 *
 * Which library computes the float products is a setting of the process, like
 * OpenBLAS's thread count: OpenBLAS unless bp_blas_select names another. BLIS and
 * oneDNN are compiled in when the build found them (bp_blas_available). Each sums
 * in its own order, so results differ between libraries within rounding; with
 * OpenBLAS they are those of every earlier version of bagpipe. */
#ifndef BP_CORE_BLAS_H
#define BP_CORE_BLAS_H

#include <stdbool.h>
#include <stddef.h>

#include "bagpipe/status.h"

void bp_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);
void bp_dgemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double *A,
              int lda, const double *B, int ldb, double beta, double *C, int ldc);

/* bf16 products. bp_blas_bf16_inputs(true) says that the factors of this thread's
 * later bp_sgemm calls hold bf16 values (floats whose low 16 bits are zero) until it
 * is called with false: where bp_blas_bf16_native, they then run on the CPU's bf16
 * instructions (oneDNN's bf16 matmul on AVX512-BF16 or AMX: exact products, fp32
 * sums), whatever library was selected; elsewhere, on the selected library in fp32,
 * which computes the same exact products. Either way only the order of the sums
 * differs. */
void bp_blas_bf16_inputs(bool on);
bool bp_blas_bf16_native(void);

/* Threads the libraries may use in this process (bagpipe uses 1 per rank by default). */
void bp_blas_set_threads(int n);

/* The libraries, in the order of BP_BLAS_CHOICES (option --matmul). AUTO: for each
 * product shape, the library that computed it fastest on this CPU, measured the
 * first time the shape comes (on copies of its operands) and remembered in a file
 * of this machine's measurements (blas_auto.c). */
typedef enum bp_blas_lib { BP_BLAS_OPENBLAS, BP_BLAS_BLIS, BP_BLAS_DNNL, BP_BLAS_AUTO } bp_blas_lib;
#define BP_BLAS_CHOICES "openblas|blis|dnnl|auto"
#define BP_BLAS_LIBS 3 /* the real ones, AUTO excluded */

const char *bp_blas_name(bp_blas_lib lib);
/* Whether this build has the library (AUTO and OpenBLAS: always). */
bool bp_blas_available(bp_blas_lib lib);

/* Every later bp_sgemm of the process computes with `lib`. For AUTO, cache_dir is
 * where the measurements of this machine are kept (a file per CPU and OpenBLAS core
 * type in it; "" keeps none). A library this build lacks is BP_EUSAGE naming
 * `option`. Call it before products run on other threads. */
bp_status bp_blas_select(bp_blas_lib lib, const char *cache_dir, const char *option, bp_err *err);

/* For the run's header: the library chosen, and for AUTO the libraries its products
 * went to so far, e.g. "auto (dnnl 9, openblas 3 shapes)". */
void bp_blas_describe(char *buf, size_t n);

#endif
