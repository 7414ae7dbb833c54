/* nn/ models (double build): tensor table in PyTorch layout, initialization rules and
 * determinism, block ranges that reproduce the full model (what pipeline parallelism
 * relies on), causality, gradient accumulation, and rejection of bad configurations
 * and batches with a message that names the culprit. */
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

static bp_model *make(bp_model_config cfg, int begin, int end, uint64_t seed) {
    bp_model *m = NULL;
    bp_err err;
    assert_int_equal(bp_model_create(&cfg, begin, end, &m, &err), BP_OK);
    bp_model_init_weights(m, seed);
    return m;
}

static const bp_real *param(bp_model *m, const char *name) {
    const bp_tensor_info *t = bp_model_find_tensor(m, name);
    assert_non_null(t);
    return bp_model_params(m) + t->offset;
}

/* ---- model facts: what the layers above use instead of knowing the kinds ---- */

/* The facts agree with the models built: the tied tensor is the one the first and
 * last blocks share, the input and output widths are the boundaries'. */
static void test_model_facts(void **state) {
    (void)state;
    bp_model_config gpt, mlp;
    bp_model_config_init(&gpt, BP_MODEL_GPT);
    bp_model_config_init(&mlp, BP_MODEL_MLP);
    assert_int_equal(gpt.vocab, 256);
    assert_int_equal(mlp.in_dim, 784);
    assert_int_equal(mlp.n_class, 10);
    gpt = fx_gpt_small(), mlp = fx_mlp_default();
    bp_model *m = make(gpt, 0, -1, 1), *last = make(gpt, 1, -1, 1);
    assert_string_equal(bp_model_tied_tensor(&gpt), bp_model_tensor(m, 0)->name);
    assert_non_null(bp_model_find_tensor(last, bp_model_tied_tensor(&gpt)));
    assert_true(bp_model_find_tensor(last, bp_model_tied_tensor(&gpt))->tied_copy);
    assert_null(bp_model_tied_tensor(&mlp));
    assert_int_equal(bp_model_sample_len(&gpt), gpt.seq_len);
    assert_int_equal(bp_model_input_width(&gpt), 0);
    assert_int_equal(bp_model_num_classes(&gpt), gpt.vocab);
    assert_int_equal(bp_model_sample_len(&mlp), 1);
    assert_int_equal(bp_model_input_width(&mlp), bp_model_boundary_width(&mlp, 0));
    assert_int_equal(bp_model_num_classes(&mlp),
                     bp_model_boundary_width(&mlp, bp_model_num_blocks(&mlp)));
    bp_model_destroy(m);
    bp_model_destroy(last);
}

/* Every kind of the registry parses back from its name, declares facts that agree
 * with its models, and keeps only its own fields; an unknown name is refused with the
 * known ones. */
static void test_kind_registry(void **state) {
    (void)state;
    for (int k = 0; k < BP_MODEL_NUM_KINDS; k++) {
        const bp_model_facts *f = bp_model_kind_facts((bp_model_kind)k);
        bp_model_kind back = BP_MODEL_NUM_KINDS;
        assert_int_equal(bp_model_kind_parse(f->name, &back, NULL), BP_OK);
        assert_int_equal(back, k);
        assert_string_equal(bp_model_kind_name((bp_model_kind)k), f->name);
        assert_non_null(strstr(BP_MODEL_KIND_CHOICES, f->name));
        bp_model_config c;
        bp_model_config_init(&c, (bp_model_kind)k);
        assert_int_equal(f->reads_tokens, bp_model_input_width(&c) == 0);
        c.vocab = c.n_layer = c.n_embd = c.n_head = c.seq_len = 7;
        c.in_dim = c.hidden = c.n_hidden = c.n_class = 7;
        bp_model_config_trim(&c);
        const int kept[] = {c.vocab, c.n_layer, c.n_embd, c.n_head, c.seq_len,
                            c.in_dim, c.hidden, c.n_hidden, c.n_class};
        int own = 0;
        for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) own += kept[i] == 7;
        assert_int_equal(own, f->n_shape);
    }
    assert_null(bp_model_kind_facts(BP_MODEL_NUM_KINDS));
    bp_model_kind kind;
    bp_err err;
    assert_int_equal(bp_model_kind_parse("rnn", &kind, &err), BP_EFORMAT);
    char want[128];
    snprintf(want, sizeof want, "unknown model 'rnn' (known: %s)", BP_MODEL_KIND_CHOICES);
    assert_string_equal(err.msg, want);
}

