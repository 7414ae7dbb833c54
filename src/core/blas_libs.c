/* OpenBLAS behind core/blas.h, and the choice among the libraries the build found
 * (cmake/blas.cmake defines BP_HAVE_BLIS, BP_HAVE_DNNL; their own files:
 * blas_blis.c, blas_dnnl.c, each with its own headers, which clash with OpenBLAS's). */
#include <cblas.h>

#include "core/blas_impl.h"

static enum CBLAS_TRANSPOSE op(bool t) { return t ? CblasTrans : CblasNoTrans; }

void bp_blas_openblas(const bp_gemm_args *g) {
    const bp_gemm_shape *s = &g->s;
    cblas_sgemm(CblasRowMajor, op(s->ta), op(s->tb), s->M, s->N, s->K, g->alpha, g->A, s->lda,
                g->B, s->ldb, g->beta, g->C, s->ldc);
}

void bp_blas_run(bp_blas_lib lib, const bp_gemm_args *g) {
    switch (lib) {
#ifdef BP_HAVE_BLIS
    case BP_BLAS_BLIS: bp_blas_blis(g); return;
#endif
#ifdef BP_HAVE_DNNL
    case BP_BLAS_DNNL: bp_blas_dnnl(g); return;
#endif
    default: bp_blas_openblas(g); return;
    }
}

void bp_blas_libs_set_threads(int n) {
    openblas_set_num_threads(n);
#ifdef BP_HAVE_BLIS
    bp_blas_blis_threads(n);
#endif
#ifdef BP_HAVE_DNNL
    bp_blas_dnnl_threads(n);
#endif
}

void bp_dgemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double *A,
              int lda, const double *B, int ldb, double beta, double *C, int ldc) {
    cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}
