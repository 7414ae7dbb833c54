/* Tensor-parallel gpt shards (the float build that training uses) against one
 * process: 2 and 4 shards, run as threads with a barrier allreduce (nn_tp.h), give
 * the loss, logits (or boundary output), input gradient and gradients of the model
 * without tensor parallelism, for the whole model and for pipeline-style ranges,
 * with exactly two allreduces per transformer block each way. Also: the shard
 * layout and initialization (a shard is the slice of the full tensor), tp size 1
 * bit for bit as before, configuration errors naming the field, and a failing
 * allreduce's status coming out of forward and backward. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "nn/model.h"
#include "nn_fixture.h"
#include "nn_test.h"
#include "nn_tp.h"

_Static_assert(sizeof(bp_real) == sizeof(float), "this test checks the float build");

/* Float against float with another summation order: observed ~1e-6 of the largest
 * element; a missing or doubled term of a sum shows at 1e-2 or more. */
#define TP_TOL 2e-5

static bp_model *make_full(bp_model_config cfg, int begin, int end) {
    bp_model *m = NULL;
    bp_err err;
    assert_int_equal(bp_model_create(&cfg, begin, end, &m, &err), BP_OK);
    return m;
}

/* GPT-2 initialization, then the 1-D tensors (biases, LayerNorms) moved off their
 * constants, so that a bias added on every rank (or by none) would show. */
static void init_full(bp_model *m, uint64_t seed) {
    bp_model_init_weights(m, seed);
    for (int i = 0; i < bp_model_num_tensors(m); i++) {
        const bp_tensor_info *t = bp_model_tensor(m, i);
        if (t->ndim != 1) continue;
        bp_real *p = bp_model_params(m) + t->offset, *noise = malloc(t->numel * sizeof *noise);
        nn_fill_normal(noise, t->numel, 0.05, seed + (uint64_t)i);
        for (size_t k = 0; k < t->numel; k++) p[k] += noise[k];
        free(noise);
    }
}

/* max |a - b| / max |b| */
static double rel_err(const bp_real *a, const bp_real *b, size_t n) {
    double d = 0, mx = 1e-30;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        mx = fmax(mx, fabs((double)b[i]));
    }
    return d / mx;
}

static void assert_close_rel(const bp_real *a, const bp_real *b, size_t n, const char *what,
                             double *worst) {
    double e = rel_err(a, b, n);
    *worst = fmax(*worst, e);
    if (e > TP_TOL) fail_msg("%s: relative error %.3g", what, e);
}

static int layers_in(const bp_model *m) {
    int L = bp_model_get_config(m)->n_layer, n = 0;
    for (int b = bp_model_block_begin(m); b < bp_model_block_end(m); b++) n += b >= 1 && b <= L;
    return n;
}

