/* Compressed backpropagation (Optimus-CC, docs/algorithms.md#optimus-cc) as the pipeline
 * runs it: bp_pipe on S ranks (one stage each, S = 2 to 4) against a reference
 * computed here.
 *
 * Every rank builds all S stages of a small gpt (with the pipeline's weights) and
 * replays the step by itself: forward through the stages, then, micro-batch by
 * micro-batch in the schedules' backward order (0..M-1 on every stage), backward
 * from the last stage down to the first. The gradient that stage s sends back goes
 * through a sender codec of its own (same shape, rank and seed as the pipeline's)
 * when the rule says it is compressed, and through a separate receiver codec's
 * decode; otherwise it is passed as it is. The rule: after the warm-up steps every
 * backward send is compressed, or with epilogue-only exactly the last S - s of
 * stage s's M sends of a step. With lazy error propagation the sender's codec is left alone between
 * micro-batches (and steps), without it its error is cleared before each encode.
 *
 * Each compressed send is checked here against PowerSGD's rule in double, with
 * state of its own (the error E and the warm-started Q of every link, Q's start
 * read back from a fresh codec):
 *   M = G + E (LEP; E is the error the previous compressed micro-batch left)
 *   M = G     (without LEP: the error is dropped, and the codec's E is zero)
 *   Q = orthonormalize(Q) (Optimus-CC's p2p compressor, before every use)
 *   P = orthonormalize(M Q); Q = M^T P; E = M - P Q^T
 * and the codec's wire [P][Q] and its kept error match; the sender keeps
 * M = P Q^T + E (its input plus the error before, against the decode of what it
 * sent plus the error after); the decode is P Q^T of the wire.
 *
 * The pipeline then runs the same steps (no optimizer: the weights stay, so both
 * see the same numbers) and each stage's accumulated gradient must equal the
 * replay's bit for bit: the receiver used exactly P Q^T of exactly what the rule
 * says the sender sent, with the error carried from micro-batch to micro-batch (and
 * from step to step) or dropped. The last stage's loss is equal too, and the
 * stage's counters say M backward sends per step of which M, S - s, or none were
 * compressed. The cases differ from one another (LEP against no LEP, compressed
 * against not), so a pipeline that followed another rule fails.
 *
 * Cases: off, LEP, no LEP, each with and without epilogue-only, under 1f1b, gpipe
 * and afp:1; and with 2 AvgPipe pipelines, whose micro-batches interleave in one
 * stream of 2M positions: each pipeline's replica has its own sender codec (seed +
 * j), so an error carries to that pipeline's next micro-batch only, and epilogue-
 * only compresses the last S - s sends of the whole stream. With a warm-up of one
 * step, step 0 sends every gradient whole (stage 0's gradient equals that of
 * compression off bit for bit) and step 1 compresses from an empty error. */
#include <math.h>
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bagpipe/comm.h"
#include "bagpipe/compress.h"
#include "nn/model.h"
#include "parallel/pipe.h"
#include "parallel/schedule.h"
#include "gram_schmidt_ref.h"

enum {
    MICRO = 4,  /* micro-batches per pipeline and step */
    MAX_N = 2,  /* AvgPipe: pipelines (replicas of each stage on one rank) */
    MB = 2,     /* rows of a micro-batch */
    T = 16,     /* sequence length: a boundary gradient is (MB*T) x C = 32 x 16 */
    C = 16,     /* channels */
    RANK = 3,   /* of the approximation: far from exact on a 32 x 16 matrix */
    STEPS = 2,  /* the error carries over from one step to the next */
    MAX_S = 8,
};
static const uint64_t SEED = 4321;

static bp_comm *world;
static int me, S;
static bool failed; /* this rank saw a mismatch (reported, then agreed on) */

