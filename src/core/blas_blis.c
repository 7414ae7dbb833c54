/* BLIS behind core/blas.h (built where cmake/blas.cmake found it). */
#ifdef BP_HAVE_BLIS
/* blis.h, included by its full name (cmake/blas.cmake), is not taken for a system
 * header: its own warnings are not ours. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wtype-limits"
#include BP_BLIS_HEADER
#pragma GCC diagnostic pop

#include "core/blas_impl.h"

/* BLIS takes a row and a column stride for every matrix: row-major is (ld, 1). */
void bp_blas_blis(const bp_gemm_args *g) {
    const bp_gemm_shape *s = &g->s;
    float alpha = g->alpha, beta = g->beta;
    bli_sgemm(s->ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, s->tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
              s->M, s->N, s->K, &alpha, (float *)g->A, s->lda, 1, (float *)g->B, s->ldb, 1, &beta,
              g->C, s->ldc, 1);
}

void bp_blas_blis_threads(int n) { bli_thread_set_num_threads(n); }
#else
typedef int bp_blas_blis_unused; /* an empty file is not C */
#endif
