/* oneDNN behind core/blas.h (built where cmake/blas.cmake found it): its sgemm, and
 * products on bf16 inputs with the CPU's bf16 instructions (bp_blas_dnnl_bf16). */
#ifdef BP_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- bf16 products: oneDNN's matmul on bf16 copies of the operands, fp32 output,
 * where oneDNN runs AVX512-BF16 or AMX kernels on this CPU.
 *
 * The factors arrive as floats holding bf16 values, copied exactly into bf16 arrays,
 * so every product of two factors is exact and only the order of the fp32 sums
 * differs from an fp32 product of the same floats. */

/* One engine and stream per thread, a few primitives by shape, and the bf16 copies of
 * the last operands: a training step repeats a handful of shapes. They are freed when
 * the thread exits (a key's destructor) or, on the thread that calls exit, at exit. */
enum { CACHED = 32 };
typedef struct bf16_prim {
    bp_gemm_shape s;
    float alpha, beta;
    dnnl_primitive_t p;
    dnnl_memory_desc_t a, b, c;
} bf16_prim;

static _Thread_local struct {
    bool ready, failed;
    dnnl_engine_t eng;
    dnnl_stream_t st;
    bf16_prim prim[CACHED];
    int n, next;
    uint16_t *buf;
    size_t cap;
} ctx;

static pthread_key_t ctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;
static bool ctx_key_made;

/* This thread's context, back to nothing (unused: the key's value, a marker). */
static void release(void *unused) {
    (void)unused;
    for (int i = 0; i < ctx.n; i++) dnnl_primitive_destroy(ctx.prim[i].p);
    if (ctx.st) dnnl_stream_destroy(ctx.st);
    if (ctx.eng) dnnl_engine_destroy(ctx.eng);
    free(ctx.buf);
    memset(&ctx, 0, sizeof ctx);
}

static void release_at_exit(void) { release(NULL); }

static void make_key(void) {
    ctx_key_made = pthread_key_create(&ctx_key, release) == 0 && atexit(release_at_exit) == 0;
}

static int native = -1; /* -1: not asked yet */