static void mismatch(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mismatch(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rank %d: ", me);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failed = true;
}

static void assert_all_ranks_ok(void) {
    int ok = !failed, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    failed = false;
    assert_true(all);
}

/* --- the model, its stages and the data ------------------------------------------ */

static bp_model_config model_config(void) {
    return (bp_model_config){.kind = BP_MODEL_GPT, .vocab = 256, .n_layer = S, .n_embd = C,
                             .n_head = 2, .seq_len = T};
}

/* Blocks of stage s: [embed, h.0] | h.1 | ... | [h.(S-1), head]. */
static int first_block(int s) { return s == 0 ? 0 : s == S ? S + 2 : s + 1; }

static bp_model *stage_model(int s) {
    bp_model_config mc = model_config();
    bp_model *m = NULL;
    assert_int_equal(bp_model_create(&mc, first_block(s), first_block(s + 1), &m, NULL), BP_OK);
    bp_model_init_weights(m, SEED);
    return m;
}

/* Position v of a step's stream: micro-batch v / N of pipeline v % N. */
static int32_t tokens[STEPS][MAX_N * MICRO][MB * T], targets[STEPS][MAX_N * MICRO][MB * T];
static bp_batch batches[STEPS][MAX_N * MICRO];

static void make_data(void) {
    uint64_t z = 88172645463325252ull;
    for (int k = 0; k < STEPS; k++)
        for (int i = 0; i < MAX_N * MICRO; i++) {
            for (int j = 0; j < MB * T; j++) {
                z ^= z << 13, z ^= z >> 7, z ^= z << 17;
                tokens[k][i][j] = (int32_t)(z % 256);
                targets[k][i][j] = (int32_t)((z >> 20) % 256);
            }
            batches[k][i] = (bp_batch){.B = MB, .T = T, .tokens = tokens[k][i],
                                       .targets = targets[k][i]};
        }
}

/* --- PowerSGD in double ---------------------------------------------------------- */

typedef struct link_ref {
    size_t rows, cols;
    int r;
    double *q, *e, *p; /* cols x r, rows x cols, rows x r */
} link_ref;

/* The Q a fresh codec of this shape and seed starts from: project [I; 0] (rows >=
 * cols), whose P = M Q has Q in its first cols rows. */
static void initial_q(size_t rows, size_t cols, int r, uint64_t seed, double *q) {
    bp_codec *probe = NULL;
    assert_int_equal(bp_codec_powersgd_create(rows, cols, r, seed, &probe, NULL), BP_OK);
    float *eye = calloc(rows * cols, sizeof *eye), *p;
    assert_non_null(eye);
    for (size_t i = 0; i < cols; i++) eye[i * cols + i] = 1;
    size_t p_len;
    assert_int_equal(bp_powersgd_project(probe, eye, rows * cols, &p, &p_len, NULL), BP_OK);
    assert_int_equal(p_len, rows * (size_t)r);
    for (size_t i = 0; i < cols * (size_t)r; i++) q[i] = p[i];
    free(eye);
    bp_codec_destroy(probe);
}

static void link_init(link_ref *l, size_t rows, size_t cols, int r, uint64_t seed) {
    *l = (link_ref){.rows = rows, .cols = cols, .r = r};
    l->q = calloc(cols * (size_t)r, sizeof *l->q);
    l->e = calloc(rows * cols, sizeof *l->e);
    l->p = calloc(rows * (size_t)r, sizeof *l->p);
    assert_true(l->q && l->e && l->p);
    initial_q(rows, cols, r, seed, l->q);
}

static void link_free(link_ref *l) {
    free(l->q), free(l->e), free(l->p);
}

/* One compressed send of gradient g, as Optimus-CC's p2p compressor: Q
 * orthonormalized (its first random draw or the previous send's); M = g (+ E with
 * LEP); P = M Q, orthonormalized; Q = M^T P; E = M - P Q^T. */
static void link_step(link_ref *l, const float *g, bool lep) {
    size_t R = l->rows, K = l->cols, r = (size_t)l->r;
    double *m = l->e; /* M overwrites E, then becomes the new E */
    orthonormalize_ref(l->q, K, r);
    for (size_t i = 0; i < R * K; i++) m[i] = (lep ? m[i] : 0.0) + g[i];
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < r; j++) {
            double s = 0;
            for (size_t k = 0; k < K; k++) s += m[i * K + k] * l->q[k * r + j];
            l->p[i * r + j] = s;
        }
    orthonormalize_ref(l->p, R, r);
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < r; j++) {
            double s = 0;
            for (size_t i = 0; i < R; i++) s += m[i * K + k] * l->p[i * r + j];
            l->q[k * r + j] = s;
        }
    for (size_t i = 0; i < R; i++)
        for (size_t k = 0; k < K; k++) {
            double s = 0;
            for (size_t j = 0; j < r; j++) s += l->p[i * r + j] * l->q[k * r + j];
            m[i * K + k] -= s;
        }
}