/* The simulator's activation bytes are what bp_acts_create allocates, for whole
 * models and for a middle range. */
static void test_act_bytes_match_acts(void **state) {
    (void)state;
    const bp_model_config cfgs[] = {fx_gpt_small(), fx_mlp_default()};
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        int n = bp_model_num_blocks(&cfgs[i]), B = 3, T = bp_model_sample_len(&cfgs[i]);
        const int ranges[][2] = {{0, n}, {1, n - 1}, {1, n}};
        for (size_t r = 0; r < 3; r++) {
            bp_model *m = make(cfgs[i], ranges[r][0], ranges[r][1], 1);
            bp_acts *a = NULL;
            assert_int_equal(bp_acts_create(m, B, T, &a, NULL), BP_OK);
            assert_int_equal(bp_model_act_bytes(&cfgs[i], 1, ranges[r][0], ranges[r][1], B, T),
                             bp_acts_bytes(a));
            bp_acts_destroy(a);
            bp_model_destroy(m);
        }
    }
}

/* ---- tensor table ---- */

static void test_gpt_tensor_table(void **state) {
    (void)state;
    bp_model_config cfg = fx_gpt_small();
    bp_model *m = make(cfg, 0, -1, 1);
    int C = cfg.n_embd, L = cfg.n_layer;
    assert_int_equal(bp_model_num_blocks(&cfg), L + 2);
    assert_int_equal(bp_model_num_tensors(m), 2 + 12 * L + 2);
    const struct {
        const char *name;
        int d0, d1, block;
    } want[] = {
        {"wte.weight", cfg.vocab, C, 0},       {"wpe.weight", cfg.seq_len, C, 0},
        {"h.0.ln_1.weight", C, 0, 1},          {"h.0.attn.c_attn.weight", 3 * C, C, 1},
        {"h.0.attn.c_attn.bias", 3 * C, 0, 1}, {"h.0.attn.c_proj.weight", C, C, 1},
        {"h.1.mlp.c_fc.weight", 4 * C, C, 2},  {"h.1.mlp.c_proj.weight", C, 4 * C, 2},
        {"h.1.mlp.c_proj.bias", C, 0, 2},      {"ln_f.bias", C, 0, L + 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const bp_tensor_info *t = bp_model_find_tensor(m, want[i].name);
        assert_non_null(t);
        assert_int_equal(t->ndim, want[i].d1 ? 2 : 1);
        assert_int_equal(t->shape[0], want[i].d0);
        if (want[i].d1) assert_int_equal(t->shape[1], want[i].d1);
        assert_int_equal(t->block, want[i].block);
        assert_false(t->tied_copy);
    }
    /* Forward order, contiguous, covering the flat buffer exactly. */
    size_t off = 0;
    for (int i = 0; i < bp_model_num_tensors(m); i++) {
        const bp_tensor_info *t = bp_model_tensor(m, i);
        assert_int_equal(t->offset, off);
        off += t->numel;
        if (i > 0) assert_true(t->block >= bp_model_tensor(m, i - 1)->block);
    }
    assert_int_equal(off, bp_model_num_params(m));
    assert_null(bp_model_find_tensor(m, "lm_head.weight")); /* tied: no separate head */
    char buf[32];
    assert_string_equal(bp_model_block_name(&cfg, 0, buf, sizeof buf), "embed");
    assert_string_equal(bp_model_block_name(&cfg, 2, buf, sizeof buf), "h.1");
    assert_string_equal(bp_model_block_name(&cfg, L + 1, buf, sizeof buf), "head");
    bp_model_destroy(m);
}

static void test_ranges_and_tied_copy(void **state) {
    (void)state;
    bp_model_config cfg = fx_gpt_small();
    bp_model *tail = make(cfg, 2, -1, 1), *mid = make(cfg, 1, 3, 1), *emb = make(cfg, 0, 1, 1);
    assert_false(bp_model_has_first(tail));
    assert_true(bp_model_has_last(tail));
    assert_false(bp_model_has_first(mid) || bp_model_has_last(mid));
    assert_true(bp_model_has_first(emb) && !bp_model_has_last(emb));
    const bp_tensor_info *copy = bp_model_find_tensor(tail, "wte.weight");
    assert_non_null(copy);
    assert_true(copy->tied_copy);
    assert_int_equal(copy->block, cfg.n_layer + 1);
    assert_ptr_equal(copy, bp_model_tensor(tail, bp_model_num_tensors(tail) - 1));
    assert_null(bp_model_find_tensor(mid, "wte.weight"));
    assert_null(bp_model_find_tensor(tail, "h.0.ln_1.weight"));
    assert_non_null(bp_model_find_tensor(tail, "h.1.ln_1.weight"));
    assert_int_equal(bp_model_boundary_width(&cfg, 2), cfg.n_embd);
    bp_model_destroy(tail);
    bp_model_destroy(mid);
    bp_model_destroy(emb);
}

static void test_mlp_tensor_table(void **state) {
    (void)state;
    bp_model_config cfg = fx_mlp_default();
    bp_model *m = make(cfg, 0, -1, 1);
    assert_int_equal(bp_model_num_blocks(&cfg), 3);
    assert_int_equal(bp_model_num_tensors(m), 6);
    const bp_tensor_info *fc1 = bp_model_find_tensor(m, "fc1.weight"),
                         *fc2 = bp_model_find_tensor(m, "fc2.bias"),
                         *out = bp_model_find_tensor(m, "fc_out.weight");
    assert_non_null(fc1);
    assert_non_null(fc2);
    assert_non_null(out);
    assert_int_equal(fc1->shape[0], 256);
    assert_int_equal(fc1->shape[1], 784);
    assert_int_equal(fc2->shape[0], 256);
    assert_int_equal(out->shape[0], 10);
    assert_int_equal(out->shape[1], 256);
    assert_int_equal(bp_model_num_params(m), 784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10);
    assert_int_equal(bp_model_boundary_width(&cfg, 0), 784);
    assert_int_equal(bp_model_boundary_width(&cfg, 2), 256);
    assert_int_equal(bp_model_boundary_width(&cfg, 3), 10);
    char buf[32];
    assert_string_equal(bp_model_block_name(&cfg, 2, buf, sizeof buf), "fc_out");
    bp_model_destroy(m);
}

/* ---- initialization ---- */

static void moments(const bp_real *x, size_t n, double *mean, double *std) {
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        s2 += (double)x[i] * x[i];
    }
    *mean = s / n;
    *std = sqrt(s2 / n - *mean * *mean);
}

