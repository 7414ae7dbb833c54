/* The data-parallel engine (parallel/dp.h) against plain references of each
 * algorithm's rule (docs/algorithms.md#data-parallel-algorithms), on 2, 3 and 4 ranks.
 *
 * Every case trains a tiny model two ways on every rank, step by step, from the
 * same seeds and on the same batches:
 *   - the engine, driven exactly as the trainer drives it (train/trainer.c:
 *     step_begin, forward/backward per micro-batch with backward_begin before the
 *     last backward, backward_end, clip, step), on a group wrapped around
 *     MPI_COMM_WORLD;
 *   - a reference written here: no buckets, no threads, no comm/ calls, only raw
 *     MPI calls on a duplicate of MPI_COMM_WORLD and the rule spelled out;
 * and compares the weights on every rank after every step. Each rank initializes
 * its weights from its own seed, so the common start must come from rank 0's
 * broadcast, as the rule says.
 *
 * Tolerances. The local forward/backward and the optimizer are the same code on
 * both sides and deterministic, so what can differ is the communication:
 *   - Exact (bit for bit) wherever the reference can do the same float operations
 *     in the same order: every average of 2 ranks (a + b is the same sum in either
 *     order, and times 1/2 equals divided by 2), C_LP_S on any number of ranks
 *     (the owner adds the decoded chunks in rank order, then multiplies by 1/p:
 *     the reference does the same), peer averaging with shift_one ((a + b) / 2 is
 *     the same on both ranks), D_LP_S (the formula of z as docs/algorithms.md writes it),
 *     and any comparison of the engine with itself that changes only timing.
 *   - TOL_SUM when an average of 3 or 4 ranks is taken by MPI_Allreduce in the
 *     reference and by the engine's ring: the ring adds an element's p values in an
 *     order that starts at the owner of its chunk, MPI in its own order, so the
 *     averages differ by an ulp or two, and 20 Adam steps carry that along.
 *     Measured: at most 8e-7 after 20 steps (weights are O(0.02..1)); TOL_SUM
 *     allows 4e-6 + 4e-6 |w|, 0.4% of one Adam step (lr 1e-3), while a wrong rule
 *     (a sign, a missing average, a round too early) moves weights by about a step.
 *   - TOL_ACCUM, the same, for gradient accumulation against a doubled batch: the
 *     mean over 2B rows is summed in another order than the mean of two means over
 *     B rows (measured: at most 9e-7).
 * AdamW's update hardly changes when every gradient is scaled alike (and clipping
 * then hides the scale entirely), so the cases where a wrong scale could hide
 * (allreduce against MPI's on 3 and 4 ranks, hierarchical) also run with SGD: the
 * mlp, and the gpt with SGD for hierarchical.
 * Each comparison was checked to fail when the rule is broken on either side (in
 * the reference: a sign flipped, an average, requantization or clipping left out,
 * the shift_one peer a round late, an interval off by one, a frozen term not
 * frozen; in the engine: a bucket started one block early, qadam warm one step
 * too long, a node average scaled 0.2% off).
 *
 * Where the reference uses the library: the MinMaxUInt8 codec's encode and decode
 * for each chunk (the codec is tested bit for bit against its formula in
 * tests/compress), the PowerSGD codec's local matrix steps (project, reproject,
 * finish; tested in tests/compress), the model's forward/backward (tests/nn), the
 * optimizer (tests/train) and the data task (tests/data). The distributed part of
 * each rule (what is averaged, when, with whom, chunking, scaling) is written here.
 *
 * Every comparison is collective (all ranks agree through MPI_COMM_WORLD before
 * asserting), so a failure on one rank fails the test on all instead of leaving
 * the others in a collective; the engine's watchdog and an alarm end the job if
 * something hangs anyway. Set BP_DP_VERBOSE=1 to print the largest difference
 * seen in each case. Arguments: an optional cmocka test-name filter. */
#include <math.h>
#include <mpi.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "bagpipe/comm.h"
#include "bagpipe/comm_mpi.h"
#include "bagpipe/compress.h"
#include "nn/lr.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "parallel/dp.h"
#include "parallel/dp/async.h"
#include "parallel/dp/decentralized.h"
#include "parallel/dp/diloco.h"
#include "parallel/dp/easgd.h"
#include "parallel/dp/powersgd.h"
#include "parallel/dp/qadam.h"
#include "train/config.h"
#include "train/task.h"

#define STEPS 20
#define TEXT "/usr/share/common-licenses/GPL-3"

static int me, np, verbose;
static MPI_Comm ref_comm; /* the reference's own communicator */
static bp_err err;

typedef struct tol {
    double abs, rel; /* both 0: bit for bit */
} tol;
static const tol EXACT = {0, 0};
static const tol TOL_SUM = {4e-6, 4e-6};
static const tol TOL_ACCUM = {4e-6, 4e-6};

static void ok(int rc, const char *what) {
    if (rc != BP_OK) fail_msg("rank %d: %s: %s", me, what, err.msg);
}

static int all_ranks(int local) {
    int all = 0;
    MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

static double max_over_ranks(double x) {
    double y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return y;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --- comparisons ------------------------------------------------------------------ */

static double worst; /* largest difference of the current case, for BP_DP_VERBOSE */

/* a (engine) and b (reference) agree within t on every rank. */
static void expect_close(const char *what, int64_t step, const float *a, const float *b, size_t n,
                         tol t) {
    int good = 1;
    double diff = 0;
    if (t.abs == 0 && t.rel == 0) good = memcmp(a, b, n * sizeof *a) == 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= t.abs + t.rel * fabs((double)b[i]))) good = 0; /* NaN fails too */
        if (!(d <= diff)) diff = d;
    }
    int all = all_ranks(good);
    diff = max_over_ranks(diff);
    if (diff > worst) worst = diff;
    if (!all && me == 0)
        fprintf(stderr, "%s: step %lld: max |difference| %.3g over the ranks (allowed: %s)\n", what,
                (long long)step, diff, t.abs == 0 && t.rel == 0 ? "none" : "tolerance");
    assert_true(all);
}

