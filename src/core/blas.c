#include "core/blas.h"

#include <stdio.h>

#include "core/blas_impl.h"

/* The process's library (bp_blas_select); OpenBLAS until one is selected. */
static bp_blas_lib selected = BP_BLAS_OPENBLAS;

/* This thread's factors hold bf16 values (bp_blas_bf16_inputs). */
static _Thread_local bool bf16_inputs;

void bp_blas_bf16_inputs(bool on) { bf16_inputs = on; }

static const char *const names[] = {"openblas", "blis", "dnnl", "auto"};

const char *bp_blas_name(bp_blas_lib lib) { return names[lib]; }

bool bp_blas_available(bp_blas_lib lib) {
    switch (lib) {
    case BP_BLAS_BLIS:
#ifdef BP_HAVE_BLIS
        return true;
#else
        return false;
#endif
    case BP_BLAS_DNNL:
#ifdef BP_HAVE_DNNL
        return true;
#else
        return false;
#endif
    default: return true;
    }
}

bp_status bp_blas_select(bp_blas_lib lib, const char *cache_dir, const char *option, bp_err *err) {
    if (!bp_blas_available(lib))
        return bp_fail(err, BP_EUSAGE, "%s: this build has no %s (install its Debian package and "
                       "rebuild)", option, bp_blas_name(lib));
    if (lib == BP_BLAS_AUTO) {
        bp_status rc = bp_blas_auto_open(cache_dir, err);
        if (rc) return rc;
    }
    selected = lib;
    return BP_OK;
}

void bp_blas_describe(char *buf, size_t n) {
    if (selected == BP_BLAS_AUTO)
        bp_blas_auto_describe(buf, n);
    else
        snprintf(buf, n, "%s", bp_blas_name(selected));
}

void bp_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc) {
    bp_gemm_args g = {{trans_a, trans_b, M, N, K, lda, ldb, ldc}, alpha, beta, A, B, C};
    if (bf16_inputs && bp_blas_dnnl_bf16(&g)) return;
    bp_blas_run(selected == BP_BLAS_AUTO ? bp_blas_auto_pick(&g) : selected, &g);
}

void bp_blas_set_threads(int n) { bp_blas_libs_set_threads(n); }