static void assert_tensor_std(bp_model *m, const char *name, double want) {
    const bp_tensor_info *t = bp_model_find_tensor(m, name);
    assert_non_null(t);
    double mean, std;
    moments(bp_model_params(m) + t->offset, t->numel, &mean, &std);
    if (fabs(std / want - 1) > 0.05 || fabs(mean) > 0.1 * want)
        fail_msg("%s: mean %g std %g, want std %g", name, mean, std, want);
}

static void assert_tensor_const(bp_model *m, const char *name, double v) {
    const bp_tensor_info *t = bp_model_find_tensor(m, name);
    assert_non_null(t);
    for (size_t i = 0; i < t->numel; i++) assert_true(bp_model_params(m)[t->offset + i] == v);
}

static void test_gpt_init_statistics(void **state) {
    (void)state;
    bp_model_config cfg = fx_gpt_default();
    bp_model *m = make(cfg, 0, -1, 1234);
    double proj = 0.02 / sqrt(2.0 * cfg.n_layer);
    assert_tensor_std(m, "wte.weight", 0.02);
    assert_tensor_std(m, "wpe.weight", 0.02);
    assert_tensor_std(m, "h.0.attn.c_attn.weight", 0.02);
    assert_tensor_std(m, "h.3.mlp.c_fc.weight", 0.02);
    assert_tensor_std(m, "h.0.attn.c_proj.weight", proj);
    assert_tensor_std(m, "h.2.mlp.c_proj.weight", proj);
    assert_tensor_const(m, "h.1.ln_1.weight", 1);
    assert_tensor_const(m, "h.1.ln_2.bias", 0);
    assert_tensor_const(m, "h.2.attn.c_attn.bias", 0);
    assert_tensor_const(m, "h.3.mlp.c_proj.bias", 0);
    assert_tensor_const(m, "ln_f.weight", 1);
    /* Each tensor has its own stream: same-shaped tensors differ. */
    assert_true(memcmp(param(m, "h.0.attn.c_proj.weight"), param(m, "h.1.attn.c_proj.weight"),
                       sizeof(bp_real) * 128 * 128) != 0);
    bp_model_destroy(m);
}