static uint64_t hash_of(const void *p, size_t bytes) {
    const unsigned char *c = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* The same bytes on every rank. */
static int same_everywhere(const void *p, size_t bytes) {
    uint64_t h = hash_of(p, bytes), lo, hi;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

/* Root mean square distance of the ranks' x from their mean. */
static double spread(const float *x, size_t n) {
    double *mean = calloc(n, sizeof *mean), ss = 0, total = 0;
    assert_non_null(mean);
    for (size_t i = 0; i < n; i++) mean[i] = x[i];
    MPI_Allreduce(MPI_IN_PLACE, mean, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - mean[i] / np;
        ss += d * d;
    }
    MPI_Allreduce(&ss, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    free(mean);
    return sqrt(total / ((double)n * np));
}

static void case_begin(void) { worst = 0; }

static void case_end(const char *name) {
    if (verbose && me == 0)
        printf("[%d ranks] %-40s max |engine - reference| %.3g\n", np, name, worst);
}

/* --- configurations ------------------------------------------------------------------ */

/* A tiny gpt (7664 parameters) on a short text, 4 rows of 16 tokens per rank,
 * AdamW at 1e-3, and clipping, which the trainer applies to the synchronized
 * gradient (its norm here is about 1.3). */
static bp_train_config gpt_config(void) {
    bp_train_config c;
    bp_train_config_defaults(&c);
    c.model = BP_MODEL_GPT;
    snprintf(c.data.spec, sizeof c.data.spec, "%s", TEXT);
    c.shape.layers = 1, c.shape.embd = 16, c.shape.heads = 2, c.shape.seq_len = 16;
    c.batch = 4 * np;
    c.steps = STEPS;
    c.clip = 1.0;
    c.eval_every = 0;
    c.progress = BP_PROGRESS_NONE;
    ok(bp_train_config_finalize(&c, &err), "gpt configuration");
    return c;
}

/* A small mlp (784-32-32-10) on Fashion-MNIST, 8 images per rank, SGD with
 * momentum and a cosine schedule (the mlp defaults). */
static bp_train_config mlp_config(void) {
    bp_train_config c;
    bp_train_config_defaults(&c);
    c.model = BP_MODEL_MLP;
    c.shape.hidden = 32;
    c.batch = 8 * np;
    c.steps = STEPS;
    c.eval_every = 0;
    c.progress = BP_PROGRESS_NONE;
    ok(bp_train_config_finalize(&c, &err), "mlp configuration");
    return c;
}

/* --- one replica: model, optimizer, data --------------------------------------------- */

typedef struct replica {
    bp_train_config cfg;
    bp_task task;
    bp_model *m;
    bp_acts *a;
    bp_optim o;
    bp_lr_schedule lr;
    int64_t step; /* steps taken */
    size_t n;
} replica;

static void replica_init(replica *r, const bp_train_config *c) {
    memset(r, 0, sizeof *r);
    r->cfg = *c;
    bp_model_config mc;
    bp_optim_config oc;
    bp_train_model_config(c, &mc);
    bp_train_optim_config(c, &oc);
    bp_train_lr_schedule(c, &r->lr);
    ok(bp_task_init(&r->task, c, me, np, &err), "task");
    ok(bp_model_create(&mc, 0, -1, &r->m, &err), "model");
    /* Each rank starts elsewhere: the common start must come from rank 0. */
    bp_model_init_weights(r->m, (uint64_t)c->seed + (uint64_t)me);
    r->n = bp_model_num_params(r->m);
    ok(bp_optim_init(&r->o, &oc, r->n, &err), "optimizer");
    ok(bp_acts_create(r->m, r->task.B_local, r->task.T, &r->a, &err), "activations");
}

static void replica_free(replica *r) {
    bp_acts_destroy(r->a);
    bp_model_destroy(r->m);
    bp_optim_free(&r->o);
    bp_task_free(&r->task);
}

static float *weights(replica *r) { return bp_model_params(r->m); }
static float *grads(replica *r) { return bp_model_grads(r->m); }

/* Forward and backward of micro-batch k of `accum` on this rank's rows; with an
 * engine, its backward hook is armed before the last backward, as the trainer does. */
static void micro_batch(replica *r, bp_dp *dp, int k, int accum) {
    bp_batch b;
    double loss;
    bp_task_next(&r->task, k, &b);
    ok(bp_model_forward(r->m, r->a, &b, NULL, &loss, &err), "forward");
    if (dp && k == accum - 1) bp_dp_backward_begin(dp);
    ok(bp_model_backward(r->m, r->a, &b, NULL, NULL, (bp_real)(1.0 / accum), &err), "backward");
}

/* --- the engine, as the trainer drives it ------------------------------------------- */

typedef struct engine {
    replica r;
    bp_comm *g;
    bp_dp *dp;
} engine;

static void engine_init(engine *e, const bp_train_config *c) {
    replica_init(&e->r, c);
    ok(bp_comm_wrap(MPI_COMM_WORLD, "dp", &e->g, &err), "bp_comm_wrap");
    bp_comm_set_timeout(e->g, 60); /* a stuck collective ends the job with a line */
    bp_dp_config d;
    bp_train_dp_config(c, &d);
    ok(bp_dp_create(e->g, &d, &e->r.m, &e->r.o, 1, 0, &e->dp, &err), "bp_dp_create");
}

/* One step as the trainer takes it. With `snapshot`, the weights are copied right
 * after bp_dp_step_begin, where async's averaging thread cannot change them. */
static void engine_step_snapshot(engine *e, float *snapshot) {
    replica *r = &e->r;
    int accum = r->cfg.grad_accum;
    bp_model_zero_grad(r->m);
    bp_dp_step_begin(e->dp, bp_lr_at(&r->lr, r->step));
    if (snapshot) memcpy(snapshot, weights(r), r->n * sizeof *snapshot);
    for (int k = 0; k < accum; k++) micro_batch(r, e->dp, k, accum);
    ok(bp_dp_backward_end(e->dp, &err), "bp_dp_backward_end");
    bp_clip_grad_norm(grads(r), r->n, r->cfg.clip);
    ok(bp_dp_update(e->dp, &err), "bp_dp_update");
    ok(bp_dp_average(e->dp, &err), "bp_dp_average");
    r->step++;
}

static void engine_step(engine *e) { engine_step_snapshot(e, NULL); }

static void engine_free(engine *e) {
    ok(bp_dp_finish(e->dp, &err), "bp_dp_finish");
    bp_dp_destroy(e->dp);
    bp_comm_destroy(e->g);
    replica_free(&e->r);
}

/* --- the reference: each rule in plain MPI ---------------------------------------- */

typedef struct reference {
    replica r;
    bp_dp_config d;
    bp_codec *minmax;              /* bytegrad, qadam, lp-decentralized */
    bp_codec **psgd;               /* powersgd: per 2-D tensor */
    float **qprev;                 /* powersgd: each tensor's last averaged Q */
    float *center, *diff;          /* easgd */
    float *w, *left, *right, *tmp; /* lp-decentralized: own and neighbours' replicas */
    uint64_t rounds;               /* decentralized: weight averagings so far */
    float *avg;                    /* decentralized in Bagua's order: avg_peers(x_t) */
    float *global, *outer_m, *ef;  /* diloco: global weights, outer momentum, error feedback */
    float *ef_rs;                  /* diloco by reduce-scatter: the owner's error feedback */
    float *pseudo;                 /* diloco: the averaged pseudo-gradients */
    bp_codec *outer;               /* diloco's codec (NULL: float32) */
} reference;

static float *floats(size_t n) {
    float *x = calloc(n ? n : 1, sizeof *x);
    assert_non_null(x);
    return x;
}

/* Part i of n split into `parts` (comm.h: the first n % parts parts one longer). */
static void chunk(size_t n, int parts, int i, size_t *off, size_t *len) {
    size_t base = n / (size_t)parts, extra = n % (size_t)parts, k = (size_t)i;
    *len = base + (k < extra);
    *off = k * base + (k < extra ? k : extra);
}

static int left_of(int r) { return (r - 1 + np) % np; }
static int right_of(int r) { return (r + 1) % np; }

/* C_FP_S: x = average over the ranks. MPI's sum times 1/p: comm.h's averages
 * multiply by 1/p (the same as dividing for p = 2 and 4). */
static void ref_avg(float *x, size_t n) {
    MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, ref_comm);
    const float inv = 1.0f / (float)np;
    for (size_t i = 0; i < n; i++) x[i] *= inv;
}

/* C_LP_S, docs/algorithms.md#primitives: split x into p chunks, compress each, all-to-all;
 * rank r decompresses the p versions of chunk r, averages them (in rank order,
 * times 1/p), compresses the average again; allgather; everyone decompresses every
 * chunk, its own included. Encode and decode are the library's MinMaxUInt8. */
static void ref_avg_lp(reference *f, float *x, size_t n) {
    enum { MAX_RANKS = 8 };
    assert_true(np <= MAX_RANKS);
    int p = np, scount[MAX_RANKS], sdispl[MAX_RANKS], rcount[MAX_RANKS], rdispl[MAX_RANKS];
    size_t off[MAX_RANKS], len[MAX_RANKS], total = 0;
    for (int j = 0; j < p; j++) {
        chunk(n, p, j, &off[j], &len[j]);
        scount[j] = (int)bp_codec_encoded_size(f->minmax, len[j]);
        sdispl[j] = (int)total;
        total += (size_t)scount[j];
    }
    for (int j = 0; j < p; j++) rcount[j] = scount[me], rdispl[j] = j * scount[me];
    unsigned char *send = malloc(total), *recv = malloc((size_t)(p * scount[me]) + 1);
    float *dec = floats(len[me]), *mine = x + off[me];
    assert_non_null(send), assert_non_null(recv);
    for (int j = 0; j < p; j++)
        ok(bp_codec_encode(f->minmax, x + off[j], len[j], send + sdispl[j], &err), "encode");
    MPI_Alltoallv(send, scount, sdispl, MPI_BYTE, recv, rcount, rdispl, MPI_BYTE, ref_comm);
    for (int j = 0; j < p; j++) {
        ok(bp_codec_decode(f->minmax, recv + rdispl[j], len[me], j ? dec : mine, &err), "decode");
        for (size_t i = 0; j && i < len[me]; i++) mine[i] += dec[i];
    }
    const float inv = 1.0f / (float)p;
    for (size_t i = 0; i < len[me]; i++) mine[i] *= inv;
    ok(bp_codec_encode(f->minmax, mine, len[me], send + sdispl[me], &err), "encode");
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, send, scount, sdispl, MPI_BYTE, ref_comm);
    for (int j = 0; j < p; j++)
        ok(bp_codec_decode(f->minmax, send + sdispl[j], len[j], x + off[j], &err), "decode");
    free(send), free(recv), free(dec);
}

/* PowerSGD for data parallelism by the rules of PyTorch's PowerSGD hook
 * (torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py), per tensor G
 * viewed as a matrix (its first dimension by the rest, n x m) that the hook
 * compresses: with r = min(n, m, rank), those with (n + m) r * 2 < n m (its
 * min_compression_rate, 2); every other tensor is averaged in full. For each
 * compressed one: orthogonalize Q; M = G + E; P = M Q; average P; orthonormalize P;
 * Q = M^T P; average Q; G = P Q^T; E = M - G. The local matrix steps are the
 * codec's (bp_powersgd_orthogonalize_q, _project, _reproject, _finish); which
 * tensors are compressed, the averages and the full average of the others are
 * written here. Tensor t's Q is seeded with seed + t on every rank, as the engine
 * does, so that Q starts alike everywhere. So that the comparison does not rest
 * on the codec alone, each of its steps is also checked here in double against
 * the rule: P = M Q with the previous step's averaged Q orthogonalized by the
 * hook's Gram-Schmidt (normalize column i, remove it from the columns after it;
 * from the second compressed step on, the first Q being the codec's seeded
 * Gaussian), P^T P = I after orthonormalization, Q = M^T P, G = P Q^T with the
 * averaged Q, and the new error E = M - G. */
static bool hook_compresses(const bp_tensor_info *ti, int rank) {
    if (ti->ndim < 2) return false;
    size_t n = (size_t)ti->shape[0], m = ti->numel / n, r = (size_t)rank;
    if (r > n) r = n;
    if (r > m) r = m;
    return n > 1 && m > 1 && (n + m) * r * 2 < n * m;
}

/* The hook's _orthogonalize of q (rows x k, row-major) in double, into out. */
static void hook_orthogonalize(const float *q, size_t rows, size_t k, float *out) {
    double *a = malloc(rows * k * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < rows * k; i++) a[i] = q[i];
    for (size_t c = 0; c < k; c++) {
        double norm = 0;
        for (size_t i = 0; i < rows; i++) norm += a[i * k + c] * a[i * k + c];
        norm = sqrt(norm);
        for (size_t i = 0; i < rows; i++) a[i * k + c] /= norm;
        for (size_t d = c + 1; d < k; d++) {
            double dot = 0;
            for (size_t i = 0; i < rows; i++) dot += a[i * k + c] * a[i * k + d];
            for (size_t i = 0; i < rows; i++) a[i * k + d] -= dot * a[i * k + c];
        }
    }
    for (size_t i = 0; i < rows * k; i++) out[i] = (float)a[i];
    free(a);
}

static bool algebra_ok = true; /* asserted, collectively, after every step */

/* got (float) against want (double) within 1e-4 of want's largest magnitude: the
 * float products sum at most 784 terms. */
static void expect_matrix(const char *what, int t, const float *got, const double *want, size_t n) {
    double scale = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= d)) d = e;
    }
    if (d <= 1e-4 * scale + 1e-12) return;
    algebra_ok = false;
    fprintf(stderr, "rank %d: powersgd tensor %d: %s off by %.3g (largest value %.3g)\n", me, t,
            what, d, scale);
}