/* One forward and backward of the full model and of `size` shards of [begin, end). */
static void check_equivalence(bp_model_config cfg, int begin, int end, int size) {
    int B = 2, T = cfg.seq_len;
    bp_err err;
    bp_model *full = make_full(cfg, begin, end);
    init_full(full, 21);
    end = bp_model_block_end(full);
    tp_set s;
    assert_int_equal(tp_set_create(&s, cfg, begin, end, size, B, T), BP_OK);
    tp_set_load(&s, full);
    fx_batch fb;
    fx_batch_make(&fb, &cfg, B, T, 8);
    size_t nin = (size_t)B * T * cfg.n_embd,
           nout = bp_model_has_last(full) ? (size_t)B * T * cfg.vocab : (size_t)B * T * cfg.n_embd;
    bp_real *x_in = NULL, *dy = NULL, *dx = NULL;
    if (!bp_model_has_first(full)) {
        x_in = malloc(nin * sizeof *x_in);
        dx = malloc(nin * sizeof *dx);
        nn_fill_normal(x_in, nin, 1, 3);
    }
    if (!bp_model_has_last(full)) {
        dy = malloc(nout * sizeof *dy);
        nn_fill_normal(dy, nout, 0.01, 4);
    }
    bp_acts *a;
    double loss = 0;
    assert_int_equal(bp_acts_create(full, B, T, &a, &err), BP_OK);
    assert_int_equal(bp_model_forward(full, a, &fb.b, x_in, &loss, &err), BP_OK);
    assert_int_equal(bp_model_backward(full, a, &fb.b, dy, dx, 1, &err), BP_OK);

    /* Exactly two allreduces per transformer block in forward, two in backward. */
    int layers = layers_in(full);
    assert_int_equal(tp_set_forward(&s, &fb.b, x_in), BP_OK);
    for (int r = 0; r < size; r++) assert_int_equal(s.team.member[r].calls, 2 * layers);
    assert_int_equal(tp_set_backward(&s, &fb.b, dy), BP_OK);
    for (int r = 0; r < size; r++) assert_int_equal(s.team.member[r].calls, 4 * layers);

    double worst = 0;
    const bp_real *yf = bp_model_has_last(full) ? bp_acts_logits(a) : bp_acts_output(a);
    for (int r = 0; r < size; r++) {
        /* What is replicated comes out bit for bit the same on every rank. */
        const bp_real *y =
                          bp_model_has_last(full) ? bp_acts_logits(s.a[r]) : bp_acts_output(s.a[r]),
                      *y0 =
                          bp_model_has_last(full) ? bp_acts_logits(s.a[0]) : bp_acts_output(s.a[0]);
        assert_memory_equal(y, y0, nout * sizeof *y);
        assert_true(s.loss[r] == s.loss[0]);
        if (dx) assert_memory_equal(s.dx[r], s.dx[0], nin * sizeof *dx);
    }
    assert_true(fabs(s.loss[0] - loss) <= 1e-5 * fabs(loss));
    assert_close_rel(bp_model_has_last(full) ? bp_acts_logits(s.a[0]) : bp_acts_output(s.a[0]), yf,
                     nout, "logits/output", &worst);
    if (dx) assert_close_rel(s.dx[0], dx, nin, "boundary input gradient", &worst);

    /* Each shard's gradient is the slice of the full gradient; replicated tensors'
     * gradients are the full ones, the same bits on every rank. */
    for (int r = 0; r < size; r++) {
        for (int i = 0; i < bp_model_num_tensors(s.m[r]); i++) {
            const bp_tensor_info *t = bp_model_tensor(s.m[r], i),
                                 *f = bp_model_find_tensor(full, t->name);
            const bp_real *g = bp_model_grads(s.m[r]) + t->offset;
            if (t->split_dim < 0)
                assert_memory_equal(g, bp_model_grads(s.m[0]) + t->offset, t->numel * sizeof *g);
            bp_real *want = malloc(t->numel * sizeof *want);
            bp_tensor_shard_from_full(t, r, size, bp_model_grads(full) + f->offset, want);
            char what[96];
            snprintf(what, sizeof what, "%s (tp rank %d of %d)", t->name, r, size);
            assert_close_rel(g, want, t->numel, what, &worst);
            free(want);
        }
    }
    printf("tp %d, blocks [%d, %d): loss %.6f vs %.6f, worst relative difference %.2g\n", size,
           begin, end, s.loss[0], loss, worst);
    tp_set_destroy(&s);
    bp_acts_destroy(a);
    bp_model_destroy(full);
    fx_batch_free(&fb);
    free(x_in);
    free(dy);
    free(dx);
}

static void test_tp_equals_one_process(void **state) {
    (void)state;
    bp_model_config cfg = fx_gpt_default(); /* 4 heads, 4 layers: blocks 0..5 */
    cfg.seq_len = 16;
    const int ranges[][2] = {{0, -1}, {1, 3}, {3, -1}, {0, 2}};
    for (int size = 2; size <= 4; size += 2)
        for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++)
            check_equivalence(cfg, ranges[k][0], ranges[k][1], size);
}

/* ---- layout and initialization ---- */

static bp_status never_called(void *ctx, bp_real *x, size_t n) {
    (void)ctx, (void)x, (void)n;
    return BP_EINTERNAL;
}

static bp_model *make_shard(bp_model_config cfg, int begin, int end, int rank, int size) {
    bp_tp tp = {.rank = rank, .size = size, .allreduce_sum = never_called};
    bp_model *m = NULL;
    bp_err err;
    assert_int_equal(bp_model_create_tp(&cfg, begin, end, &tp, &m, &err), BP_OK);
    return m;
}