/* got (float) against want (double): within tol of want's largest magnitude. */
static void expect_close(const char *what, const float *got, const double *want, size_t n,
                         double tol) {
    double scale = 0, worst = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= worst)) worst = d;
    }
    if (!(worst <= tol * scale + 1e-12))
        mismatch("%s off by %.3g (largest value %.3g)", what, worst, scale);
}

/* --- the replay of one step ----------------------------------------------------- */

typedef struct cb_case {
    const char *name;
    const char *schedule;
    int cb_rank; /* 0: compression off */
    bool lep, epilogue_only;
    int N; /* AvgPipe pipelines */
    int warmup; /* steps that send every gradient whole first */
} cb_case;

/* Whether stage s's backward send b (of the N * MICRO of a step) is compressed in
 * step `step`. */
static bool rule(const cb_case *c, int step, int s, int b) {
    return c->cb_rank > 0 && step >= c->warmup && (!c->epilogue_only || b >= c->N * MICRO - (S - s));
}

/* Each pipeline j has its own replica of every stage and its own sender codecs (the
 * error of one replica's gradients is not another's). */
typedef struct replay {
    bp_model *stage[MAX_N][MAX_S];
    bp_acts *acts[MAX_S][MAX_N * MICRO];
    bp_codec *sender[MAX_N][MAX_S]; /* stage s's, for s > 0 */
    bp_codec *receiver;             /* decoding needs the shape only */
    link_ref ref[MAX_N][MAX_S];
    float *dx, *dy, *wire, *e_before, *decoded;
    size_t n; /* floats of a boundary gradient */
} replay;

static void replay_init(replay *rp, const cb_case *c) {
    memset(rp, 0, sizeof *rp);
    size_t rows = MB * T;
    rp->n = rows * C;
    for (int j = 0; j < c->N; j++)
        for (int s = 0; s < S; s++) {
            rp->stage[j][s] = stage_model(s);
            for (int v = j; v < c->N * MICRO; v += c->N)
                assert_int_equal(bp_acts_create(rp->stage[j][s], MB, T, &rp->acts[s][v], NULL),
                                 BP_OK);
            if (s > 0 && c->cb_rank > 0) {
                /* The pipeline seeds the codec of its replica j with seed + j. */
                uint64_t seed = SEED + (uint64_t)j;
                assert_int_equal(
                    bp_codec_powersgd_create(rows, C, c->cb_rank, seed, &rp->sender[j][s], NULL), BP_OK);
                link_init(&rp->ref[j][s], rows, C, c->cb_rank, seed);
            }
        }
    if (c->cb_rank > 0)
        assert_int_equal(bp_codec_powersgd_create(rows, C, c->cb_rank, 99, &rp->receiver, NULL), BP_OK);
    size_t wire = (rows + C) * (size_t)(c->cb_rank > 0 ? c->cb_rank : 1);
    rp->dx = calloc(rp->n, sizeof(float));
    rp->dy = calloc(rp->n, sizeof(float));
    rp->wire = calloc(wire, sizeof(float));
    rp->e_before = calloc(rp->n, sizeof(float));
    rp->decoded = calloc(rp->n, sizeof(float));
    assert_true(rp->dx && rp->dy && rp->wire && rp->e_before && rp->decoded);
}

static void replay_free(replay *rp) {
    for (int s = 0; s < S; s++)
        for (int v = 0; v < MAX_N * MICRO; v++) bp_acts_destroy(rp->acts[s][v]);
    for (int j = 0; j < MAX_N; j++)
        for (int s = 0; s < S; s++) {
            bp_model_destroy(rp->stage[j][s]);
            if (rp->sender[j][s]) link_free(&rp->ref[j][s]);
            bp_codec_destroy(rp->sender[j][s]);
        }
    bp_codec_destroy(rp->receiver);
    free(rp->dx), free(rp->dy), free(rp->wire), free(rp->e_before), free(rp->decoded);
}

/* Stage s of pipeline j compresses its gradient rp->dx (send b of the step) into
 * rp->dy, checking the codec against the rule. */