/* c (r x k) = a (r x m) b (m x k), or a^T b with a (m x r) when ta. */
static void matmul(bool ta, const double *a, const float *b, size_t r, size_t m, size_t k,
                   double *c) {
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < k; j++) {
            double s = 0;
            for (size_t l = 0; l < m; l++) s += (ta ? a[l * r + i] : a[i * m + l]) * b[l * k + j];
            c[i * k + j] = s;
        }
}

static void ref_powersgd(reference *f) {
    float *g = grads(&f->r);
    for (int t = 0; t < bp_model_num_tensors(f->r.m); t++) {
        const bp_tensor_info *ti = bp_model_tensor(f->r.m, t);
        float *x = g + ti->offset;
        bp_codec *c = f->psgd[t];
        if (!c) {
            ref_avg(x, ti->numel);
            continue;
        }
        size_t n = ti->numel, rows = (size_t)ti->shape[0], cols = n / rows;
        size_t k = (size_t)bp_powersgd_rank(c), big = (rows > cols ? rows : cols) * k;
        double *m = malloc(n * sizeof *m), *want = malloc((n > big ? n : big) * sizeof *want);
        double *pd = malloc(rows * k * sizeof *pd);
        assert_true(m && want && pd);
        const float *e = bp_powersgd_error(c);
        for (size_t i = 0; i < n; i++) m[i] = (double)x[i] + (double)e[i];
        float *p, *q;
        size_t p_len, q_len;
        ok(bp_powersgd_orthogonalize_q(c, &err), "orthogonalize Q");
        ok(bp_powersgd_project(c, x, n, &p, &p_len, &err), "project");
        if (f->qprev[t]) {
            float *q0 = floats(cols * k);
            hook_orthogonalize(f->qprev[t], cols, k, q0);
            matmul(false, m, q0, rows, cols, k, want);
            free(q0);
            expect_matrix("P = M Q", t, p, want, p_len);
        }
        ref_avg(p, p_len);
        ok(bp_powersgd_reproject(c, &q, &q_len, &err), "reproject");
        for (size_t a = 0; a < k; a++) /* P^T P = I (a zero column may stay zero) */
            for (size_t b = 0; b < k; b++) {
                double dot = 0;
                for (size_t i = 0; i < rows; i++) dot += (double)p[i * k + a] * p[i * k + b];
                bool zero = a == b && fabs(dot) < 1e-12;
                if (!zero && fabs(dot - (a == b)) > 1e-5) {
                    algebra_ok = false;
                    fprintf(stderr, "rank %d: powersgd tensor %d: (P^T P)[%zu][%zu] = %.9g\n", me,
                            t, a, b, dot);
                }
            }
        matmul(true, m, p, cols, rows, k, want);
        expect_matrix("Q = M^T P", t, q, want, q_len);
        ref_avg(q, q_len);
        ok(bp_powersgd_finish(c, x, n, &err), "finish");
        for (size_t i = 0; i < rows * k; i++) pd[i] = p[i];
        for (size_t i = 0; i < rows; i++) /* want = P Q^T */
            for (size_t j = 0; j < cols; j++) {
                double s = 0;
                for (size_t l = 0; l < k; l++) s += pd[i * k + l] * q[j * k + l];
                want[i * cols + j] = s;
            }
        expect_matrix("G = P Q^T", t, x, want, n);
        for (size_t i = 0; i < n; i++) want[i] = m[i] - (double)x[i];
        expect_matrix("E = M - G", t, bp_powersgd_error(c), want, n);
        if (!f->qprev[t]) f->qprev[t] = floats(q_len);
        memcpy(f->qprev[t], q, q_len * sizeof *q);
        free(m), free(want), free(pd);
    }
}

/* The floats of --bucket-mb. */
static size_t bucket_floats(const reference *f) {
    size_t n = (size_t)(f->d.bucket_mb * 1048576.0 / sizeof(float));
    return n ? n : 1;
}

/* C_LP_S over [off, off + len) in chunks of at most `limit`, from off. */
static void ref_avg_lp_chunks(reference *f, float *x, size_t off, size_t len, size_t limit) {
    for (size_t at = off; at < off + len; at += limit)
        ref_avg_lp(f, x + at, off + len - at < limit ? off + len - at : limit);
}

/* C_LP_S of x per bucket, each bucket in chunks of at most the bucket size.
 * Buckets as parallel/buckets.h defines them: runs of whole tensors from the last
 * one down, a bucket closing before the tensor that would take it past the bucket
 * size (a larger tensor is a bucket of its own). */
static void ref_avg_lp_per_bucket(reference *f, float *x) {
    size_t limit = bucket_floats(f);
    for (int t = bp_model_num_tensors(f->r.m) - 1; t >= 0;) {
        const bp_tensor_info *top = bp_model_tensor(f->r.m, t);
        size_t end = top->offset + top->numel, start = top->offset;
        for (t--; t >= 0 && end - bp_model_tensor(f->r.m, t)->offset <= limit; t--)
            start = bp_model_tensor(f->r.m, t)->offset;
        ref_avg_lp_chunks(f, x, start, end - start, limit);
    }
}

/* Bagua's QAdam (QAdamOptimizer.step and QAdamAlgorithm), step t from 1, warm-up
 * w, after the gradient was averaged (t <= w, by the caller) and clipped:
 *   t < w:  g' = g + wd p;  m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
 *   t = w:  neither moment changes
 *   t > w:  m = b1 m + (1 - b1) g (the local gradient, as the backward hook has
 *           it), then m averaged with C_LP_S per bucket; v stays as it is
 *   p = p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). */
static void ref_qadam(reference *f, double lr, int64_t t) {
    bp_optim *o = &f->r.o;
    const bp_optim_config *c = &o->cfg;
    float *p = weights(&f->r);
    const float *g = grads(&f->r);
    const float b1 = (float)c->beta1, b2 = (float)c->beta2, wd = (float)c->weight_decay;
    int64_t w = bp_qadam_of(&f->d.settings)->warmup;
    for (size_t i = 0; t < w && i < o->n; i++) {
        float gi = g[i] + wd * p[i];
        o->m[i] = b1 * o->m[i] + (1 - b1) * gi;
        o->v[i] = b2 * o->v[i] + (1 - b2) * gi * gi;
    }
    if (t > w) {
        for (size_t i = 0; i < o->n; i++) o->m[i] = b1 * o->m[i] + (1 - b1) * g[i];
        ref_avg_lp_per_bucket(f, o->m);
    }
    const float step_size = (float)(lr / (1.0 - pow(c->beta1, (double)t)));
    const float sqrt_bc2 = (float)sqrt(1.0 - pow(c->beta2, (double)t)), eps = (float)c->eps;
    for (size_t i = 0; i < o->n; i++) p[i] -= step_size * o->m[i] / (sqrtf(o->v[i]) / sqrt_bc2 + eps);
}

/* D_FP_S shift_one: the peer of rank r in a group of even n at round k, h = n/2. */
static int shift_one_peer(int r, int n, uint64_t k) {
    int h = n / 2;
    if (r < h) return (int)((k + (uint64_t)r) % (uint64_t)((n + 1) / 2)) + h;
    long long m = ((long long)r - h - (long long)(k % (uint64_t)h)) % h;
    return (int)(m < 0 ? m + h : m);
}

static void ref_peer_avg(reference *f, float *x, size_t n) {
    uint64_t k = f->rounds++;
    if (bp_decentralized_of(&f->d.settings)->peers == BP_PEERS_ALL) {
        ref_avg(x, n);
        return;
    }
    int peer = shift_one_peer(me, np, k);
    MPI_Sendrecv(x, (int)n, MPI_FLOAT, peer, 1, f->tmp, (int)n, MPI_FLOAT, peer, 1, ref_comm,
                 MPI_STATUS_IGNORE);
    for (size_t i = 0; i < n; i++) x[i] = (x[i] + f->tmp[i]) / 2.0f;
}

/* D_LP_S: z = x + l/3 + r/3 - 5w/3; C(z) to both neighbours (on 2 ranks the one
 * peer, twice); l += D(C(z_left)); r += D(C(z_right)); w += D(C(z)); x = w. C
 * compresses chunks of at most the bucket size from the start, each on its own;
 * the message is their codes in order. */