static void test_tp_tensor_info(void **state) {
    (void)state;
    bp_model_config cfg = fx_gpt_default();
    int C = cfg.n_embd, T = 2, A = C / T;
    bp_model *m = make_shard(cfg, 0, -1, 1, T), *full = make_full(cfg, 0, -1);
    const struct {
        const char *name;
        int split, groups, d0, d1;
    } want[] = {
        {"wte.weight", -1, 1, cfg.vocab, C},
        {"wpe.weight", -1, 1, cfg.seq_len, C},
        {"h.0.ln_1.weight", -1, 1, C, 0},
        {"h.0.attn.c_attn.weight", 0, 3, 3 * A, C},
        {"h.0.attn.c_attn.bias", 0, 3, 3 * A, 0},
        {"h.0.attn.c_proj.weight", 1, 1, C, A},
        {"h.0.attn.c_proj.bias", -1, 1, C, 0},
        {"h.3.ln_2.bias", -1, 1, C, 0},
        {"h.3.mlp.c_fc.weight", 0, 1, 4 * C / T, C},
        {"h.3.mlp.c_fc.bias", 0, 1, 4 * C / T, 0},
        {"h.3.mlp.c_proj.weight", 1, 1, C, 4 * C / T},
        {"h.3.mlp.c_proj.bias", -1, 1, C, 0},
        {"ln_f.weight", -1, 1, C, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const bp_tensor_info *t = bp_model_find_tensor(m, want[i].name),
                             *f = bp_model_find_tensor(full, want[i].name);
        assert_non_null(t);
        assert_int_equal(t->split_dim, want[i].split);
        assert_int_equal(t->split_groups, want[i].groups);
        assert_int_equal(t->shape[0], want[i].d0);
        if (want[i].d1) assert_int_equal(t->shape[1], want[i].d1);
        assert_int_equal(t->tp_rank, 1);
        assert_int_equal(t->tp_size, T);
        assert_memory_equal(t->full_shape, f->shape, sizeof t->full_shape);
        assert_int_equal(t->full_numel, f->numel);
        assert_int_equal(t->numel * (t->split_dim < 0 ? 1 : T), f->numel);
        /* Without tensor parallelism the split rule is there and the shard is whole. */
        assert_int_equal(f->split_dim, want[i].split);
        assert_int_equal(f->tp_size, 1);
        int shape[BP_TENSOR_MAX_DIM];
        assert_int_equal(bp_tensor_shard_shape(f, T, shape), t->numel);
        assert_memory_equal(shape, t->shape, (size_t)t->ndim * sizeof *shape);
    }
    size_t off = 0;
    for (int i = 0; i < bp_model_num_tensors(m); i++) {
        assert_int_equal(bp_model_tensor(m, i)->offset, off);
        off += bp_model_tensor(m, i)->numel;
    }
    assert_int_equal(off, bp_model_num_params(m));
    assert_int_equal(bp_model_tp_rank(m), 1);
    assert_int_equal(bp_model_tp_size(m), T);
    assert_int_equal(bp_model_tp_size(full), 1);
    /* A stage's copy of the tied embedding is replicated like wte itself. */
    bp_model *tail = make_shard(cfg, 3, -1, 0, T);
    const bp_tensor_info *copy = bp_model_find_tensor(tail, "wte.weight");
    assert_true(copy->tied_copy && copy->split_dim == -1 && copy->shape[0] == cfg.vocab);
    /* Activations and workspace: the split layers' parts are smaller per rank. */
    bp_acts *as, *af;
    bp_err err;
    assert_int_equal(bp_acts_create(m, 2, 64, &as, &err), BP_OK);
    assert_int_equal(bp_acts_create(full, 2, 64, &af, &err), BP_OK);
    assert_true(bp_acts_bytes(as) < bp_acts_bytes(af));
    bp_acts_destroy(as);
    bp_acts_destroy(af);
    bp_model_destroy(tail);
    bp_model_destroy(m);
    bp_model_destroy(full);
}

/* The slices written out with explicit indices: rank r holds rows g*C + r*A + j of
 * c_attn (q, k, v groups g), rows r*F + j of c_fc and columns r*K + j of a c_proj. */
static void check_layout(const bp_model *shard, const bp_model *full, int block, int r, int T) {
    const bp_model_config *c = bp_model_get_config(full);
    int C = c->n_embd, A = C / T, F = 4 * C / T;
    char name[64];
    const bp_real *ps = bp_model_params((bp_model *)shard), *pf = bp_model_params((bp_model *)full);
#define AT(m, p, suffix)                                                                           \
    (snprintf(name, sizeof name, "h.%d.%s", block - 1, suffix),                                    \
     p + bp_model_find_tensor(m, name)->offset)
    const bp_real *s = AT(shard, ps, "attn.c_attn.weight"), *f = AT(full, pf, "attn.c_attn.weight");
    for (int g = 0; g < 3; g++)
        for (int j = 0; j < A; j++)
            assert_memory_equal(s + (size_t)(g * A + j) * C, f + (size_t)(g * C + r * A + j) * C,
                                C * sizeof *s);
    s = AT(shard, ps, "attn.c_attn.bias"), f = AT(full, pf, "attn.c_attn.bias");
    for (int g = 0; g < 3; g++) assert_memory_equal(s + g * A, f + g * C + r * A, A * sizeof *s);
    s = AT(shard, ps, "mlp.c_fc.weight"), f = AT(full, pf, "mlp.c_fc.weight");
    assert_memory_equal(s, f + (size_t)r * F * C, (size_t)F * C * sizeof *s);
    const struct {
        const char *suffix;
        int K;
    } proj[] = {{"attn.c_proj.weight", A}, {"mlp.c_proj.weight", F}};
    for (int k = 0; k < 2; k++) {
        s = AT(shard, ps, proj[k].suffix), f = AT(full, pf, proj[k].suffix);
        int K = proj[k].K;
        for (int o = 0; o < C; o++)
            assert_memory_equal(s + (size_t)o * K, f + (size_t)o * K * T + r * K, K * sizeof *s);
    }
#undef AT
}

/* Initialized shards are the slices of the initialized full tensors, and the shards
 * of all ranks reassemble the full tensors exactly (every element once). */
static void test_tp_init_is_slice(void **state) {
    (void)state;
    bp_model_config cfg = fx_gpt_default();
    const int ranges[][2] = {{0, -1}, {2, 4}};
    for (int T = 2; T <= 4; T += 2) {
        for (size_t k = 0; k < 2; k++) {
            int begin = ranges[k][0], end = ranges[k][1];
            bp_model *full = make_full(cfg, begin, end), *sh[TP_MAX];
            bp_model_init_weights(full, 77);
            for (int r = 0; r < T; r++) {
                sh[r] = make_shard(cfg, begin, end, r, T);
                bp_model_init_weights(sh[r], 77);
                check_layout(sh[r], full, begin > 1 ? begin : 1, r, T);
            }
            for (int i = 0; i < bp_model_num_tensors(full); i++) {
                const bp_tensor_info *f = bp_model_tensor(full, i);
                bp_real *whole = malloc(f->numel * sizeof *whole);
                for (size_t e = 0; e < f->numel; e++) whole[e] = NAN;
                for (int r = 0; r < T; r++) {
                    const bp_tensor_info *t = bp_model_find_tensor(sh[r], f->name);
                    bp_tensor_shard_to_full(t, r, T, bp_model_params(sh[r]) + t->offset, whole);
                }
                assert_memory_equal(whole, bp_model_params(full) + f->offset,
                                    f->numel * sizeof *whole);
                free(whole);
            }
            for (int r = 0; r < T; r++) bp_model_destroy(sh[r]);
            bp_model_destroy(full);
        }
    }
}

/* ---- tp size 1 ---- */

static bp_status counting(void *ctx, bp_real *x, size_t n) {
    (void)x, (void)n;
    ++*(int *)ctx;
    return BP_OK;
}

/* bp_model_create_tp with size 1 is bp_model_create: the same bits, no allreduce. */
static void test_tp_size_one(void **state) {
    (void)state;
    bp_model_config cfg = fx_gpt_small();
    int calls = 0;
    bp_tp one = {.rank = 0, .size = 1, .allreduce_sum = counting, .ctx = &calls};
    bp_model *m[2] = {make_full(cfg, 0, -1), NULL};
    bp_err err;
    assert_int_equal(bp_model_create_tp(&cfg, 0, -1, &one, &m[1], &err), BP_OK);
    fx_batch fb;
    fx_batch_make(&fb, &cfg, 2, 8, 1);
    bp_acts *a[2];
    double loss[2];
    for (int k = 0; k < 2; k++) {
        bp_model_init_weights(m[k], 5);
        assert_int_equal(bp_acts_create(m[k], 2, 8, &a[k], &err), BP_OK);
        assert_int_equal(bp_model_forward(m[k], a[k], &fb.b, NULL, &loss[k], &err), BP_OK);
        assert_int_equal(bp_model_backward(m[k], a[k], &fb.b, NULL, NULL, 1, &err), BP_OK);
    }
    assert_int_equal(calls, 0);
    assert_true(loss[0] == loss[1]);
    assert_int_equal(bp_model_num_params(m[0]), bp_model_num_params(m[1]));
    assert_memory_equal(bp_model_grads(m[0]), bp_model_grads(m[1]),
                        bp_model_num_params(m[0]) * sizeof(bp_real));
    for (int k = 0; k < 2; k++) {
        bp_acts_destroy(a[k]);
        bp_model_destroy(m[k]);
    }
    fx_batch_free(&fb);
}

/* ---- errors ---- */

static void expect_usage(int rc, const bp_err *err, const char *needle) {
    assert_int_equal(rc, BP_EUSAGE);
    if (!strstr(err->msg, needle))
        fail_msg("message \"%s\" does not name \"%s\"", err->msg, needle);
}

static void test_tp_config_errors(void **state) {
    (void)state;
    bp_model_config gpt = fx_gpt_default(), mlp = fx_mlp_small(), bad = fx_gpt_default();
    bad.n_embd = -1;
    const struct {
        const bp_model_config *cfg;
        bp_tp tp;
        const char *needle;
    } cases[] = {
        {&gpt, {0, 3, never_called, NULL}, "n_head (4)"},
        {&gpt, {0, 8, never_called, NULL}, "n_head"},
        {&mlp, {0, 2, never_called, NULL}, "does not split mlp"},
        {&gpt, {0, 0, never_called, NULL}, "tp size (0)"},
        {&gpt, {2, 2, never_called, NULL}, "tp rank (2)"},
        {&gpt, {-1, 2, never_called, NULL}, "tp rank (-1)"},
        {&gpt, {0, 2, NULL, NULL}, "allreduce_sum"},
        {&bad, {0, 2, never_called, NULL}, "n_embd"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bp_err err;
        bp_model *m = (bp_model *)&err; /* must be reset to NULL */
        expect_usage(bp_model_create_tp(cases[i].cfg, 0, -1, &cases[i].tp, &m, &err), &err,
                     cases[i].needle);
        assert_null(m);
        if (cases[i].tp.rank == 0 && cases[i].tp.allreduce_sum)
            expect_usage(bp_model_tp_check(cases[i].cfg, cases[i].tp.size, &err), &err,
                         cases[i].needle);
    }
    bp_err err;
    assert_int_equal(bp_model_tp_check(&gpt, 4, &err), BP_OK);
    assert_int_equal(bp_model_tp_check(&mlp, 1, &err), BP_OK);
    bp_model *m;
    expect_usage(bp_model_create_tp(&gpt, 0, 9, &(bp_tp){0, 2, never_called, NULL}, &m, &err), &err,
                 "range");
}

/* A failing allreduce: its status comes out of forward (which then leaves no
 * activations to run backward on) and of backward, naming where it failed. */
static void test_tp_allreduce_failure(void **state) {
    (void)state;
    bp_model_config cfg = fx_gpt_small();
    tp_set s;
    fx_batch fb;
    fx_batch_make(&fb, &cfg, 2, 8, 2);
    assert_int_equal(tp_set_create(&s, cfg, 0, -1, 2, 2, 8), BP_OK);
    for (int r = 0; r < 2; r++) bp_model_init_weights(s.m[r], 3);
    s.team.fail_at = 3; /* h.1's attention projection */
    assert_int_equal(tp_set_forward(&s, &fb.b, NULL), BP_ECOMM);
    for (int r = 0; r < 2; r++)
        if (!strstr(s.err[r].msg, "h.1.attn.c_proj forward"))
            fail_msg("message \"%s\" does not say where", s.err[r].msg);
    assert_int_equal(tp_set_backward(&s, &fb.b, NULL), BP_EUSAGE);
    assert_non_null(strstr(s.err[0].msg, "no forward"));
    s.team.fail_at = 0;
    assert_int_equal(tp_set_forward(&s, &fb.b, NULL), BP_OK);
    s.team.fail_at = s.team.member[0].calls + 2; /* the second of h.1's backward */
    assert_int_equal(tp_set_backward(&s, &fb.b, NULL), BP_ECOMM);
    assert_non_null(strstr(s.err[1].msg, "h.1.attn.c_attn backward"));
    assert_non_null(strstr(s.err[1].msg, "tp rank 1 of 2"));
    tp_set_destroy(&s);
    fx_batch_free(&fb);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tp_equals_one_process), cmocka_unit_test(test_tp_tensor_info),
        cmocka_unit_test(test_tp_init_is_slice),      cmocka_unit_test(test_tp_size_one),
        cmocka_unit_test(test_tp_config_errors),      cmocka_unit_test(test_tp_allreduce_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
