#include "plan/sim_kernels.h"

#include <float.h>
#include <string.h>

#include "bagpipe/compress.h"
#include "core/buf.h"
#include "core/finite.h"
#include "core/timer.h"

enum { RUNS = 5, VEC = 1 << 20, PSGD_ROWS = 512, PSGD_RANK = 4 };

/* The least of RUNS timings of f(ctx) after one that warms the caches. */
static double best_of(void (*f)(void *), void *ctx) {
    double best = DBL_MAX;
    for (int i = 0; i <= RUNS; i++) {
        double t0 = bp_now();
        f(ctx);
        double dt = bp_now() - t0;
        if (i > 0 && dt < best) best = dt;
    }
    return best > 0 ? best : 1e-9;
}

typedef struct kernels {
    float *x, *y;
    unsigned char *wire;
    bp_codec *mm, *psgd;
    bp_optim o;
    size_t n;
} kernels;

static void k_optim(void *a) {
    kernels *k = a;
    memset(k->y, 0, k->n * sizeof(float));
    (void)bp_all_finite(k->y, k->n);
    (void)bp_grad_sumsq(k->y, k->n);
    bp_optim_step(&k->o, k->x, k->y, 1e-3);
}
static void k_encode(void *a) {
    kernels *k = a;
    bp_err e;
    (void)bp_codec_encode(k->mm, k->x, k->n, k->wire, &e);
}
static void k_decode(void *a) {
    kernels *k = a;
    bp_err e;
    (void)bp_codec_decode(k->mm, k->wire, k->n, k->y, &e);
}
static void k_psgd(void *a) {
    kernels *k = a;
    bp_err e;
    size_t n = (size_t)PSGD_ROWS * PSGD_ROWS;
    if (bp_codec_encode(k->psgd, k->x, n, k->wire, &e) == BP_OK)
        (void)bp_codec_decode(k->psgd, k->wire, n, k->y, &e);
}
static void k_add(void *a) {
    kernels *k = a;
    for (size_t i = 0; i < k->n; i++) k->y[i] += k->x[i];
}
static void k_copy(void *a) {
    kernels *k = a;
    memcpy(k->y, k->x, k->n * sizeof(float));
}

bp_status bp_sim_time_kernels(const bp_optim_config *oc, bp_sim_profile *p, bp_err *err) {
    kernels k = {.n = VEC};
    k.x = bp_alloc(VEC * sizeof(float));
    k.y = bp_alloc(VEC * sizeof(float));
    k.wire = bp_alloc(VEC * sizeof(float));
    bp_status rc = k.x && k.y && k.wire ? BP_OK : bp_fail(err, BP_ENOMEM, "out of memory");
    for (size_t i = 0; rc == BP_OK && i < VEC; i++) k.x[i] = (float)(i % 251) * 0.01f - 1.0f;
    if (rc == BP_OK) rc = bp_codec_minmax_u8_create(&k.mm, err);
    if (rc == BP_OK) rc = bp_codec_powersgd_create(PSGD_ROWS, PSGD_ROWS, PSGD_RANK, 1, &k.psgd, err);
    bool optim = rc == BP_OK && bp_optim_init(&k.o, oc, VEC, err) == BP_OK;
    if (rc == BP_OK && !optim) rc = BP_ENOMEM;
    if (rc == BP_OK) {
        double bytes = VEC * sizeof(float), rows = PSGD_ROWS;
        p->optim_s = best_of(k_optim, &k) / VEC;
        p->mm_enc_Bps = bytes / best_of(k_encode, &k);
        p->mm_dec_Bps = bytes / best_of(k_decode, &k);
        p->psgd_flops = 8.0 * rows * rows * PSGD_RANK / best_of(k_psgd, &k);
        p->vec_Bps = bytes / best_of(k_add, &k);
        p->copy_Bps = bytes / best_of(k_copy, &k);
    }
    if (optim) bp_optim_free(&k.o);
    bp_codec_destroy(k.mm);
    bp_codec_destroy(k.psgd);
    bp_free(k.x), bp_free(k.y), bp_free(k.wire);
    return rc;
}