static void test_mlp_init_statistics(void **state) {
    (void)state;
    bp_model *m = make(fx_mlp_default(), 0, -1, 1234);
    const struct {
        const char *name;
        int fan_in;
    } t[] = {
        {"fc1.weight", 784},    {"fc1.bias", 784},    {"fc2.weight", 256},
        {"fc_out.weight", 256}, {"fc_out.bias", 256},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        const bp_tensor_info *info = bp_model_find_tensor(m, t[k].name);
        const bp_real *p = bp_model_params(m) + info->offset;
        double bound = 1 / sqrt((double)t[k].fan_in), mx = 0;
        for (size_t i = 0; i < info->numel; i++) mx = fmax(mx, fabs(p[i]));
        assert_true(mx <= bound);
        if (info->numel > 1000) { /* uniform(-b, b): std b / sqrt(3), max close to b */
            assert_tensor_std(m, t[k].name, bound / sqrt(3.0));
            assert_true(mx > 0.99 * bound);
        }
    }
    bp_model_destroy(m);
}

static void test_init_determinism(void **state) {
    (void)state;
    bp_model_config cfg = fx_gpt_small();
    bp_model *a = make(cfg, 0, -1, 7), *b = make(cfg, 0, -1, 7), *c = make(cfg, 0, -1, 8);
    size_t n = bp_model_num_params(a), differ = 0;
    assert_memory_equal(bp_model_params(a), bp_model_params(b), n * sizeof(bp_real));
    const bp_tensor_info *w = bp_model_find_tensor(a, "h.1.mlp.c_fc.weight");
    for (size_t i = 0; i < w->numel; i++)
        differ += bp_model_params(a)[w->offset + i] != bp_model_params(c)[w->offset + i];
    assert_int_equal(differ, w->numel);
    /* A range holds exactly the full model's values (the tied copy those of wte). */
    for (int begin = 0; begin < bp_model_num_blocks(&cfg); begin++) {
        bp_model *r = make(cfg, begin, -1, 7);
        for (int i = 0; i < bp_model_num_tensors(r); i++) {
            const bp_tensor_info *t = bp_model_tensor(r, i);
            assert_memory_equal(bp_model_params(r) + t->offset, param(a, t->name),
                                t->numel * sizeof(bp_real));
        }
        bp_model_destroy(r);
    }
    bp_model_destroy(a);
    bp_model_destroy(b);
    bp_model_destroy(c);
}

/* ---- block ranges reproduce the full model ---- */

static void assert_close(const bp_real *a, const bp_real *b, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (fabs(a[i] - b[i]) > 1e-12 * (fabs(a[i]) + fabs(b[i])) + 1e-15)
            fail_msg("%s[%zu]: %.17g vs %.17g", what, i, (double)a[i], (double)b[i]);
}