static void ref_ring_step(reference *f, float *x, size_t n) {
    size_t limit = bucket_floats(f), bytes = 0;
    for (size_t at = 0; at < n; at += limit)
        bytes += bp_codec_encoded_size(f->minmax, n - at < limit ? n - at : limit);
    unsigned char *mine = malloc(bytes), *from_left = malloc(bytes), *from_right = malloc(bytes);
    assert_true(mine && from_left && from_right);
    for (size_t i = 0; i < n; i++)
        f->tmp[i] = x[i] + f->left[i] / 3.0f + f->right[i] / 3.0f - 5.0f * f->w[i] / 3.0f;
    for (size_t at = 0, pos = 0; at < n; at += limit) {
        size_t len = n - at < limit ? n - at : limit;
        ok(bp_codec_encode(f->minmax, f->tmp + at, len, mine + pos, &err), "encode");
        pos += bp_codec_encoded_size(f->minmax, len);
    }
    MPI_Sendrecv(mine, (int)bytes, MPI_BYTE, right_of(me), 2, from_left, (int)bytes, MPI_BYTE,
                 left_of(me), 2, ref_comm, MPI_STATUS_IGNORE);
    MPI_Sendrecv(mine, (int)bytes, MPI_BYTE, left_of(me), 3, from_right, (int)bytes, MPI_BYTE,
                 right_of(me), 3, ref_comm, MPI_STATUS_IGNORE);
    struct {
        const unsigned char *enc;
        float *replica;
    } parts[] = {{from_left, f->left}, {from_right, f->right}, {mine, f->w}};
    for (int k = 0; k < 3; k++) {
        for (size_t at = 0, pos = 0; at < n; at += limit) {
            size_t len = n - at < limit ? n - at : limit;
            ok(bp_codec_decode(f->minmax, parts[k].enc + pos, len, f->tmp + at, &err), "decode");
            pos += bp_codec_encoded_size(f->minmax, len);
        }
        for (size_t i = 0; i < n; i++) parts[k].replica[i] += f->tmp[i];
    }
    memcpy(x, f->w, n * sizeof *x);
    free(mine), free(from_left), free(from_right);
}

/* EASGD every tau steps: D = alpha (W - C); W -= D; C += sum over ranks of D. */
static void ref_easgd(reference *f, float *w, size_t n) {
    const float alpha = (float)bp_easgd_of(&f->d.settings)->alpha;
    for (size_t i = 0; i < n; i++) {
        f->diff[i] = alpha * (w[i] - f->center[i]);
        w[i] -= f->diff[i];
    }
    MPI_Allreduce(MPI_IN_PLACE, f->diff, (int)n, MPI_FLOAT, MPI_SUM, ref_comm);
    for (size_t i = 0; i < n; i++) f->center[i] += f->diff[i];
}

/* DiLoCo's fragments: streaming-diloco's F (blocks b mod F), diloco's 1. */
static int ref_fragments(const reference *f) {
    return f->d.algo == BP_DP_STREAMING_DILOCO ? bp_streaming_diloco_of(&f->d.settings)->fragments
                                               : 1;
}

static bool ref_in_fragment(const reference *f, int t, int frag) {
    return bp_model_tensor(f->r.m, t)->block % ref_fragments(f) == frag;
}

/* The fragment synchronized after step s (s steps taken): s mod H = ((f+1) H / F)
 * mod H, or -1. */
static int ref_fragment_at(const reference *f, int64_t s) {
    int64_t H = bp_diloco_of(&f->d.settings)->period;
    for (int frag = 0; s > 0 && frag < ref_fragments(f); frag++)
        if (s % H == ((int64_t)(frag + 1) * H / ref_fragments(f)) % H) return frag;
    return -1;
}

/* --outer-residual keep: E stays in the replica's weights (u = G - W holds it). */
static bool ref_keeps(const reference *f) {
    return bp_diloco_of(&f->d.settings)->residual == BP_OUTER_KEEP;
}

/* u[0..n) coded: its bytes into out, e[0..n) = u - decode. */
static void ref_code(bp_codec *c, const float *u, float *e, size_t n, unsigned char *out,
                     float *dec) {
    ok(bp_codec_encode(c, u, n, out, &err), "encode");
    ok(bp_codec_decode(c, out, n, dec, &err), "decode");
    for (size_t i = 0; i < n; i++) e[i] = u[i] - dec[i];
}

/* The same by reduce-scatter, tensor by tensor in MPI's v-collectives of exact
 * sizes: chunk j (bp_chunk's split) of u = G - W + E, coded with E, to rank j;
 * there the p chunks decoded, summed in rank order, times 1/p, plus the owner's
 * F, coded again with F; every owner's bytes to every rank, decoded. */
static void ref_diloco_average_rs(reference *f, const float *w, int frag) {
    const float inv = 1.0f / (float)np;
    int me;
    MPI_Comm_rank(ref_comm, &me);
    int *cnt = calloc((size_t)np, sizeof *cnt), *at = calloc((size_t)np, sizeof *at),
        *rcnt = calloc((size_t)np, sizeof *rcnt), *rat = calloc((size_t)np, sizeof *rat);
    for (int t = 0; t < bp_model_num_tensors(f->r.m); t++) {
        if (!ref_in_fragment(f, t, frag)) continue;
        const bp_tensor_info *ti = bp_model_tensor(f->r.m, t);
        float *u = floats(ti->numel), *dec = floats(ti->numel);
        for (size_t i = 0; i < ti->numel; i++) {
            u[i] = f->global[ti->offset + i] - w[ti->offset + i];
            if (!ref_keeps(f)) u[i] += f->ef[ti->offset + i];
        }
        size_t off, len, total = 0;
        for (int j = 0; j < np; j++) {
            chunk(ti->numel, np, j, &off, &len);
            at[j] = (int)total, cnt[j] = len ? (int)bp_codec_encoded_size(f->outer, len) : 0;
            total += (size_t)cnt[j];
        }
        unsigned char *sent = calloc(total + 1, 1), *got = calloc((size_t)np * (size_t)cnt[me] + 1, 1);
        for (int j = 0; j < np; j++) {
            chunk(ti->numel, np, j, &off, &len);
            if (len) ref_code(f->outer, u + off, f->ef + ti->offset + off, len, sent + at[j], dec);
            rcnt[j] = cnt[me], rat[j] = j * cnt[me];
        }
        MPI_Alltoallv(sent, cnt, at, MPI_BYTE, got, rcnt, rat, MPI_BYTE, ref_comm);
        chunk(ti->numel, np, me, &off, &len);
        float *v = floats(len);
        for (int r = 0; len && r < np; r++) {
            ok(bp_codec_decode(f->outer, got + rat[r], len, dec, &err), "decode");
            for (size_t i = 0; i < len; i++) v[i] = r ? v[i] + dec[i] : dec[i];
        }
        for (size_t i = 0; i < len; i++) v[i] = v[i] * inv + f->ef_rs[ti->offset + off + i];
        unsigned char *mine = malloc((size_t)cnt[me] + 1);
        if (len) ref_code(f->outer, v, f->ef_rs + ti->offset + off, len, mine, dec);
        MPI_Allgatherv(mine, cnt[me], MPI_BYTE, sent, cnt, at, MPI_BYTE, ref_comm);
        for (int j = 0; j < np; j++) {
            chunk(ti->numel, np, j, &off, &len);
            if (len)
                ok(bp_codec_decode(f->outer, sent + at[j], len, f->pseudo + ti->offset + off, &err),
                   "decode");
        }
        free(u), free(dec), free(sent), free(got), free(v), free(mine);
    }
    free(cnt), free(at), free(rcnt), free(rat);
}

/* DiLoCo's average of fragment frag's pseudo-gradients G - W into f->pseudo. In
 * float32: the fragment's tensors in one MPI allreduce, times 1/p. Compressed:
 * each tensor of G - W + E encoded by the library's codec, E = u - decode, every
 * rank's bytes gathered, decoded and added in rank order, times 1/p. */
static void ref_diloco_average(reference *f, const float *w, int frag) {
    if (f->outer && bp_diloco_of(&f->d.settings)->exchange == BP_OUTER_REDUCE_SCATTER) {
        ref_diloco_average_rs(f, w, frag);
        return;
    }
    int nt = bp_model_num_tensors(f->r.m);
    size_t n = f->r.n, len = 0, bytes = 0;
    float *packed = floats(n);
    const float inv = 1.0f / (float)np;
    for (int t = 0; t < nt; t++) {
        if (!ref_in_fragment(f, t, frag)) continue;
        const bp_tensor_info *ti = bp_model_tensor(f->r.m, t);
        for (size_t i = ti->offset; i < ti->offset + ti->numel; i++) {
            float u = f->global[i] - w[i];
            packed[len++] = f->outer && !ref_keeps(f) ? u + f->ef[i] : u;
        }
        if (f->outer) bytes += bp_codec_encoded_size(f->outer, ti->numel);
    }
    if (!f->outer) {
        MPI_Allreduce(MPI_IN_PLACE, packed, (int)len, MPI_FLOAT, MPI_SUM, ref_comm);
        for (size_t i = 0; i < len; i++) packed[i] *= inv;
    } else {
        unsigned char *all = calloc((size_t)np * bytes + 1, 1), *mine = malloc(bytes + 1);
        float *dec = floats(n);
        size_t at = 0, pos = 0;
        for (int t = 0; t < nt; t++) {
            if (!ref_in_fragment(f, t, frag)) continue;
            const bp_tensor_info *ti = bp_model_tensor(f->r.m, t);
            ok(bp_codec_encode(f->outer, packed + pos, ti->numel, mine + at, &err), "encode");
            ok(bp_codec_decode(f->outer, mine + at, ti->numel, dec, &err), "decode");
            for (size_t i = 0; i < ti->numel; i++) f->ef[ti->offset + i] = packed[pos + i] - dec[i];
            at += bp_codec_encoded_size(f->outer, ti->numel);
            pos += ti->numel;
        }
        MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, ref_comm);
        at = pos = 0;
        for (int t = 0; t < nt; t++) {
            if (!ref_in_fragment(f, t, frag)) continue;
            const bp_tensor_info *ti = bp_model_tensor(f->r.m, t);
            for (int r = 0; r < np; r++) {
                ok(bp_codec_decode(f->outer, all + (size_t)r * bytes + at, ti->numel, dec, &err),
                   "decode");
                for (size_t i = 0; i < ti->numel; i++)
                    packed[pos + i] = r ? packed[pos + i] + dec[i] : dec[i];
            }
            for (size_t i = 0; i < ti->numel; i++) packed[pos + i] *= inv;
            at += bp_codec_encoded_size(f->outer, ti->numel);
            pos += ti->numel;
        }
        free(all), free(mine), free(dec);
    }
    len = 0;
    for (int t = 0; t < nt; t++) {
        if (!ref_in_fragment(f, t, frag)) continue;
        const bp_tensor_info *ti = bp_model_tensor(f->r.m, t);
        memcpy(f->pseudo + ti->offset, packed + len, ti->numel * sizeof(float));
        len += ti->numel;
    }
    free(packed);
}

