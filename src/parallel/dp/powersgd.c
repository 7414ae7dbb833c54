/* powersgd (docs/algorithms.md#powersgd): gradients averaged as rank-r
 * approximations with error feedback, by the rules of PyTorch's PowerSGD hook.
 * After `powersgd.warmup` steps of allreduce, each matrix G (n x m, a tensor's
 * first dimension by the rest) of a bucket worth compressing becomes, with its own
 * error E and Q (seeded alike on every rank, warm-started from the last step):
 *     orthogonalize Q;  M = G + E;  P = avg(M Q);  orthogonalize P;  Q = avg(M^T P);
 *     G^ = P Q^T;  E = M - G^;  G <- G^
 * Worth compressing (the hook's min_compression_rate, 2 by default): with
 * r = min(n, m, rank), (n + m) r * min_rate < n m, i.e. the low-rank factors take
 * at most half the bytes; other matrices and the 1-D tensors (biases, LayerNorm)
 * are averaged in full. (The hook also adds an error to those, the local value
 * minus the average of the last step, whose average over the ranks is zero: it
 * changes nothing but rounding, and we leave it out.) Orthogonalizing Q changes
 * the result only by rounding too (Gram-Schmidt keeps the span of each leading set
 * of columns, so P is orthonormalized to the same basis), but keeps M Q well
 * conditioned when Q's columns grow or align. The full tensors and the P's
 * of a bucket go in one allreduce, its Q's in another.
 * Optimus-CC's selective stage compression runs this algorithm with its own
 * reducer's rules (parallel/occ.c): every matrix compressed, Q reused as it is. */
#include <stdio.h>
#include <stdlib.h>

#include "compress/codec.h"
#include "parallel/dp/algo.h"
#include "parallel/dp/powersgd.h"

/* The settings of powersgd in c (its slot of c->settings). */
static const bp_powersgd_settings *settings_of(const bp_dp_config *c) {
    return bp_powersgd_of(&c->settings);
}

typedef struct powersgd {
    bp_codec **codec; /* per tensor: NULL for those averaged in full */
    float **x;        /* a bucket's tensors, for the batch call */
    size_t *n;
    int n_tensors;
} powersgd;

/* The hook's test, with its rank clamped to the matrix; a row or a column is
 * never compressed. */
static bool worth_compressing(size_t rows, size_t cols, const bp_dp_config *c) {
    size_t r = (size_t)settings_of(c)->rank;
    r = r < rows ? r : rows;
    r = r < cols ? r : cols;
    return rows > 1 && cols > 1 && (double)((rows + cols) * r) * settings_of(c)->min_rate <
                                       (double)rows * (double)cols;
}

static bp_status create(bp_dp *dp, bp_err *err) {
    bp_status rc = bp_dp_state_alloc(dp, sizeof(powersgd), err);
    if (rc) return rc;
    powersgd *s = dp->state;
    int nt = s->n_tensors = bp_model_num_tensors(dp->model);
    s->codec = calloc((size_t)nt, sizeof *s->codec);
    s->x = calloc((size_t)nt, sizeof *s->x);
    s->n = calloc((size_t)nt, sizeof *s->n);
    if (!s->codec || !s->x || !s->n) return bp_fail(err, BP_ENOMEM, "out of memory");
    for (int t = 0; t < nt; t++) {
        const bp_tensor_info *ti = bp_model_tensor(dp->model, t);
        if (ti->ndim < 2) continue;
        size_t rows = (size_t)ti->shape[0], cols = ti->numel / rows;
        if (!worth_compressing(rows, cols, &dp->cfg)) continue;
        /* Every rank seeds tensor t's Q alike, so Q stays the same everywhere. */
        rc = bp_codec_powersgd_create(rows, cols, settings_of(&dp->cfg)->rank,
                                      dp->cfg.seed + (uint64_t)t,
                                      &s->codec[t], err);
        if (rc) return rc;
        bp_codec_set_backend(s->codec[t], dp->be);
    }
    return BP_OK;
}

static void destroy(bp_dp *dp) {
    powersgd *s = dp->state;
    for (int t = 0; s->codec && t < s->n_tensors; t++) bp_codec_destroy(s->codec[t]);
    free(s->codec);
    free(s->x);
    free(s->n);
}

static bp_status bucket(bp_dp *dp, const bp_bucket *b, bp_err *err) {
    if (dp->step < settings_of(&dp->cfg)->warmup) return bp_dp_allreduce_bucket(dp, b, err);
    powersgd *s = dp->state;
    float *grads = bp_model_grads(dp->model);
    for (int i = 0; i < b->n_tensors; i++) {
        const bp_tensor_info *ti = bp_model_tensor(dp->model, b->first_tensor + i);
        s->x[i] = grads + ti->offset;
        s->n[i] = ti->numel;
        bp_codec *c = s->codec[b->first_tensor + i];
        if (c && settings_of(&dp->cfg)->orth_q) {
            bp_status rc = bp_powersgd_orthogonalize_q(c, err);
            if (rc) return rc;
        }
    }
    int rc = bp_allreduce_avg_powersgd_batch(dp->comm, b->n_tensors, s->x, s->n,
                                             s->codec + b->first_tensor);
    return bp_comm_fail(dp->comm, rc, err);
}

