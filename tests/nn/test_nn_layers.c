/* nn/ layers in double precision: each forward against a direct implementation of
 * its formula, each backward against central differences of sum(y * r) for a fixed
 * random r (so dy = r). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "nn/layers.h"
#include "nn_test.h"

_Static_assert(sizeof(bp_real) == sizeof(double), "gradient checks need the double build");

static double dot(const bp_real *a, const bp_real *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ---- linear ---- */

enum { LN_N = 3, LIN_IC = 4, LIN_OC = 5 };
typedef struct lin_ctx {
    bp_real x[LN_N * LIN_IC], w[LIN_OC * LIN_IC], b[LIN_OC], y[LN_N * LIN_OC], r[LN_N * LIN_OC];
} lin_ctx;

static double lin_loss(void *p) {
    lin_ctx *c = p;
    bp_linear_forward(c->y, c->x, c->w, c->b, LN_N, LIN_IC, LIN_OC);
    return dot(c->y, c->r, LN_N * LIN_OC);
}

static void lin_setup(lin_ctx *c) {
    nn_fill_normal(c->x, LN_N * LIN_IC, 1, 1);
    nn_fill_normal(c->w, LIN_OC * LIN_IC, 1, 2);
    nn_fill_normal(c->b, LIN_OC, 1, 3);
    nn_fill_normal(c->r, LN_N * LIN_OC, 1, 4);
}

static void test_linear_forward(void **state) {
    (void)state;
    lin_ctx c;
    lin_setup(&c);
    lin_loss(&c);
    for (int n = 0; n < LN_N; n++)
        for (int o = 0; o < LIN_OC; o++) {
            double s = c.b[o];
            for (int i = 0; i < LIN_IC; i++) s += c.x[n * LIN_IC + i] * c.w[o * LIN_IC + i];
            assert_true(fabs(c.y[n * LIN_OC + o] - s) < 1e-12);
        }
    /* Without bias. */
    bp_linear_forward(c.y, c.x, c.w, NULL, LN_N, LIN_IC, LIN_OC);
    double s = 0;
    for (int i = 0; i < LIN_IC; i++) s += c.x[LIN_IC + i] * c.w[2 * LIN_IC + i];
    assert_true(fabs(c.y[LIN_OC + 2] - s) < 1e-12);
}

static void test_linear_backward(void **state) {
    (void)state;
    lin_ctx c;
    lin_setup(&c);
    bp_real dx[LN_N * LIN_IC], dw[LIN_OC * LIN_IC] = {0}, db[LIN_OC] = {0};
    bp_linear_backward(dx, dw, db, c.r, c.x, c.w, LN_N, LIN_IC, LIN_OC);
    assert_true(nn_fd_check(lin_loss, &c, c.x, dx, LN_N * LIN_IC, "linear dx") <= 1);
    assert_true(nn_fd_check(lin_loss, &c, c.w, dw, LIN_OC * LIN_IC, "linear dW") <= 1);
    assert_true(nn_fd_check(lin_loss, &c, c.b, db, LIN_OC, "linear db") <= 1);
    /* Parameter gradients accumulate; dx is overwritten (and may be skipped). */
    bp_real dw1 = dw[7], db1 = db[2], dx1 = dx[3];
    bp_linear_backward(NULL, dw, db, c.r, c.x, c.w, LN_N, LIN_IC, LIN_OC);
    assert_true(fabs(dw[7] - 2 * dw1) < 1e-12 && fabs(db[2] - 2 * db1) < 1e-12);
    bp_linear_backward(dx, dw, db, c.r, c.x, c.w, LN_N, LIN_IC, LIN_OC);
    assert_true(dx[3] == dx1);
}

/* The check itself must reject a gradient that is wrong in one element by 1e-4. */
static void test_fd_check_detects_error(void **state) {
    (void)state;
    lin_ctx c;
    lin_setup(&c);
    bp_real dx[LN_N * LIN_IC], dw[LIN_OC * LIN_IC] = {0}, db[LIN_OC] = {0};
    bp_linear_backward(dx, dw, db, c.r, c.x, c.w, LN_N, LIN_IC, LIN_OC);
    dw[5] *= 1 + 1e-4;
    printf("(a failure report is expected next)\n");
    assert_true(nn_fd_check(lin_loss, &c, c.w, dw, LIN_OC * LIN_IC, "deliberately wrong dW") > 1);
}

/* ---- layernorm ---- */

enum { LNN = 3, LNC = 7 };
typedef struct ln_ctx {
    bp_real x[LNN * LNC], w[LNC], b[LNC], y[LNN * LNC], mean[LNN], rstd[LNN], r[LNN * LNC];
} ln_ctx;

static double ln_loss(void *p) {
    ln_ctx *c = p;
    bp_layernorm_forward(c->y, c->mean, c->rstd, c->x, c->w, c->b, LNN, LNC);
    return dot(c->y, c->r, LNN * LNC);
}