/* Forward through the stages in turn (each fed the previous one's output), then
 * backward in reverse (each fed the next one's input gradient); returns the loss. */
static double run_stages(bp_model **st, int n, const fx_batch *fb) {
    bp_acts *a[8];
    bp_real *dx[8] = {0};
    const bp_real *x = NULL, *dy = NULL;
    double loss = 0;
    bp_err err;
    for (int s = 0; s < n; s++) {
        assert_int_equal(bp_acts_create(st[s], fb->b.B, fb->b.T, &a[s], &err), BP_OK);
        assert_int_equal(bp_model_forward(st[s], a[s], &fb->b, x, &loss, &err), BP_OK);
        x = bp_acts_output(a[s]);
        int begin = bp_model_block_begin(st[s]);
        size_t nin =
            (size_t)fb->b.B * fb->b.T * bp_model_boundary_width(bp_model_get_config(st[s]), begin);
        if (s > 0) dx[s] = malloc(nin * sizeof *dx[s]);
    }
    for (int s = n - 1; s >= 0; s--) {
        assert_int_equal(bp_model_backward(st[s], a[s], &fb->b, dy, dx[s], 1, &err), BP_OK);
        dy = dx[s];
    }
    for (int s = 0; s < n; s++) {
        bp_acts_destroy(a[s]);
        free(dx[s]);
    }
    return loss;
}

/* cuts: the block indices where a new stage begins. */
static void check_split(bp_model_config cfg, const int *cuts, int ncuts, int B, int T) {
    fx_batch fb;
    fx_batch_make(&fb, &cfg, B, T, 3);
    bp_model *full = make(cfg, 0, -1, 11), *st[8];
    double loss_full = run_stages(&full, 1, &fb);
    int n = ncuts + 1;
    for (int s = 0; s < n; s++)
        st[s] = make(cfg, s == 0 ? 0 : cuts[s - 1], s == ncuts ? -1 : cuts[s], 11);
    double loss = run_stages(st, n, &fb);
    assert_true(fabs(loss - loss_full) <= 1e-13 * loss_full);
    const bp_tensor_info *wte_full = bp_model_find_tensor(full, "wte.weight");
    for (int s = 0; s < n; s++) {
        for (int i = 0; i < bp_model_num_tensors(st[s]); i++) {
            const bp_tensor_info *t = bp_model_tensor(st[s], i),
                                 *f = bp_model_find_tensor(full, t->name);
            if (t == bp_model_find_tensor(st[s], "wte.weight") && n > 1) continue; /* tied: below */
            assert_close(bp_model_grads(st[s]) + t->offset, bp_model_grads(full) + f->offset,
                         t->numel, t->name);
        }
    }
    if (wte_full && n > 1) { /* both halves of the tied embedding add up to the full gradient */
        const bp_tensor_info *e = bp_model_find_tensor(st[0], "wte.weight"),
                             *h = bp_model_find_tensor(st[n - 1], "wte.weight");
        assert_true(h->tied_copy && !e->tied_copy);
        bp_real *sum = malloc(e->numel * sizeof *sum);
        for (size_t k = 0; k < e->numel; k++)
            sum[k] =
                bp_model_grads(st[0])[e->offset + k] + bp_model_grads(st[n - 1])[h->offset + k];
        assert_close(sum, bp_model_grads(full) + wte_full->offset, e->numel, "wte.weight (sum)");
        free(sum);
    }
    for (int s = 0; s < n; s++) bp_model_destroy(st[s]);
    bp_model_destroy(full);
    fx_batch_free(&fb);
}

static void test_gpt_split(void **state) {
    (void)state;
    for (int k = 1; k <= 3; k++) check_split(fx_gpt_small(), &k, 1, 2, 6);
    const int every[] = {1, 2, 3};
    check_split(fx_gpt_small(), every, 3, 2, 8);
}

static void test_mlp_split(void **state) {
    (void)state;
    for (int k = 1; k <= 2; k++) check_split(fx_mlp_small(), &k, 1, 4, 1);
    const int every[] = {1, 2};
    check_split(fx_mlp_small(), every, 2, 4, 1);
}