static void compress_send(replay *rp, const cb_case *c, int j, int s, int step, int b) {
    bp_codec *enc = rp->sender[j][s];
    link_ref *l = &rp->ref[j][s];
    size_t n = rp->n, r = (size_t)bp_powersgd_rank(enc);
    char what[96];
    if (!c->lep) bp_powersgd_clear_error(enc);
    memcpy(rp->e_before, bp_powersgd_error(enc), n * sizeof(float));
    if (!c->lep)
        for (size_t i = 0; i < n; i++)
            if (rp->e_before[i] != 0) {
                mismatch("%s: stage %d step %d send %d: error not dropped", c->name, s, step, b);
                break;
            }
    assert_int_equal(bp_powersgd_orthogonalize_q(enc, NULL), BP_OK);
    assert_int_equal(bp_codec_encode(enc, rp->dx, n, rp->wire, NULL), BP_OK);
    assert_int_equal(bp_codec_decode(rp->receiver, rp->wire, n, rp->decoded, NULL), BP_OK);
    link_step(l, rp->dx, c->lep);
    const float *p = rp->wire, *q = rp->wire + l->rows * r;
    snprintf(what, sizeof what, "%s: stage %d step %d send %d: P", c->name, s, step, b);
    expect_close(what, p, l->p, l->rows * r, 1e-4);
    snprintf(what, sizeof what, "%s: stage %d step %d send %d: Q", c->name, s, step, b);
    expect_close(what, q, l->q, l->cols * r, 1e-4);
    snprintf(what, sizeof what, "%s: stage %d step %d send %d: kept error E", c->name, s, step, b);
    expect_close(what, bp_powersgd_error(enc), l->e, n, 1e-4);
    /* The sender keeps M = P Q^T + E: G + E_before = decode(wire) + E_after. */
    const float *e = bp_powersgd_error(enc);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        double m = (double)rp->dx[i] + rp->e_before[i];
        scale = fmax(scale, fabs(m));
        worst = fmax(worst, fabs(m - ((double)rp->decoded[i] + e[i])));
    }
    if (!(worst <= 1e-6 * scale))
        mismatch("%s: stage %d step %d send %d: M - (P Q^T + E) = %.3g (|M| %.3g)", c->name, s,
                 step, b, worst, scale);
    /* The receiver's decode is P Q^T of the wire. */
    double pq_worst = 0, pq_scale = 0;
    for (size_t i = 0; i < l->rows; i++)
        for (size_t k = 0; k < l->cols; k++) {
            double v = 0;
            for (size_t x = 0; x < r; x++) v += (double)p[i * r + x] * q[k * r + x];
            pq_scale = fmax(pq_scale, fabs(v));
            pq_worst = fmax(pq_worst, fabs(v - rp->decoded[i * l->cols + k]));
        }
    if (!(pq_worst <= 1e-6 * pq_scale))
        mismatch("%s: stage %d step %d send %d: decode differs from P Q^T by %.3g", c->name, s,
                 step, b, pq_worst);
    /* The receiver sees exactly the decode; drop it into dy. */
    memcpy(rp->dy, rp->decoded, n * sizeof(float));
}

/* One step of the replay over the stream's positions v (pipeline v % N); *loss:
 * mean over all of them, summed in order. Each micro-batch's loss is scaled by
 * 1 / MICRO, so that a pipeline's gradient is that of its mean loss. */
static void replay_step(replay *rp, const cb_case *c, int step, double *loss) {
    const bp_real scale = (bp_real)(1.0 / MICRO);
    int V = c->N * MICRO;
    double sum = 0;
    for (int j = 0; j < c->N; j++)
        for (int s = 0; s < S; s++) bp_model_zero_grad(rp->stage[j][s]);
    for (int v = 0; v < V; v++)
        for (int s = 0; s < S; s++) {
            double l = 0;
            const bp_real *x = s > 0 ? bp_acts_output(rp->acts[s - 1][v]) : NULL;
            assert_int_equal(bp_model_forward(rp->stage[v % c->N][s], rp->acts[s][v],
                                              &batches[step][v], x, &l, NULL),
                             BP_OK);
            if (s == S - 1) sum += l;
        }
    for (int v = 0; v < V; v++)
        for (int s = S - 1; s >= 0; s--) {
            assert_int_equal(bp_model_backward(rp->stage[v % c->N][s], rp->acts[s][v],
                                               &batches[step][v], s < S - 1 ? rp->dy : NULL,
                                               s > 0 ? rp->dx : NULL, scale, NULL),
                             BP_OK);
            if (s == 0) continue;
            if (rule(c, step, s, v))
                compress_send(rp, c, v % c->N, s, step, v);
            else
                memcpy(rp->dy, rp->dx, rp->n * sizeof(float));
        }
    *loss = sum / V;
}