bool bp_blas_bf16_native(void) {
    if (native < 0) {
        dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
        native = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16 ||
                 (isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx;
    }
    return native;
}

/* rows x cols of x (row stride ld) into out, densely: the high half of each float,
 * which is the float when it holds a bf16 value (core/blas.h's contract); 8 at a time
 * on vectors. */
typedef uint32_t u32x8 __attribute__((vector_size(32)));
typedef uint16_t u16x8 __attribute__((vector_size(16)));

static void pack(uint16_t *out, const float *x, int rows, int cols, int ld) {
    for (int r = 0; r < rows; r++) {
        const float *in = x + (size_t)r * ld;
        uint16_t *o = out + (size_t)r * cols;
        int c = 0;
        for (; c + 8 <= cols; c += 8) {
            u32x8 u;
            memcpy(&u, in + c, sizeof u);
            u16x8 h = __builtin_convertvector(u >> 16, u16x8);
            memcpy(o + c, &h, sizeof h);
        }
        for (; c < cols; c++) {
            uint32_t u;
            memcpy(&u, in + c, sizeof u);
            o[c] = (uint16_t)(u >> 16);
        }
    }
}

/* A dense op(X) [R, C] stored as rows x cols = R x C, or C x R when transposed. */
static dnnl_status_t desc(dnnl_memory_desc_t *d, int R, int C, bool t, dnnl_data_type_t dt,
                          int ld) {
    dnnl_dims_t dims = {R, C}, strides = {t ? 1 : ld, t ? ld : 1};
    return dnnl_memory_desc_init_by_strides(d, 2, dims, dt, strides);
}

static bool same(const bf16_prim *p, const bp_gemm_args *g) {
    return !memcmp(&p->s, &g->s, sizeof p->s) && p->alpha == g->alpha && p->beta == g->beta;
}

static dnnl_status_t make(bf16_prim *p, const bp_gemm_args *g) {
    const bp_gemm_shape *s = &g->s;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_matmul_desc_t md;
    *p = (bf16_prim){.s = *s, .alpha = g->alpha, .beta = g->beta};
    /* The packed copies are dense: A's row stride its stored width, B's likewise. */
    dnnl_status_t rc = desc(&p->a, s->M, s->K, s->ta, dnnl_bf16, s->ta ? s->M : s->K);
    if (!rc) rc = desc(&p->b, s->K, s->N, s->tb, dnnl_bf16, s->tb ? s->K : s->N);
    if (!rc) rc = desc(&p->c, s->M, s->N, false, dnnl_f32, s->ldc);
    if (!rc) rc = dnnl_matmul_desc_init(&md, &p->a, &p->b, NULL, &p->c);
    if (!rc) rc = dnnl_primitive_attr_create(&attr);
    if (!rc && g->alpha != 1) rc = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &g->alpha);
    if (!rc && g->beta != 0) rc = dnnl_post_ops_create(&po);
    if (!rc && po) rc = dnnl_post_ops_append_sum(po, g->beta);
    if (!rc && po) rc = dnnl_primitive_attr_set_post_ops(attr, po);
    if (!rc) rc = dnnl_primitive_desc_create(&pd, &md, attr, ctx.eng, NULL);
    if (!rc) rc = dnnl_primitive_create(&p->p, pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return rc;
}

static bf16_prim *lookup(const bp_gemm_args *g) {
    for (int i = 0; i < ctx.n; i++)
        if (same(&ctx.prim[i], g)) return &ctx.prim[i];
    bf16_prim *p = &ctx.prim[ctx.next];
    if (ctx.n == CACHED) dnnl_primitive_destroy(p->p);
    else ctx.n++;
    ctx.next = (ctx.next + 1) % CACHED;
    if (make(p, g) == dnnl_success) return p;
    /* the slot is empty again: move the last one into it */
    *p = ctx.prim[--ctx.n];
    ctx.next = ctx.n;
    return NULL;
}

/* Without the key nothing would free the context: such a thread keeps to fp32. */
static bool ready(void) {
    if (!ctx.ready && !ctx.failed) {
        pthread_once(&ctx_once, make_key);
        ctx.failed = !ctx_key_made || pthread_setspecific(ctx_key, &ctx) != 0 ||
                     dnnl_engine_create(&ctx.eng, dnnl_cpu, 0) ||
                     dnnl_stream_create(&ctx.st, ctx.eng, dnnl_stream_default_flags);
        ctx.ready = !ctx.failed;
    }
    return ctx.ready;
}

static uint16_t *room(size_t n) {
    if (n > ctx.cap) {
        uint16_t *b = realloc(ctx.buf, n * sizeof *b);
        if (!b) return NULL;
        ctx.buf = b;
        ctx.cap = n;
    }
    return ctx.buf;
}

bool bp_blas_dnnl_bf16(const bp_gemm_args *g) {
    const bp_gemm_shape *s = &g->s;
    size_t na = (size_t)s->M * s->K, nb = (size_t)s->K * s->N;
    if (!bp_blas_bf16_native() || !ready() || s->M < 1 || s->N < 1 || s->K < 1) return false;
    bf16_prim *p = lookup(g);
    uint16_t *buf = p ? room(na + nb) : NULL;
    if (!buf) return false;
    pack(buf, g->A, s->ta ? s->K : s->M, s->ta ? s->M : s->K, s->lda);
    pack(buf + na, g->B, s->tb ? s->N : s->K, s->tb ? s->K : s->N, s->ldb);
    dnnl_memory_t m[3] = {NULL, NULL, NULL};
    dnnl_status_t rc = dnnl_memory_create(&m[0], &p->a, ctx.eng, buf);
    if (!rc) rc = dnnl_memory_create(&m[1], &p->b, ctx.eng, buf + na);
    if (!rc) rc = dnnl_memory_create(&m[2], &p->c, ctx.eng, g->C);
    if (!rc) {
        dnnl_exec_arg_t args[3] = {
            {DNNL_ARG_SRC, m[0]}, {DNNL_ARG_WEIGHTS, m[1]}, {DNNL_ARG_DST, m[2]}};
        omp_set_num_threads(dnnl_threads);
        rc = dnnl_primitive_execute(p->p, ctx.st, 3, args);
        if (!rc) rc = dnnl_stream_wait(ctx.st);
    }
    for (int i = 0; i < 3; i++)
        if (m[i]) dnnl_memory_destroy(m[i]);
    return rc == dnnl_success;
}
#else
#include "core/blas_impl.h"

bool bp_blas_bf16_native(void) { return false; }
bool bp_blas_dnnl_bf16(const bp_gemm_args *g) { return (void)g, false; }
#endif