/* The outer step: Nesterov SGD on G from the average D, then W = mix W + (1 - mix) G
 * (mix 0: W = G), and with --outer-residual keep W = W - (1 - mix) E. */
static void ref_diloco_outer(reference *f, float *w, int frag, float mix) {
    const float mu = (float)bp_diloco_of(&f->d.settings)->outer_momentum;
    const float lr = (float)bp_diloco_of(&f->d.settings)->outer_lr;
    for (int t = 0; t < bp_model_num_tensors(f->r.m); t++) {
        if (!ref_in_fragment(f, t, frag)) continue;
        const bp_tensor_info *ti = bp_model_tensor(f->r.m, t);
        for (size_t i = ti->offset; i < ti->offset + ti->numel; i++) {
            float d = f->pseudo[i];
            f->outer_m[i] = mu * f->outer_m[i] + d;
            f->global[i] = f->global[i] - lr * (d + mu * f->outer_m[i]);
            w[i] = mix == 0.0f ? f->global[i] : mix * w[i] + (1.0f - mix) * f->global[i];
            if (ref_keeps(f)) w[i] = w[i] + -(1.0f - mix) * f->ef[i];
        }
    }
}

static void ref_init(reference *f, const bp_train_config *c) {
    memset(f, 0, sizeof *f);
    replica_init(&f->r, c);
    bp_train_dp_config(c, &f->d);
    size_t n = f->r.n;
    float *w = weights(&f->r);
    MPI_Bcast(w, (int)n, MPI_FLOAT, 0, ref_comm); /* everyone starts from rank 0's weights */
    f->tmp = floats(n);
    f->avg = floats(n);
    switch (f->d.algo) {
    case BP_DP_BYTEGRAD:
    case BP_DP_QADAM: ok(bp_codec_minmax_u8_create(&f->minmax, &err), "codec"); break;
    case BP_DP_POWERSGD: {
        int nt = bp_model_num_tensors(f->r.m), psgd_rank = bp_powersgd_of(&f->d.settings)->rank;
        f->psgd = calloc((size_t)nt, sizeof *f->psgd);
        f->qprev = calloc((size_t)nt, sizeof *f->qprev);
        assert_true(f->psgd && f->qprev);
        for (int t = 0; t < nt; t++) {
            const bp_tensor_info *ti = bp_model_tensor(f->r.m, t);
            if (hook_compresses(ti, psgd_rank))
                ok(bp_codec_powersgd_create((size_t)ti->shape[0],
                                            ti->numel / (size_t)ti->shape[0], psgd_rank,
                                            f->d.seed + (uint64_t)t, &f->psgd[t], &err),
                   "powersgd codec");
        }
        break;
    }
    case BP_DP_LP_DECENTRALIZED:
        ok(bp_codec_minmax_u8_create(&f->minmax, &err), "codec");
        f->w = floats(n), f->left = floats(n), f->right = floats(n);
        memcpy(f->w, w, n * sizeof *w);
        MPI_Sendrecv(w, (int)n, MPI_FLOAT, right_of(me), 4, f->left, (int)n, MPI_FLOAT, left_of(me),
                     4, ref_comm, MPI_STATUS_IGNORE);
        MPI_Sendrecv(w, (int)n, MPI_FLOAT, left_of(me), 5, f->right, (int)n, MPI_FLOAT,
                     right_of(me), 5, ref_comm, MPI_STATUS_IGNORE);
        break;
    case BP_DP_EASGD:
        f->center = floats(n), f->diff = floats(n);
        memcpy(f->center, w, n * sizeof *w);
        break;
    case BP_DP_DILOCO:
    case BP_DP_STREAMING_DILOCO: {
        f->global = floats(n), f->outer_m = floats(n), f->ef = floats(n), f->pseudo = floats(n);
        f->ef_rs = floats(n);
        memcpy(f->global, w, n * sizeof *w);
        const bp_diloco_settings *o = bp_diloco_of(&f->d.settings);
        if (o->compress == BP_OUTER_MINMAX8) ok(bp_codec_minmax_u8_create(&f->outer, &err), "codec");
        if (o->compress == BP_OUTER_MINMAX4)
            ok(bp_codec_minmax_bits_create(4, &f->outer, &err), "codec");
        if (o->compress == BP_OUTER_TOPK2) ok(bp_codec_topk_create(o->topk, &f->outer, &err), "codec");
        if (o->compress == BP_OUTER_MINMAX2)
            ok(bp_codec_minmax_bits_create(2, &f->outer, &err), "codec");
        break;
    }
    default: break;
    }
}

static void ref_free(reference *f) {
    bp_codec_destroy(f->minmax);
    for (int t = 0; f->psgd && t < bp_model_num_tensors(f->r.m); t++) {
        bp_codec_destroy(f->psgd[t]);
        free(f->qprev[t]);
    }
    free(f->psgd), free(f->qprev);
    free(f->center), free(f->diff), free(f->w), free(f->left), free(f->right), free(f->tmp);
    free(f->avg);
    free(f->global), free(f->outer_m), free(f->ef), free(f->pseudo), free(f->ef_rs);
    bp_codec_destroy(f->outer);
    replica_free(&f->r);
}

/* One step of the rule. Gradient algorithms average gradients, then clip and step;
 * weight algorithms clip and step on local gradients, then mix weights, except
 * decentralized in Bagua's order (decentralized.py and
 * decentralized_full_precision_synchronous.rs): at steps 0, k, 2k, ... the
 * weights x_t are averaged with the peers, the average replaces the weights after
 * backward, and the optimizer steps from it with the local gradient taken at x_t:
 * x_{t+1} = avg_peers(x_t) - lr g(x_t). */
static void ref_step(reference *f) {
    replica *r = &f->r;
    float *w = weights(r), *g = grads(r);
    size_t n = r->n;
    int64_t s = r->step; /* 0-based index of this step */
    double lr = bp_lr_at(&r->lr, s);
    int accum = r->cfg.grad_accum;
    bool step_first = bp_decentralized_of(&f->d.settings)->order == BP_DECENTRALIZED_STEP_FIRST;
    bool decentralized_round =
        f->d.algo == BP_DP_DECENTRALIZED && s % bp_decentralized_of(&f->d.settings)->interval == 0;
    bool bagua_order = decentralized_round && !step_first;
    if (bagua_order) {
        memcpy(f->avg, w, n * sizeof *w);
        ref_peer_avg(f, f->avg, n);
    }
    /* streaming-diloco: the fragment synchronized after step s - 1 is averaged
     * while step s computes, from the weights it starts with. */
    bool streaming = f->d.algo == BP_DP_STREAMING_DILOCO;
    bool diloco = streaming || f->d.algo == BP_DP_DILOCO;
    int64_t warm = diloco ? bp_diloco_of(&f->d.settings)->warmup : 0; /* steps of allreduce */
    if (streaming && ref_fragment_at(f, s - warm) >= 0)
        ref_diloco_average(f, w, ref_fragment_at(f, s - warm));
    bp_model_zero_grad(r->m);
    for (int k = 0; k < accum; k++) micro_batch(r, NULL, k, accum);
    if (bagua_order) memcpy(w, f->avg, n * sizeof *w);
    bool qadam = f->d.algo == BP_DP_QADAM;
    switch (f->d.algo) {
    case BP_DP_ALLREDUCE: ref_avg(g, n); break;
    case BP_DP_BYTEGRAD: ref_avg_lp(f, g, n); break;
    case BP_DP_POWERSGD:
        if (s >= bp_powersgd_of(&f->d.settings)->warmup)
            ref_powersgd(f);
        else
            ref_avg(g, n);
        break;
    case BP_DP_QADAM:
        if (s + 1 <= bp_qadam_of(&f->d.settings)->warmup) ref_avg(g, n);
        break;
    default:
        if (s < warm) ref_avg(g, n); /* diloco's warm-up */
        break;
    }
    bp_clip_grad_norm(g, n, r->cfg.clip);
    if (qadam)
        ref_qadam(f, lr, s + 1);
    else
        bp_optim_step(&r->o, w, g, lr);
    if (s + 1 <= warm) { /* the warm-up: G = W (alike on every rank) */
        memcpy(f->global, w, n * sizeof *w);
        r->step++;
        return;
    }
    switch (f->d.algo) {
    case BP_DP_DECENTRALIZED: /* --decentralized-order step-first */
        if (decentralized_round && step_first) ref_peer_avg(f, w, n);
        break;
    case BP_DP_LP_DECENTRALIZED: /* at steps 0, k, 2k, ... */
        if (s % bp_decentralized_of(&f->d.settings)->interval == 0) ref_ring_step(f, w, n);
        break;
    case BP_DP_EASGD:
        if ((s + 1) % bp_easgd_of(&f->d.settings)->period == 0) ref_easgd(f, w, n);
        break;
    case BP_DP_DILOCO: /* after every H-th step past the warm-up: average, outer step, W = G */
        if ((s + 1 - warm) % bp_diloco_of(&f->d.settings)->period == 0) {
            ref_diloco_average(f, w, 0);
            ref_diloco_outer(f, w, 0, 0.0f);
        }
        break;
    case BP_DP_STREAMING_DILOCO: { /* tau steps after a fragment's sync: its merge */
        const bp_streaming_diloco_settings *sd = bp_streaming_diloco_of(&f->d.settings);
        int frag = ref_fragment_at(f, s + 1 - sd->delay - warm);
        if (frag >= 0) ref_diloco_outer(f, w, frag, (float)sd->mix);
        break;
    }
    default: break;
    }
    r->step++;
}