/* --- the pipeline against the replay -------------------------------------------- */

/* Stage 0's gradient (pipeline 0) after each step of each case, to tell the cases
 * apart. */
static float *first_grads[16][STEPS];
static size_t first_n;

/* One step's schedule on this stage, forward and backward, as the training step
 * runs it; *loss: the mean over the micro-batches on the last stage. */
static bp_status run_step(bp_pipe *pipe, int64_t step, const bp_batch *micro, double *loss,
                          bp_err *err) {
    const bp_pipe_op *ops;
    int n;
    double sum = 0;
    bp_status rc = bp_pipe_begin(pipe, 1, step, &ops, &n, err);
    for (int i = 0; rc == BP_OK && i < n; i++) {
        double l = 0;
        int v = ops[i].micro;
        rc = ops[i].forward ? bp_pipe_forward(pipe, &micro[v], v, &l, err)
                            : bp_pipe_backward(pipe, &micro[v], v, err);
        sum += l;
    }
    *loss = sum / bp_pipe_positions(pipe);
    return rc;
}

static void run_case(const cb_case *c, int index) {
    replay rp;
    replay_init(&rp, c);
    bp_model *mine[MAX_N];
    for (int j = 0; j < c->N; j++) mine[j] = stage_model(me);
    bp_schedule sched;
    assert_int_equal(bp_schedule_parse(c->schedule, &sched, NULL), BP_OK);
    bp_occ_config cb = {.cb_rank = c->cb_rank, .lep = c->lep, .epilogue_only = c->epilogue_only,
                        .cb_warmup_steps = c->warmup, .seed = SEED};
    bp_pipe *pipe = NULL;
    bp_err err = {0};
    int rc = bp_pipe_create(world, mine, c->N, &sched, MICRO, 1, false, MB, T, &cb, &pipe, &err);
    if (rc) fprintf(stderr, "rank %d: %s\n", me, err.msg);
    assert_int_equal(rc, BP_OK);
    size_t n = bp_model_num_params(mine[0]);
    for (int step = 0; step < STEPS; step++) {
        double want_loss, loss;
        replay_step(&rp, c, step, &want_loss);
        for (int j = 0; j < c->N; j++) bp_model_zero_grad(mine[j]);
        rc = run_step(pipe, step, batches[step], &loss, &err);
        if (rc) fprintf(stderr, "rank %d: %s\n", me, err.msg);
        assert_int_equal(rc, BP_OK);
        for (int j = 0; j < c->N; j++) {
            const bp_real *got = bp_model_grads(mine[j]), *want = bp_model_grads(rp.stage[j][me]);
            if (memcmp(got, want, n * sizeof *got) == 0) continue;
            size_t i = 0;
            while (got[i] == want[i]) i++;
            mismatch("%s: stage %d (pipeline %d) step %d: gradient differs from the replay "
                     "(first at %zu: %.9g vs %.9g)",
                     c->name, me, j, step, i, (double)got[i], (double)want[i]);
        }
        if (me == S - 1 && loss != want_loss)
            mismatch("%s: step %d: loss %.9g, replay %.9g", c->name, step, loss, want_loss);
        bp_pipe_stats st;
        bp_pipe_stats_take(pipe, &st);
        long want_sends = me > 0 ? c->N * MICRO : 0, want_comp = 0;
        for (int b = 0; me > 0 && b < c->N * MICRO; b++) want_comp += rule(c, step, me, b);
        if (st.cb_sends != want_sends || st.cb_compressed != want_comp)
            mismatch("%s: stage %d step %d: %ld backward sends, %ld compressed; expected %ld, %ld",
                     c->name, me, step, st.cb_sends, st.cb_compressed, want_sends, want_comp);
        if (me == 0) {
            first_n = n;
            first_grads[index][step] = malloc(n * sizeof(float));
            assert_non_null(first_grads[index][step]);
            memcpy(first_grads[index][step], bp_model_grads(mine[0]), n * sizeof(float));
        }
    }
    bp_pipe_destroy(pipe);
    for (int j = 0; j < c->N; j++) bp_model_destroy(mine[j]);
    replay_free(&rp);
    assert_all_ranks_ok();
}