static void test_layernorm(void **state) {
    (void)state;
    ln_ctx c;
    nn_fill_normal(c.x, LNN * LNC, 2, 5);
    for (int i = 0; i < LNN * LNC; i++) c.x[i] += 3; /* a mean far from 0 */
    nn_fill_normal(c.w, LNC, 1, 6);
    nn_fill_normal(c.b, LNC, 1, 7);
    nn_fill_normal(c.r, LNN * LNC, 1, 8);
    ln_loss(&c);
    for (int n = 0; n < LNN; n++) { /* normalized rows: mean 0, variance var/(var+eps) ~ 1 */
        double s = 0, s2 = 0;
        for (int i = 0; i < LNC; i++) {
            double z = (c.y[n * LNC + i] - c.b[i]) / c.w[i];
            s += z;
            s2 += z * z;
        }
        assert_true(fabs(s / LNC) < 1e-12);
        assert_true(fabs(s2 / LNC - 1) < 1e-4);
    }
    bp_real dx[LNN * LNC], dw[LNC] = {0}, db[LNC] = {0};
    nn_fill_normal(dx, LNN * LNC, 1, 9); /* dx accumulates onto what is there */
    bp_real dx0[LNN * LNC];
    memcpy(dx0, dx, sizeof dx);
    bp_layernorm_backward(dx, dw, db, c.r, c.x, c.w, c.mean, c.rstd, LNN, LNC);
    for (int i = 0; i < LNN * LNC; i++) dx[i] -= dx0[i];
    assert_true(nn_fd_check(ln_loss, &c, c.x, dx, LNN * LNC, "layernorm dx") <= 1);
    assert_true(nn_fd_check(ln_loss, &c, c.w, dw, LNC, "layernorm dw") <= 1);
    assert_true(nn_fd_check(ln_loss, &c, c.b, db, LNC, "layernorm db") <= 1);
}

/* ---- attention ---- */

enum { AB = 2, AT = 5, AC = 8, ANH = 2 };
typedef struct att_ctx {
    bp_real qkv[AB * AT * 3 * AC], out[AB * AT * AC], att[AB * ANH * AT * AT], r[AB * AT * AC];
} att_ctx;

static double att_loss(void *p) {
    att_ctx *c = p;
    bp_attention_forward(c->out, c->att, c->qkv, AB, AT, AC, ANH);
    return dot(c->out, c->r, AB * AT * AC);
}

static void test_attention(void **state) {
    (void)state;
    att_ctx c;
    nn_fill_normal(c.qkv, sizeof c.qkv / sizeof *c.qkv, 1, 10);
    nn_fill_normal(c.r, sizeof c.r / sizeof *c.r, 1, 11);
    att_loss(&c);
    for (int b = 0; b < AB; b++)
        for (int t = 0; t < AT; t++)
            for (int ch = 0; ch < AC; ch++)
                assert_true(fabs(c.out[(b * AT + t) * AC + ch] -
                                 nn_attention_reference(c.qkv, AT, AC, ANH, b, t, ch)) < 1e-12);
    for (int row = 0; row < AB * ANH * AT; row++) { /* probabilities, causal */
        double s = 0;
        for (int j = 0; j < AT; j++) {
            s += c.att[row * AT + j];
            if (j > row % AT) assert_true(c.att[row * AT + j] == 0);
        }
        assert_true(fabs(s - 1) < 1e-12);
    }
    bp_real dqkv[AB * AT * 3 * AC], datt[AT * AT];
    bp_attention_backward(dqkv, datt, c.r, c.qkv, c.att, AB, AT, AC, ANH);
    assert_true(nn_fd_check(att_loss, &c, c.qkv, dqkv, AB * AT * 3 * AC, "attention dqkv") <= 1);
}

/* ---- elementwise: gelu, relu, residual ---- */

enum { EN = 40 };
typedef struct ew_ctx {
    bp_real x[EN], y[EN], r[EN];
    void (*fwd)(bp_real *, const bp_real *, size_t);
} ew_ctx;

static double ew_loss(void *p) {
    ew_ctx *c = p;
    c->fwd(c->y, c->x, EN);
    return dot(c->y, c->r, EN);
}

static void test_gelu(void **state) {
    (void)state;
    ew_ctx c = {.fwd = bp_gelu_forward};
    nn_fill_normal(c.x, EN, 2.5, 12);
    nn_fill_normal(c.r, EN, 1, 13);
    ew_loss(&c);
    for (int i = 0; i < EN; i++) { /* GPT-2's formula, computed directly */
        double x = c.x[i], u = sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
        assert_true(fabs(c.y[i] - 0.5 * x * (1 + tanh(u))) < 1e-14);
    }
    bp_real dx[EN];
    bp_gelu_backward(dx, c.x, c.r, EN);
    assert_true(nn_fd_check(ew_loss, &c, c.x, dx, EN, "gelu dx") <= 1);
    /* Far tails: finite, gelu(x) -> x and -> 0, slopes -> 1 and -> 0. */
    bp_real big[4] = {-1000, -30, 30, 1000}, y[4], one[4] = {1, 1, 1, 1}, d[4];
    bp_gelu_forward(y, big, 4);
    bp_gelu_backward(d, big, one, 4);
    for (int i = 0; i < 4; i++) {
        assert_true(isfinite(y[i]) && isfinite(d[i]));
        assert_true(fabs(y[i] - (big[i] > 0 ? big[i] : 0)) < 1e-12);
        assert_true(fabs(d[i] - (big[i] > 0 ? 1 : 0)) < 1e-12);
    }
}