/* --- the cases ------------------------------------------------------------------------ */

/* Engine and reference for STEPS steps, weights compared after every step. With
 * `identical`, the engine's weights must also be the same bits on every rank. */
static void engine_vs_reference(const char *name, const bp_train_config *c, tol t, bool identical) {
    case_begin();
    engine e;
    reference f;
    engine_init(&e, c);
    ref_init(&f, c);
    expect_close(name, 0, weights(&e.r), weights(&f.r), e.r.n, EXACT);
    for (int s = 1; s <= STEPS; s++) {
        engine_step(&e);
        ref_step(&f);
        expect_close(name, s, weights(&e.r), weights(&f.r), e.r.n, t);
        assert_true(all_ranks(algebra_ok));
        if (identical) assert_true(same_everywhere(weights(&e.r), e.r.n * sizeof(float)));
    }
    engine_free(&e);
    ref_free(&f);
    case_end(name);
}

/* Tolerance of a rule whose averages are allreduces of p ranks. */
static tol sum_tol(void) { return np == 2 ? EXACT : TOL_SUM; }

static void test_allreduce_gpt(void **state) {
    (void)state;
    bp_train_config c = gpt_config();
    c.dp_algo = BP_DP_ALLREDUCE;
    engine_vs_reference("allreduce gpt", &c, sum_tol(), true);
}

/* The mlp (SGD, so the scale of the gradient matters, unlike with Adam) on 2 and
 * 4 ranks; loading Fashion-MNIST twice per rank is the slow part of this file. */
static void test_allreduce_mlp(void **state) {
    (void)state;
    if (np == 3) skip();
    bp_train_config c = mlp_config();
    c.dp_algo = BP_DP_ALLREDUCE;
    engine_vs_reference("allreduce mlp", &c, sum_tol(), true);
}

/* C_LP_S is exact on any number of ranks (see the top). One bucket (the default
 * 10 MB holds the whole model) so that the chunks are the reference's. */
static void test_bytegrad_gpt(void **state) {
    (void)state;
    bp_train_config c = gpt_config();
    c.dp_algo = BP_DP_BYTEGRAD;
    engine_vs_reference("bytegrad gpt", &c, EXACT, true);
}

static void test_bytegrad_mlp(void **state) {
    (void)state;
    if (np != 2) skip();
    bp_train_config c = mlp_config();
    c.dp_algo = BP_DP_BYTEGRAD;
    engine_vs_reference("bytegrad mlp", &c, EXACT, true);
}

/* qadam against Bagua's rule (ref_qadam): warm-up 8 of the 20 steps, so that the
 * frozen v, the bias corrections that keep growing and the momentum's compressed
 * average all count. Exact on 2 ranks only: on more, the warm-up's allreduce
 * differs from MPI's in the last bits, and the 8-bit momentum turns that into
 * whole quantization steps. */
static void qadam_case(const char *name, double clip, double bucket_mb, double wd) {
    bp_train_config c = gpt_config();
    c.dp_algo = BP_DP_QADAM;
    bp_qadam_in(&c.dp_settings)->warmup = 8;
    c.clip = clip;
    c.comm.bucket_mb = bucket_mb;
    c.optim.weight_decay = wd;
    engine_vs_reference(name, &c, EXACT, true);
}

static void test_qadam_gpt(void **state) {
    (void)state;
    if (np != 2) skip();
    /* Bagua's way: each bucket's momentum computed and sent while backward runs,
     * each bucket updated as it arrives; buckets of about 260 floats, the larger
     * tensors split into chunks of that size. */
    qadam_case("qadam overlapped, small buckets, weight decay", 0, 0.001, 0.01);
    qadam_case("qadam overlapped, one bucket", 0, 10, 0);
    /* With --clip the momentum needs the clipped gradient: after backward. */
    qadam_case("qadam after backward (clip), small buckets", 1.0, 0.001, 0);
}

static bp_train_config decentralized_config(bp_peers peers, bp_decentralized_order order) {
    bp_train_config c = gpt_config();
    c.dp_algo = BP_DP_DECENTRALIZED;
    bp_decentralized_in(&c.dp_settings)->peers = peers;
    bp_decentralized_in(&c.dp_settings)->interval = 2;
    bp_decentralized_in(&c.dp_settings)->order = order;
    return c;
}

/* Both orders (0 Bagua's, 1 step-first); the exchange of Bagua's order runs on the
 * communication thread during forward and backward. */
static void decentralized(const char *name, bp_peers peers, tol t) {
    char both[96];
    for (int order = 0; order < 2; order++) {
        bp_train_config c = decentralized_config(peers, order);
        snprintf(both, sizeof both, "%s %s", name, order ? "step-first" : "bagua");
        engine_vs_reference(both, &c, t, false);
    }
}

/* shift_one needs an even number of ranks; on 4 the pairs change every round. */
static void test_decentralized_shift_one(void **state) {
    (void)state;
    if (np % 2) skip();
    decentralized("decentralized shift_one interval=2", BP_PEERS_SHIFT_ONE, EXACT);
}

static void test_decentralized_all(void **state) {
    (void)state;
    decentralized("decentralized all interval=2", BP_PEERS_ALL, sum_tol());
}

/* With SGD, no clipping and peers all, averaging after the step is synchronous
 * SGD (the average of x_t - lr m_r is x_t - lr avg(m_r), momentum being linear),
 * but Bagua's order is not: x_{t+1} = avg(x_t) - lr g_r(x_t) keeps each rank's
 * own gradient until the next averaging. Bagua's order against the reference,
 * step-first against allreduce (within TOL_SUM: the same sums in another
 * order), and Bagua's order clearly away from allreduce after every step. */
static void test_decentralized_all_sgd(void **state) {
    (void)state;
    case_begin();
    bp_train_config b = decentralized_config(BP_PEERS_ALL, BP_DECENTRALIZED_BAGUA);
    bp_decentralized_in(&b.dp_settings)->interval = 1;
    b.optim.kind = BP_OPTIM_SGD;
    b.optim.lr = 0.1;
    b.clip = 0;
    bp_train_config sf = b, sync = b;
    bp_decentralized_in(&sf.dp_settings)->order = BP_DECENTRALIZED_STEP_FIRST;
    sync.dp_algo = BP_DP_ALLREDUCE;
    engine eb, esf, es;
    reference f;
    engine_init(&eb, &b);
    engine_init(&esf, &sf);
    engine_init(&es, &sync);
    ref_init(&f, &b);
    size_t n = eb.r.n;
    for (int s = 1; s <= STEPS; s++) {
        engine_step(&eb);
        engine_step(&esf);
        engine_step(&es);
        ref_step(&f);
        expect_close("decentralized all sgd bagua", s, weights(&eb.r), weights(&f.r), n, TOL_SUM);
        expect_close("decentralized all sgd step-first vs allreduce", s, weights(&esf.r),
                     weights(&es.r), n, TOL_SUM);
        double apart = 0;
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)weights(&eb.r)[i] - (double)weights(&es.r)[i]);
            if (d > apart) apart = d;
        }
        /* one local step of lr 0.1 on gradients that differ between ranks */
        assert_true(max_over_ranks(apart) > 1e-3);
    }
    engine_free(&eb);
    engine_free(&esf);
    engine_free(&es);
    ref_free(&f);
    case_end("decentralized all sgd");
}

/* D_LP_S is exact on any ring, 2 ranks included (both neighbours the one peer).
 * The reference's replicas also keep the invariant: l is the left neighbour's w
 * and r the right neighbour's, bit for bit. Run with the defaults (every step, the
 * whole model one chunk) and with --interval 3 and chunks of about 260 floats. */
