/* The one door to OpenBLAS: every matrix product in bagpipe goes through here.
 *
 * Row-major throughout: C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C, where
 * op(X) is X or its transpose (trans_a / trans_b) and lda/ldb/ldc are row strides
 * of the matrices as stored. The double version exists for gradient checks. */
#ifndef BP_CORE_BLAS_H
#define BP_CORE_BLAS_H

#include <stdbool.h>

void bp_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);
void bp_dgemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double *A,
              int lda, const double *B, int ldb, double beta, double *C, int ldc);

/* Threads OpenBLAS may use in this process (bagpipe uses 1 per rank by default). */
void bp_blas_set_threads(int n);

#endif
