#include "core/blas.h"

#include <cblas.h>

static enum CBLAS_TRANSPOSE op(bool t) { return t ? CblasTrans : CblasNoTrans; }

void bp_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

void bp_dgemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double *A,
              int lda, const double *B, int ldb, double beta, double *C, int ldc) {
    cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

void bp_blas_set_threads(int n) { openblas_set_num_threads(n); }