static void test_relu_and_residual(void **state) {
    (void)state;
    ew_ctx c = {.fwd = bp_relu_forward};
    nn_fill_normal(c.x, EN, 1, 14);
    for (int i = 0; i < EN; i++) c.x[i] += c.x[i] > 0 ? 0.1 : -0.1; /* keep off the kink */
    nn_fill_normal(c.r, EN, 1, 15);
    ew_loss(&c);
    for (int i = 0; i < EN; i++) assert_true(c.y[i] == (c.x[i] > 0 ? c.x[i] : 0));
    bp_real dx[EN];
    bp_relu_backward(dx, c.y, c.r, EN);
    assert_true(nn_fd_check(ew_loss, &c, c.x, dx, EN, "relu dx") <= 1);
    bp_real a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
    bp_residual_forward(a, a, b, 3); /* in place, as the models use it */
    assert_true(a[0] == 11 && a[1] == 22 && a[2] == 33);
}

/* ---- embedding ---- */

enum { EB = 2, ET = 4, EC = 3, EV = 5 };
typedef struct emb_ctx {
    int32_t tok[EB * ET];
    bp_real wte[EV * EC], wpe[ET * EC], out[EB * ET * EC], r[EB * ET * EC];
} emb_ctx;

static double emb_loss(void *p) {
    emb_ctx *c = p;
    bp_embedding_forward(c->out, c->tok, c->wte, c->wpe, EB, ET, EC);
    return dot(c->out, c->r, EB * ET * EC);
}

static void test_embedding(void **state) {
    (void)state;
    emb_ctx c = {.tok = {1, 4, 1, 0, 3, 1, 4, 4}}; /* repeats: gradients must add up */
    nn_fill_normal(c.wte, EV * EC, 1, 16);
    nn_fill_normal(c.wpe, ET * EC, 1, 17);
    nn_fill_normal(c.r, EB * ET * EC, 1, 18);
    emb_loss(&c);
    assert_true(c.out[(1 * ET + 2) * EC + 1] == c.wte[4 * EC + 1] + c.wpe[2 * EC + 1]);
    bp_real dwte[EV * EC] = {0}, dwpe[ET * EC] = {0};
    bp_embedding_backward(dwte, dwpe, c.r, c.tok, EB, ET, EC);
    assert_true(nn_fd_check(emb_loss, &c, c.wte, dwte, EV * EC, "embedding dwte") <= 1);
    assert_true(nn_fd_check(emb_loss, &c, c.wpe, dwpe, ET * EC, "embedding dwpe") <= 1);
    for (int i = 0; i < EC; i++) assert_true(dwte[2 * EC + i] == 0); /* token 2 unused */
}

/* ---- cross-entropy ---- */

enum { XN = 4, XV = 6 };
typedef struct xent_ctx {
    bp_real logits[XN * XV], lse[XN], scale;
    int32_t tgt[XN];
} xent_ctx;

static double xent_loss(void *p) {
    xent_ctx *c = p;
    return c->scale * bp_crossentropy_forward(c->lse, c->logits, c->tgt, XN, XV);
}

static void test_crossentropy(void **state) {
    (void)state;
    xent_ctx c = {.tgt = {0, 5, 2, 2}, .scale = 2.5};
    nn_fill_normal(c.logits, XN * XV, 2, 19);
    double loss = xent_loss(&c) / c.scale, ref = 0;
    for (int n = 0; n < XN; n++) {
        double z = 0;
        for (int j = 0; j < XV; j++) z += exp(c.logits[n * XV + j]);
        ref += -log(exp(c.logits[n * XV + c.tgt[n]]) / z) / XN;
    }
    assert_true(fabs(loss - ref) < 1e-12);
    bp_real d[XN * XV];
    bp_crossentropy_backward(d, c.logits, c.lse, c.tgt, XN, XV, c.scale);
    assert_true(nn_fd_check(xent_loss, &c, c.logits, d, XN * XV, "crossentropy dlogits") <= 1);
    /* Huge logits stay finite (max subtracted); a confident right answer costs ~0. */
    for (int i = 0; i < XN * XV; i++) c.logits[i] = 0;
    for (int n = 0; n < XN; n++) c.logits[n * XV + c.tgt[n]] = 1000;
    loss = bp_crossentropy_forward(c.lse, c.logits, c.tgt, XN, XV);
    assert_true(isfinite(loss) && fabs(loss) < 1e-12);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_forward),
        cmocka_unit_test(test_linear_backward),
        cmocka_unit_test(test_fd_check_detects_error),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_relu_and_residual),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_crossentropy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