static const cb_case CASES[] = {
    {"off", "1f1b", 0, true, false, 1, 0},
    {"lep", "1f1b", RANK, true, false, 1, 0},
    {"no-lep", "1f1b", RANK, false, false, 1, 0},
    {"lep-epilogue", "1f1b", RANK, true, true, 1, 0},
    {"no-lep-epilogue", "1f1b", RANK, false, true, 1, 0},
    {"lep-gpipe", "gpipe", RANK, true, false, 1, 0},
    {"lep-epilogue-afp1", "afp:1", RANK, true, true, 1, 0},
    {"lep-2-pipelines", "1f1b", RANK, true, false, 2, 0},
    {"lep-epilogue-2-pipelines", "gpipe", RANK, true, true, 2, 0},
    {"lep-warmup-1", "1f1b", RANK, true, false, 1, 1},
};
enum { OFF_CASE = 0, LEP_CASE = 1, WARMUP_CASE = 9 };
#define NCASES (int)(sizeof CASES / sizeof CASES[0])

static void test_cases(void **state) {
    (void)state;
    for (int k = 0; k < NCASES; k++) run_case(&CASES[k], k);
}

/* Relative difference of stage 0's gradients after a step of two cases. */
static double apart(int a, int b, int step) {
    double d = 0, m = 0;
    for (size_t i = 0; i < first_n; i++) {
        d = fmax(d, fabs((double)first_grads[a][step][i] - first_grads[b][step][i]));
        m = fmax(m, fabs((double)first_grads[a][step][i]));
    }
    return d / m;
}

/* The cases are told apart: once an error was left behind LEP and no LEP send
 * other gradients, compressing every send or the epilogue only differ, and
 * compressed differs from uncompressed; so a pipeline that followed another
 * case's rule could not have matched its replay. (Stage 0's gradient, which
 * depends on every link's sends.) */
static void test_cases_differ(void **state) {
    (void)state;
    if (me == 0) {
        const int pairs[][2] = {{0, 1}, {1, 2}, {1, 3}, {3, 4}, {0, 3}};
        for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
            for (int step = 0; step < STEPS; step++) {
                double d = apart(pairs[k][0], pairs[k][1], step);
                printf("stage 0 gradient, %s vs %s, step %d: relative difference %.3g\n",
                       CASES[pairs[k][0]].name, CASES[pairs[k][1]].name, step, d);
                /* With epilogue-only on 2 stages the first step compresses one send,
                 * which has no error before it: LEP shows from the second step on. */
                if (step == STEPS - 1 && !(d > 1e-3))
                    mismatch("%s and %s are not told apart at step %d (%.3g)",
                             CASES[pairs[k][0]].name, CASES[pairs[k][1]].name, step, d);
            }
        /* The warm-up step sends whole gradients, as without compression; the next
         * one compresses, from an empty error (so it differs from LEP's second). */
        double warm = apart(WARMUP_CASE, OFF_CASE, 0), after = apart(WARMUP_CASE, LEP_CASE, 1);
        printf("stage 0 gradient, %s vs off at step 0: %.3g; vs lep at step 1: %.3g\n",
               CASES[WARMUP_CASE].name, warm, after);
        if (warm != 0)
            mismatch("%s: step 0 differs from off (%.3g)", CASES[WARMUP_CASE].name, warm);
        if (!(after > 1e-3) || !(apart(WARMUP_CASE, OFF_CASE, 1) > 1e-3))
            mismatch("%s: step 1 not told apart from lep and off", CASES[WARMUP_CASE].name);
        for (int k = 0; k < NCASES; k++)
            for (int step = 0; step < STEPS; step++) free(first_grads[k][step]);
    }
    assert_all_ranks_ok();
}

int main(int argc, char **argv) {
    bp_err err;
    if (bp_comm_init(&argc, &argv, &world, &err) != BP_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    me = bp_comm_rank(world);
    S = bp_comm_size(world);
    if (S < 2 || S > MAX_S || MICRO < S - 1) {
        fprintf(stderr, "run on 2 to %d ranks\n", MAX_S);
        bp_comm_finalize(world);
        return 1;
    }
    bp_comm_set_timeout(world, 30);
    make_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_cases_differ),
    };
    int fails = _cmocka_run_group_tests("occ_cb", tests, sizeof tests / sizeof tests[0], NULL, NULL);
    int any = 0;
    MPI_Allreduce(&fails, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bp_comm_finalize(world) != BP_OK) return 1;
    return any ? 1 : 0;
}
