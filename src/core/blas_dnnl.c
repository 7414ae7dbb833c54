/* oneDNN behind core/blas.h (built where cmake/blas.cmake found it). */
#ifdef BP_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

#include "core/blas_impl.h"

/* Debian's oneDNN runs on OpenMP, whose thread count is per calling thread: set before
 * each product, so that a product on any thread uses the process's count. */
void omp_set_num_threads(int n);

static int dnnl_threads = 1;

/* oneDNN's sgemm is row-major already. It refuses only arguments that no caller of
 * bp_sgemm passes; should it, OpenBLAS computes the product. */
void bp_blas_dnnl(const bp_gemm_args *g) {
    const bp_gemm_shape *s = &g->s;
    omp_set_num_threads(dnnl_threads);
    if (dnnl_sgemm(s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->M, s->N, s->K, g->alpha, g->A, s->lda,
                   g->B, s->ldb, g->beta, g->C, s->ldc) != dnnl_success)
        bp_blas_openblas(g);
}

void bp_blas_dnnl_threads(int n) { dnnl_threads = n; }
#else
typedef int bp_blas_dnnl_unused; /* an empty file is not C */
#endif