static void lp_decentralized(const char *name, int64_t interval, double bucket_mb) {
    case_begin();
    bp_train_config c = gpt_config();
    c.dp_algo = BP_DP_LP_DECENTRALIZED;
    bp_decentralized_in(&c.dp_settings)->interval = interval;
    c.comm.bucket_mb = bucket_mb;
    engine e;
    reference f;
    engine_init(&e, &c);
    ref_init(&f, &c);
    size_t n = e.r.n;
    float *nb = floats(n);
    for (int s = 1; s <= STEPS; s++) {
        engine_step(&e);
        ref_step(&f);
        expect_close(name, s, weights(&e.r), weights(&f.r), n, EXACT);
        MPI_Sendrecv(f.w, (int)n, MPI_FLOAT, right_of(me), 6, nb, (int)n, MPI_FLOAT, left_of(me), 6,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        assert_true(all_ranks(memcmp(nb, f.left, n * sizeof *nb) == 0));
        MPI_Sendrecv(f.w, (int)n, MPI_FLOAT, left_of(me), 7, nb, (int)n, MPI_FLOAT, right_of(me), 7,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        assert_true(all_ranks(memcmp(nb, f.right, n * sizeof *nb) == 0));
    }
    free(nb);
    engine_free(&e);
    ref_free(&f);
    case_end(name);
}

static void test_lp_decentralized(void **state) {
    (void)state;
    lp_decentralized("lp-decentralized", 1, 10);
    lp_decentralized("lp-decentralized interval=3, small chunks", 3, 0.001);
}

/* PowerSGD rank 2 after 2 warm-up steps of allreduce. P and Q are averaged with
 * allreduces, so: exact on 2 ranks, TOL_SUM on more (measured: at most 7e-7). */
static void test_powersgd_gpt(void **state) {
    (void)state;
    bp_train_config c = gpt_config();
    c.dp_algo = BP_DP_POWERSGD;
    bp_powersgd_in(&c.dp_settings)->rank = 2;
    bp_powersgd_in(&c.dp_settings)->warmup = 2;
    engine_vs_reference("powersgd rank=2 warmup=2 gpt", &c, sum_tol(), true);
}

/* Rank 4 on the tiny gpt: the hook's min_compression_rate sends some matrices in
 * full (the 16 x 16 ones: (16 + 16) 4 * 2 is not below 256) and compresses the
 * others. */
static void test_powersgd_min_rate(void **state) {
    (void)state;
    bp_train_config c = gpt_config();
    c.dp_algo = BP_DP_POWERSGD;
    bp_powersgd_in(&c.dp_settings)->rank = 4;
    bp_powersgd_in(&c.dp_settings)->warmup = 1;
    reference f;
    ref_init(&f, &c);
    int full = 0, compressed = 0;
    for (int t = 0; t < bp_model_num_tensors(f.r.m); t++) {
        if (bp_model_tensor(f.r.m, t)->ndim < 2) continue;
        if (f.psgd[t]) compressed++;
        else full++;
    }
    ref_free(&f);
    assert_true(full > 0 && compressed > 0);
    engine_vs_reference("powersgd rank=4 warmup=1 gpt", &c, sum_tol(), true);
}

static void test_powersgd_mlp(void **state) {
    (void)state;
    if (np != 2) skip();
    bp_train_config c = mlp_config();
    c.dp_algo = BP_DP_POWERSGD;
    bp_powersgd_in(&c.dp_settings)->rank = 2;
    engine_vs_reference("powersgd rank=2 mlp", &c, EXACT, true);
}

static void test_easgd(void **state) {
    (void)state;
    bp_train_config c = gpt_config();
    c.dp_algo = BP_DP_EASGD;
    bp_easgd_in(&c.dp_settings)->alpha = 0.3;
    bp_easgd_in(&c.dp_settings)->period = 3;
    engine_vs_reference("easgd alpha=0.3 period=3", &c, sum_tol(), false);
}

/* DiLoCo: H = 4 inner AdamW steps, then the outer Nesterov step, 5 times in 20
 * steps; in float32 (an allreduce: exact on 2 ranks) and with each codec (an
 * allgather of the encodings, decoded in rank order: exact on any number). */
static bp_train_config diloco_config(int algo, bp_outer_compress compress) {
    bp_train_config c = gpt_config();
    c.dp_algo = algo;
    bp_diloco_settings *o = bp_diloco_in(&c.dp_settings);
    o->period = 4;
    o->compress = compress;
    o->topk = 0.05;
    return c;
}

static void test_diloco(void **state) {
    (void)state;
    bp_train_config c = diloco_config(BP_DP_DILOCO, BP_OUTER_NONE);
    engine_vs_reference("diloco H=4", &c, sum_tol(), false);
}

static void test_diloco_compressed(void **state) {
    (void)state;
    static const char *const names[] = {"diloco H=4 minmax8", "diloco H=4 minmax4",
                                        "diloco H=4 topk2 0.05", "diloco H=4 minmax2"};
    for (int k = BP_OUTER_MINMAX8; k <= BP_OUTER_MINMAX2; k++) {
        bp_train_config c = diloco_config(BP_DP_DILOCO, (bp_outer_compress)k);
        engine_vs_reference(names[k - 1], &c, EXACT, false);
    }
}

/* Compressed outer gradients by reduce-scatter: each chunk to its owner, reduced
 * and coded again with the owner's error feedback, allgathered (exact on any
 * number of ranks: every sum is in rank order). */
static void test_diloco_reduce_scatter(void **state) {
    (void)state;
    static const char *const names[] = {"diloco H=4 minmax8 reduce-scatter",
                                        "diloco H=4 minmax4 reduce-scatter",
                                        "diloco H=4 topk2 0.05 reduce-scatter"};
    for (int k = BP_OUTER_MINMAX8; k <= BP_OUTER_TOPK2; k++) {
        bp_train_config c = diloco_config(BP_DP_DILOCO, (bp_outer_compress)k);
        bp_diloco_in(&c.dp_settings)->exchange = BP_OUTER_REDUCE_SCATTER;
        engine_vs_reference(names[k - 1], &c, EXACT, false);
    }
    bp_train_config c = diloco_config(BP_DP_STREAMING_DILOCO, BP_OUTER_MINMAX4);
    bp_diloco_in(&c.dp_settings)->exchange = BP_OUTER_REDUCE_SCATTER;
    bp_streaming_diloco_in(&c.dp_settings)->delay = 2;
    engine_vs_reference("streaming-diloco F=2 tau=2 minmax4 reduce-scatter", &c, EXACT, false);
}

/* --outer-residual keep: what top-k left out stays in each replica's weights
 * (W = G - E after the outer step), by allgather and by reduce-scatter (whose
 * owner's error stays feedback), and with streaming's merge (W = alpha W +
 * (1 - alpha) G - (1 - alpha) E, alpha 0.3). */
static void test_diloco_keep_residual(void **state) {
    (void)state;
    bp_train_config c = diloco_config(BP_DP_DILOCO, BP_OUTER_TOPK2);
    bp_diloco_in(&c.dp_settings)->residual = BP_OUTER_KEEP;
    engine_vs_reference("diloco H=4 topk2 0.05 keep", &c, EXACT, false);
    bp_diloco_in(&c.dp_settings)->exchange = BP_OUTER_REDUCE_SCATTER;
    engine_vs_reference("diloco H=4 topk2 0.05 keep reduce-scatter", &c, EXACT, false);
    c = diloco_config(BP_DP_STREAMING_DILOCO, BP_OUTER_TOPK2);
    bp_diloco_in(&c.dp_settings)->residual = BP_OUTER_KEEP;
    bp_streaming_diloco_in(&c.dp_settings)->delay = 2;
    bp_streaming_diloco_in(&c.dp_settings)->mix = 0.3;
    engine_vs_reference("streaming-diloco F=2 tau=2 alpha=0.3 topk2 keep", &c, EXACT, false);
}

/* A warm-up of 3 steps of gradient allreduce, then H = 4 from the replicas'
 * (alike) weights: diloco, and streaming with tau 2 (in float32: a codec would
 * turn the warm-up's summation order, on more than 2 ranks, into a step of its
 * grid). */
static void test_diloco_warmup(void **state) {
    (void)state;
    bp_train_config c = diloco_config(BP_DP_DILOCO, BP_OUTER_NONE);
    bp_diloco_in(&c.dp_settings)->warmup = 3;
    engine_vs_reference("diloco H=4 warmup=3", &c, sum_tol(), false);
    c = diloco_config(BP_DP_STREAMING_DILOCO, BP_OUTER_NONE);
    bp_diloco_in(&c.dp_settings)->warmup = 3;
    bp_streaming_diloco_in(&c.dp_settings)->delay = 2;
    engine_vs_reference("streaming-diloco F=2 tau=2 warmup=3", &c, sum_tol(), false);
}

/* streaming-diloco: 2 fragments of the 3 blocks (embed and head, h.0) at offsets 2
 * and 0 of H = 4, merged tau = 2 steps later with alpha = 0.3 (asymmetric, so that
 * the merge's two weights cannot be swapped unseen), and tau = 1, alpha = 0.5 with
 * 4-bit outer gradients. */
static void test_streaming_diloco(void **state) {
    (void)state;
    bp_train_config c = diloco_config(BP_DP_STREAMING_DILOCO, BP_OUTER_NONE);
    bp_streaming_diloco_in(&c.dp_settings)->delay = 2;
    bp_streaming_diloco_in(&c.dp_settings)->mix = 0.3;
    engine_vs_reference("streaming-diloco F=2 tau=2 alpha=0.3", &c, sum_tol(), false);
    c = diloco_config(BP_DP_STREAMING_DILOCO, BP_OUTER_MINMAX4);
    bp_streaming_diloco_in(&c.dp_settings)->delay = 1;
    engine_vs_reference("streaming-diloco F=2 tau=1 minmax4", &c, EXACT, false);
}

/* Engine against engine: `a` and `b` differ only in bucketing settings. */
static void engine_vs_engine(const char *name, const bp_train_config *a, const bp_train_config *b,
                             tol t) {
    case_begin();
    engine x, y;
    engine_init(&x, a);
    engine_init(&y, b);
    for (int s = 1; s <= STEPS; s++) {
        engine_step(&x);
        engine_step(&y);
        expect_close(name, s, weights(&x.r), weights(&y.r), x.r.n, t);
    }
    engine_free(&x);
    engine_free(&y);
    case_end(name);
}

/* Many small buckets (about 260 floats each, so nearly one per tensor) started
 * during backward against one bucket sent after it. On 2 ranks: the same bits.
 * On 3 and 4 ranks an element's ring sum starts at the owner of its chunk, and the
 * chunks follow the bucket boundaries, so the order of the p additions differs
 * between the two: the last bits differ, hence TOL_SUM. Timing alone (overlap on
 * or off with the same buckets) changes nothing on any number of ranks. */
static void test_buckets(void **state) {
    (void)state;
    bp_train_config small = gpt_config(), one = gpt_config(), small_off = gpt_config();
    small.comm.bucket_mb = small_off.comm.bucket_mb = 0.001;
    small_off.comm.no_overlap = 1;
    one.comm.no_overlap = 1;
    engine_vs_engine("small buckets overlap on vs one bucket off", &small, &one, sum_tol());
    engine_vs_engine("small buckets overlap on vs off", &small, &small_off, EXACT);
    /* And against the reference, which has no buckets at all. */
    engine_vs_reference("allreduce small buckets", &small, sum_tol(), true);
}

/* Early updates (no --clip, no --skip-nonfinite: each bucket updated as soon as
 * its average arrives, while later buckets travel) against the update after
 * backward (--skip-nonfinite turns them off, nothing else): the same bits; and
 * against the reference, with AdamW and with SGD. */
static void test_early_update(void **state) {
    (void)state;
    bp_train_config early = gpt_config(), late = gpt_config();
    early.clip = late.clip = 0;
    early.comm.bucket_mb = late.comm.bucket_mb = 0.001;
    late.skip_nonfinite = 1;
    engine_vs_engine("early updates vs after backward", &early, &late, EXACT);
    engine_vs_reference("allreduce early updates", &early, sum_tol(), true);
    early.optim.kind = BP_OPTIM_SGD;
    early.optim.lr = 0.1;
    engine_vs_reference("allreduce early updates sgd", &early, sum_tol(), true);
}

/* Hierarchical (2-rank "nodes") against flat: the same average, summed in another
 * order (within nodes, then between leaders). With SGD (lr 0.1, momentum 0.9), not
 * AdamW: Adam's update does not change when every gradient is scaled alike, so a
 * wrong scale between the node and leader stages would go unseen. */
static void test_hierarchical(void **state) {
    (void)state;
    if (np != 4) skip();
    bp_train_config h = gpt_config();
    h.optim.kind = BP_OPTIM_SGD;
    h.optim.lr = 0.1;
    bp_train_config flat = h;
    h.comm.hierarchical = 1;
    h.comm.node_size = 2;
    engine_vs_engine("hierarchical vs flat allreduce", &h, &flat, TOL_SUM);
    engine_vs_reference("hierarchical allreduce", &h, TOL_SUM, true);
}

/* --grad-accum 2 with batch B against the reference with one batch of 2B: the
 * same 2B windows (the data generator draws the same sequence) and the same mean
 * gradient, summed in another order. */
static void test_grad_accum(void **state) {
    (void)state;
    case_begin();
    bp_train_config c = gpt_config(), big = gpt_config();
    c.grad_accum = 2;
    big.batch = 2 * c.batch;
    engine e;
    reference f;
    engine_init(&e, &c);
    ref_init(&f, &big);
    for (int s = 1; s <= STEPS; s++) {
        engine_step(&e);
        ref_step(&f);
        expect_close("grad-accum 2", s, weights(&e.r), weights(&f.r), e.r.n, TOL_ACCUM);
    }
    engine_free(&e);
    ref_free(&f);
    case_end("grad-accum 2 vs batch 2B");
}

/* Async (C_FP_A on weights, every 1 ms): ranks take different numbers of steps
 * (rank r: 11 + r); after each of the first 10, which every rank takes, a pause in
 * which the averaging thread runs a few rounds. bp_dp_finish returns OK on every
 * rank within a bound, and the replicas are closer together than the same steps
 * without averaging, both during training (at the start of step 11; this needs
 * rounds while training, not only the last round that bp_dp_finish ends with) and
 * at the end. */
#define ASYNC_COMMON 10

static uint64_t async_rounds(engine *e) {
    bp_stats st;
    bp_comm_stats(e->g, &st, false);
    return st.op[BP_OP_ASYNC_AVG].calls;
}

static void test_async(void **state) {
    (void)state;
    case_begin();
    bp_train_config c = gpt_config();
    c.dp_algo = BP_DP_ASYNC;
    bp_async_in(&c.dp_settings)->sync_ms = 1;
    int steps = ASYNC_COMMON + 1 + me;
    engine e;
    engine_init(&e, &c);
    size_t n = e.r.n;
    float *mid = floats(n);
    for (int s = 0; s < steps; s++) {
        engine_step_snapshot(&e, s == ASYNC_COMMON ? mid : NULL);
        if (s >= ASYNC_COMMON) continue; /* a rank may have stopped the rounds */
        /* Wait (up to 2 s, however loaded the machine) for three more rounds: the
         * second of them then has snapshot the weights after this step and updated
         * them. The count is what comm/ charges to the group per round. */
        uint64_t r0 = async_rounds(&e);
        double until = now_s() + 2.0;
        while (async_rounds(&e) < r0 + 3 && now_s() < until) usleep(200);
    }
    double t0 = now_s();
    int rc = bp_dp_finish(e.dp, &err);
    double took = now_s() - t0;
    if (rc != BP_OK) fprintf(stderr, "rank %d: bp_dp_finish: %s\n", me, err.msg);
    assert_true(all_ranks(rc == BP_OK));
    assert_true(max_over_ranks(took) < 5.0);
    double mid_avg = spread(mid, n), end_avg = spread(weights(&e.r), n);
    bp_dp_destroy(e.dp);
    bp_comm_destroy(e.g);
    replica_free(&e.r);

    /* The same local steps from the same start, never averaged: the reference has
     * no rule for async, so its steps stay local. */
    reference f;
    ref_init(&f, &c);
    for (int s = 0; s < steps; s++) {
        if (s == ASYNC_COMMON) memcpy(mid, weights(&f.r), n * sizeof *mid);
        ref_step(&f);
    }
    double mid_local = spread(mid, n), end_local = spread(weights(&f.r), n);
    ref_free(&f);
    free(mid);
    if (verbose && me == 0)
        printf("[%d ranks] async: spread after %d steps %.3g (without averaging %.3g), at the end "
               "%.3g (%.3g); finish took %.3g s\n",
               np, ASYNC_COMMON, mid_avg, mid_local, end_avg, end_local, took);
    assert_true(mid_local > 0 && end_local > 0);
    assert_true(mid_avg < 0.5 * mid_local);
    assert_true(end_avg < 0.5 * end_local);
}

/* --async-warmup 4, as Bagua's warmup_steps: the first 4 steps average the
 * gradients (the same bits as the allreduce engine on every rank) and no averaging
 * round runs; then the thread starts on every rank, rounds are counted, and the
 * replicas take local steps (no longer allreduce's weights). */
static void test_async_warmup(void **state) {
    (void)state;
    enum { WARMUP = 4 };
    case_begin();
    bp_train_config c = gpt_config(), a = gpt_config();
    c.dp_algo = BP_DP_ASYNC;
    bp_async_in(&c.dp_settings)->sync_ms = 1;
    bp_async_in(&c.dp_settings)->warmup = WARMUP;
    a.dp_algo = BP_DP_ALLREDUCE;
    engine e, ar;
    engine_init(&e, &c);
    engine_init(&ar, &a);
    size_t n = e.r.n;
    float *avg = malloc(n * sizeof *avg);
    for (int s = 1; s <= WARMUP + 3; s++) {
        engine_step(&e);
        engine_step(&ar);
        if (s < WARMUP) {
            expect_close("async warm-up vs allreduce", s, weights(&e.r), weights(&ar.r), n, EXACT);
            assert_true(all_ranks(async_rounds(&e) == 0));
        } else if (s > WARMUP) {
            /* The last warm-up step started the thread, which writes the weights under
             * the engine's lock: read them through the engine, which takes it. */
            ok(bp_dp_average_replicas(e.dp, avg, NULL, NULL, &err), "bp_dp_average_replicas");
            assert_false(all_ranks(memcmp(avg, weights(&ar.r), n * sizeof(float)) == 0));
        }
    }
    free(avg);
    double until = now_s() + 2.0; /* the thread runs its rounds between steps */
    while (async_rounds(&e) == 0 && now_s() < until) usleep(200);
    assert_true(all_ranks(async_rounds(&e) > 0));
    engine_free(&e);
    engine_free(&ar);
    case_end("async warm-up");
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_dp_reference: still running after 140 s; ending the job\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "MPI without MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Comm_dup(MPI_COMM_WORLD, &ref_comm);
    verbose = getenv("BP_DP_VERBOSE") && atoi(getenv("BP_DP_VERBOSE"));
    signal(SIGALRM, on_alarm);
    alarm(140);
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_gpt),
        cmocka_unit_test(test_allreduce_mlp),
        cmocka_unit_test(test_bytegrad_gpt),
        cmocka_unit_test(test_bytegrad_mlp),
        cmocka_unit_test(test_qadam_gpt),
        cmocka_unit_test(test_decentralized_shift_one),
        cmocka_unit_test(test_decentralized_all),
        cmocka_unit_test(test_decentralized_all_sgd),
        cmocka_unit_test(test_lp_decentralized),
        cmocka_unit_test(test_powersgd_gpt),
        cmocka_unit_test(test_powersgd_mlp),
        cmocka_unit_test(test_powersgd_min_rate),
        cmocka_unit_test(test_easgd),
        cmocka_unit_test(test_diloco),
        cmocka_unit_test(test_diloco_compressed),
        cmocka_unit_test(test_diloco_reduce_scatter),
        cmocka_unit_test(test_diloco_keep_residual),
        cmocka_unit_test(test_diloco_warmup),
        cmocka_unit_test(test_streaming_diloco),
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_early_update),
        cmocka_unit_test(test_hierarchical),
        cmocka_unit_test(test_grad_accum),
        cmocka_unit_test(test_async),
        cmocka_unit_test(test_async_warmup),
    };
    int failed = cmocka_run_group_tests_name("dp reference", tests, NULL, NULL);
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Comm_free(&ref_comm);
    MPI_Finalize();
    return any ? 1 : 0;
}