/* ---- forward/backward behaviour ---- */

/* Causal attention and learned positions: a batch cut to its first T' positions gives
 * the same logits for those positions as the whole batch. */
static void test_gpt_causal_prefix(void **state) {
    (void)state;
    bp_model_config cfg = fx_gpt_small();
    int B = 2, T = 8, Tp = 5, V = cfg.vocab;
    bp_model *m = make(cfg, 0, -1, 5);
    fx_batch fb, pre;
    fx_batch_make(&fb, &cfg, B, T, 9);
    fx_batch_make(&pre, &cfg, B, Tp, 9);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tp; t++) pre.tokens[b * Tp + t] = fb.tokens[b * T + t];
    bp_acts *a, *ap;
    bp_err err;
    assert_int_equal(bp_acts_create(m, B, T, &a, &err), BP_OK);
    assert_int_equal(bp_acts_create(m, B, T, &ap, &err), BP_OK);
    assert_int_equal(bp_model_forward(m, a, &fb.b, NULL, NULL, &err), BP_OK);
    assert_int_equal(bp_model_forward(m, ap, &pre.b, NULL, NULL, &err), BP_OK);
    for (int b = 0; b < B; b++)
        assert_close(bp_acts_logits(ap) + (size_t)b * Tp * V, bp_acts_logits(a) + (size_t)b * T * V,
                     (size_t)Tp * V, "prefix logits");
    /* ... and a later position does depend on the earlier ones. */
    fb.tokens[0] = (fb.tokens[0] + 1) % V;
    assert_int_equal(bp_model_forward(m, a, &fb.b, NULL, NULL, &err), BP_OK);
    assert_true(bp_acts_logits(a)[(size_t)(T - 1) * V] != bp_acts_logits(ap)[0] ||
                bp_acts_logits(a)[(size_t)(T - 1) * V + 1] != bp_acts_logits(ap)[1]);
    bp_acts_destroy(a);
    bp_acts_destroy(ap);
    bp_model_destroy(m);
    fx_batch_free(&fb);
    fx_batch_free(&pre);
}

/* Backward leaves the activations alone, so running it again adds the same gradient
 * again; loss_scale scales every gradient. */
static void test_accumulate_and_scale(void **state) {
    (void)state;
    bp_model_config cfgs[2] = {fx_gpt_small(), fx_mlp_small()};
    for (int k = 0; k < 2; k++) {
        fx_batch fb;
        fx_batch_make(&fb, &cfgs[k], 3, k == 0 ? 8 : 1, 4);
        bp_model *m = make(cfgs[k], 0, -1, 2);
        size_t n = bp_model_num_params(m);
        bp_real *g1 = malloc(n * sizeof *g1);
        bp_acts *a;
        bp_err err;
        double loss;
        assert_int_equal(bp_acts_create(m, 3, fb.b.T, &a, &err), BP_OK);
        assert_int_equal(bp_model_forward(m, a, &fb.b, NULL, &loss, &err), BP_OK);
        assert_int_equal(bp_model_backward(m, a, &fb.b, NULL, NULL, 1, &err), BP_OK);
        memcpy(g1, bp_model_grads(m), n * sizeof *g1);
        assert_int_equal(bp_model_backward(m, a, &fb.b, NULL, NULL, 1, &err), BP_OK);
        for (size_t i = 0; i < n; i++) g1[i] *= 2;
        assert_close(bp_model_grads(m), g1, n, "twice accumulated");
        bp_model_zero_grad(m);
        assert_int_equal(bp_model_backward(m, a, &fb.b, NULL, NULL, 6, &err), BP_OK);
        for (size_t i = 0; i < n; i++) g1[i] *= 3;
        assert_close(bp_model_grads(m), g1, n, "loss_scale 6");
        assert_true(bp_model_workspace_bytes(m) > 0);
        free(g1);
        bp_acts_destroy(a);
        bp_model_destroy(m);
        fx_batch_free(&fb);
    }
}