/* Each compressed tensor's error and warm-started Q. */
static bp_status state(bp_dp *dp, bp_state_list *l, bp_err *err) {
    powersgd *s = dp->state;
    bp_status rc = BP_OK;
    for (int t = 0; rc == BP_OK && t < s->n_tensors; t++) {
        float *e, *q;
        size_t e_n, q_n;
        if (!s->codec[t] || !bp_powersgd_state(s->codec[t], &e, &e_n, &q, &q_n)) continue;
        rc = bp_state_add(l, e, e_n, err, "powersgd.%d.error", t);
        if (rc == BP_OK) rc = bp_state_add(l, q, q_n, err, "powersgd.%d.q", t);
    }
    return rc;
}

static void describe(const bp_dp_config *c, char *buf, size_t n) {
    snprintf(buf, n, " rank=%d warmup=%lld min_rate=%g%s", settings_of(c)->rank,
             (long long)settings_of(c)->warmup, settings_of(c)->min_rate,
             settings_of(c)->orth_q ? "" : " q_reused");
}

/* One batch of tensors: P = M Q for the matrices worth compressing, one allreduce of
 * the P's and the tensors averaged in full, orthogonalization, Q = M^T P, one
 * allreduce of the Q's, P Q^T and the error feedback. */
static double bucket_cost(const bp_dp_cost_env *e, const bp_dp_cost_bucket *b, double *bytes) {
    size_t Pn = 0, Qn = 0, n = 0;
    double flops = 0, min_rate = settings_of(e->cfg)->min_rate;
    /* Passes per compressed matrix on a device: M += G, P = M Q, Q = M^T P, P Q^T,
     * M -= it (compress/powersgd.c), and Q's orthogonalization first. */
    int passes = 0, per_matrix = settings_of(e->cfg)->orth_q ? 6 : 5;
    for (int i = 0; i < b->n_tensors; i++) {
        const bp_dp_cost_tensor *t = &b->t[i];
        n += t->numel;
        double rows = (double)t->rows, cols = (double)t->cols;
        double want = settings_of(e->cfg)->rank;
        double r = want < rows && want < cols ? want : (rows < cols ? rows : cols);
        if (rows > 1 && cols > 1 && (rows + cols) * r * min_rate < rows * cols) {
            Pn += t->rows * (size_t)r;
            Qn += t->cols * (size_t)r;
            flops += 6.0 * rows * cols * r + 2.0 * (rows + cols) * r * r;
            passes += per_matrix;
        } else {
            Pn += t->numel;
        }
    }
    /* comm/ stages the bucket's tensors to the host and back around the batch
     * (comm/prim.c): on a device, two host copies of the whole bucket. */
    return e->price->matmul_s(e, flops) + e->price->vec_s(e, 2 * n) +
           bp_dp_staging_cost(e, n) + bp_dp_allreduce_cost(e, Pn, bytes) +
           (Qn ? bp_dp_allreduce_cost(e, Qn, bytes) : 0) + e->price->pass_waits_s(e, passes);
}

static int64_t warmup(const bp_dp_config *c) { return settings_of(c)->warmup; }

/* ---- options ------------------------------------------------------------------- */

#define S bp_powersgd_settings
static const bp_option options[] = {
    BP_OPT_NUM(S, "rank", BP_OPT_INT, rank, 1, 1 << 16, "R", "powersgd: rank of the approximation"),
    BP_OPT_NUM(S, "powersgd-warmup", BP_OPT_INT64, warmup, 0, 1e12, "N",
               "powersgd: steps of full-precision allreduce first"),
};
#undef S
/* Rank 4 ends 8% above allreduce's validation loss after 1000 steps of the default
 * gpt; rank 8 within 5% (bench/dp/README.md), still 10x fewer bytes. min_rate 2 is
 * PyTorch's default min_compression_rate. */
static const bp_powersgd_settings defaults = {
    .rank = 8, .warmup = 0, .min_rate = 2, .orth_q = true};
static const bp_option_group option_group = BP_OPTION_GROUP(options, defaults);

static const bp_dp_variant variants[] = {{.args = ""}, {0}};
static const bp_dp_efficiency efficiency[] = {
    {"gpt", 0, 1.299, BP_DP_STUDY_GPT "946.4 (rank 8; other ranks taken alike)"},
    {"mlp", 0, 1.009, BP_DP_STUDY_MLP "699.7"},
    {0}};

const bp_dp_algo_ops bp_dp_powersgd = {
    .kind = BP_DP_GRADIENT,
    .options = &option_group,
    .create = create,
    .destroy = destroy,
    .bucket = bucket,
    .state = state,
    .describe = describe,
    .cost = {.bucket = bucket_cost, .warmup = warmup, .state = 1}, /* the errors */
    .plan = {.variants = variants, .efficiency = efficiency},
};