static void test_acts_size(void **state) {
    (void)state;
    bp_model_config cfg = fx_gpt_default();
    bp_model *m = make(cfg, 0, -1, 1), *stage = make(cfg, 1, 3, 1);
    bp_acts *a8, *a16, *s16;
    bp_err err;
    assert_int_equal(bp_acts_create(m, 8, 64, &a8, &err), BP_OK);
    assert_int_equal(bp_acts_create(m, 16, 64, &a16, &err), BP_OK);
    assert_int_equal(bp_acts_create(stage, 16, 64, &s16, &err), BP_OK);
    size_t b8 = bp_acts_bytes(a8), b16 = bp_acts_bytes(a16);
    printf("default gpt activations per micro-batch of 16x64: %zu bytes\n", b16);
    /* Linear in the micro-batch size (up to slot alignment), at least the logits and
     * one layer's 4C-wide MLP activations, and a 2-block stage holds less than all 6. */
    assert_true(b16 >= 2 * b8 - 4096 && b16 <= 2 * b8);
    assert_true(b16 >= sizeof(bp_real) * 16 * 64 * (cfg.vocab + 4 * cfg.n_embd));
    assert_true(bp_acts_bytes(s16) < b16 / 2);
    assert_int_equal(bp_model_workspace_bytes(m), 0); /* allocated by the first backward */
    bp_acts_destroy(a8);
    bp_acts_destroy(a16);
    bp_acts_destroy(s16);
    bp_model_destroy(m);
    bp_model_destroy(stage);
}

/* ---- errors ---- */

static void expect_usage(int rc, const bp_err *err, const char *needle) {
    assert_int_equal(rc, BP_EUSAGE);
    if (!strstr(err->msg, needle))
        fail_msg("message \"%s\" does not name \"%s\"", err->msg, needle);
}

static void test_config_errors(void **state) {
    (void)state;
    const struct {
        bp_model_config cfg;
        const char *field;
    } bad[] = {
        {{.kind = BP_MODEL_GPT,
          .vocab = 256,
          .n_layer = 2,
          .n_embd = 16,
          .n_head = 3,
          .seq_len = 8},
         "n_head"},
        {{.kind = BP_MODEL_GPT,
          .vocab = 256,
          .n_layer = 2,
          .n_embd = 16,
          .n_head = 0,
          .seq_len = 8},
         "n_head"},
        {{.kind = BP_MODEL_GPT,
          .vocab = 256,
          .n_layer = 0,
          .n_embd = 16,
          .n_head = 2,
          .seq_len = 8},
         "n_layer"},
        {{.kind = BP_MODEL_GPT, .vocab = 0, .n_layer = 2, .n_embd = 16, .n_head = 2, .seq_len = 8},
         "vocab"},
        {{.kind = BP_MODEL_GPT,
          .vocab = 256,
          .n_layer = 2,
          .n_embd = -16,
          .n_head = 2,
          .seq_len = 8},
         "n_embd"},
        {{.kind = BP_MODEL_GPT,
          .vocab = 256,
          .n_layer = 2,
          .n_embd = 16,
          .n_head = 2,
          .seq_len = 0},
         "seq_len"},
        {{.kind = BP_MODEL_MLP, .in_dim = 0, .hidden = 8, .n_hidden = 2, .n_class = 10}, "in_dim"},
        {{.kind = BP_MODEL_MLP, .in_dim = 784, .hidden = 0, .n_hidden = 2, .n_class = 10},
         "hidden"},
        {{.kind = BP_MODEL_MLP, .in_dim = 784, .hidden = 8, .n_hidden = 0, .n_class = 10},
         "n_hidden"},
        {{.kind = BP_MODEL_MLP, .in_dim = 784, .hidden = 8, .n_hidden = 2, .n_class = 1},
         "n_class"},
        {{.kind = (bp_model_kind)7}, "kind"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bp_err err;
        bp_model *m = (bp_model *)&err; /* must be reset to NULL */
        expect_usage(bp_model_config_check(&bad[i].cfg, &err), &err, bad[i].field);
        expect_usage(bp_model_create(&bad[i].cfg, 0, -1, &m, &err), &err, bad[i].field);
        assert_null(m);
    }
    bp_model_config ok = fx_gpt_small();
    bp_err err;
    assert_int_equal(bp_model_config_check(&ok, &err), BP_OK);
    const int ranges[][2] = {{-1, 2}, {0, 5}, {2, 2}, {3, 1}, {4, -1}};
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        bp_model *m;
        expect_usage(bp_model_create(&ok, ranges[i][0], ranges[i][1], &m, &err), &err, "range");
    }
}

static void test_batch_errors(void **state) {
    (void)state;
    bp_model_config cfg = fx_gpt_small();
    bp_model *m = make(cfg, 0, -1, 1), *tail = make(cfg, 1, -1, 1), *twin = make(cfg, 0, -1, 2);
    bp_acts *a, *at;
    bp_err err;
    fx_batch fb;
    fx_batch_make(&fb, &cfg, 2, 8, 1);
    expect_usage(bp_acts_create(m, 2, 9, &a, &err), &err, "T (9)");
    expect_usage(bp_acts_create(m, 0, 8, &a, &err), &err, "B (0)");
    assert_int_equal(bp_acts_create(m, 2, 8, &a, &err), BP_OK);
    assert_int_equal(bp_acts_create(tail, 2, 8, &at, &err), BP_OK);
    expect_usage(bp_model_backward(m, a, &fb.b, NULL, NULL, 1, &err), &err, "no forward");
    fb.tokens[5] = cfg.vocab;
    expect_usage(bp_model_forward(m, a, &fb.b, NULL, NULL, &err), &err, "tokens[5]");
    fb.tokens[5] = 0;
    fb.targets[3] = -1;
    expect_usage(bp_model_forward(m, a, &fb.b, NULL, NULL, &err), &err, "targets[3]");
    fb.targets[3] = 0;
    fb.b.B = 3;
    expect_usage(bp_model_forward(m, a, &fb.b, NULL, NULL, &err), &err, "does not fit");
    fb.b.B = 2;
    expect_usage(bp_model_forward(tail, at, &fb.b, NULL, NULL, &err), &err, "x_in");
    expect_usage(bp_model_forward(tail, a, &fb.b, NULL, NULL, &err), &err, "another layout");
    /* a model of the same layout (an AvgPipe replica) may use them */
    assert_int_equal(bp_model_forward(twin, a, &fb.b, NULL, NULL, &err), BP_OK);
    assert_int_equal(bp_model_forward(m, a, &fb.b, NULL, NULL, &err), BP_OK);
    fb.b.T = 7;
    expect_usage(bp_model_backward(m, a, &fb.b, NULL, NULL, 1, &err), &err, "last forward");
    fb.b.T = 8;
    fb.b.targets = NULL;
    expect_usage(bp_model_backward(m, a, &fb.b, NULL, NULL, 1, &err), &err, "targets");
    bp_acts_destroy(a);
    bp_acts_destroy(at);
    bp_model_destroy(twin);
    bp_model_destroy(m);
    bp_model_destroy(tail);
    fx_batch_free(&fb);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_tensor_table),    cmocka_unit_test(test_ranges_and_tied_copy),
        cmocka_unit_test(test_mlp_tensor_table),    cmocka_unit_test(test_gpt_init_statistics),
        cmocka_unit_test(test_mlp_init_statistics), cmocka_unit_test(test_init_determinism),
        cmocka_unit_test(test_gpt_split),           cmocka_unit_test(test_mlp_split),
        cmocka_unit_test(test_gpt_causal_prefix),   cmocka_unit_test(test_accumulate_and_scale),
        cmocka_unit_test(test_acts_size),           cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_batch_errors),        cmocka_unit_test(test_model_facts),
        cmocka_unit_test(test_kind_registry),       cmocka_unit_test(test_act_bytes_match_acts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
