/* Whole models and block ranges in double precision: every parameter gradient, and
 * the boundary input gradient of ranges that start after block 0, against central
 * differences. A range that ends before the head is checked through the scalar
 * sum(output * r), i.e. with dy = r. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "nn/model.h"
#include "nn_fixture.h"
#include "nn_test.h"

_Static_assert(sizeof(bp_real) == sizeof(double), "gradient checks need the double build");

typedef struct mctx {
    bp_model *m;
    bp_acts *a;
    fx_batch fb;
    bp_real *x_in, *dx_in; /* boundary input and its gradient, when !has_first */
    bp_real *r;            /* weights of the output sum, when !has_last */
    size_t nin, nout;
} mctx;

static double mloss(void *p) {
    mctx *c = p;
    double loss = -1;
    bp_err err;
    assert_int_equal(bp_model_forward(c->m, c->a, &c->fb.b, c->x_in, &loss, &err), BP_OK);
    if (bp_model_has_last(c->m)) return loss;
    const bp_real *y = bp_acts_output(c->a);
    double s = 0;
    for (size_t i = 0; i < c->nout; i++) s += y[i] * c->r[i];
    return s;
}

static void mctx_setup(mctx *c, bp_model_config cfg, int begin, int end, int B, int T) {
    memset(c, 0, sizeof *c);
    bp_err err;
    assert_int_equal(bp_model_create(&cfg, begin, end, &c->m, &err), BP_OK);
    end = bp_model_block_end(c->m);
    assert_int_equal(bp_acts_create(c->m, B, T, &c->a, &err), BP_OK);
    /* Random parameters well away from the initialization (LayerNorm gains included),
     * so that every nonlinearity is exercised. */
    nn_fill_normal(bp_model_params(c->m), bp_model_num_params(c->m), 0.3, 42);
    fx_batch_make(&c->fb, &cfg, B, T, 5);
    size_t rows = (size_t)B * c->fb.b.T;
    c->nin = rows * bp_model_boundary_width(&cfg, begin);
    c->nout = rows * bp_model_boundary_width(&cfg, end);
    if (!bp_model_has_first(c->m)) {
        c->x_in = malloc(c->nin * sizeof *c->x_in);
        c->dx_in = malloc(c->nin * sizeof *c->dx_in);
        nn_fill_normal(c->x_in, c->nin, 1, 6);
    }
    if (!bp_model_has_last(c->m)) {
        c->r = malloc(c->nout * sizeof *c->r);
        nn_fill_normal(c->r, c->nout, 1, 7);
    }
}

static void mctx_free(mctx *c) {
    bp_acts_destroy(c->a);
    bp_model_destroy(c->m);
    fx_batch_free(&c->fb);
    free(c->x_in);
    free(c->dx_in);
    free(c->r);
}

static void check_model_grads(bp_model_config cfg, int begin, int end, int B, int T) {
    mctx c;
    mctx_setup(&c, cfg, begin, end, B, T);
    bp_err err;
    bp_model_zero_grad(c.m);
    mloss(&c);
    assert_int_equal(bp_model_backward(c.m, c.a, &c.fb.b, c.r, c.dx_in, 1, &err), BP_OK);
    bp_real *p = bp_model_params(c.m), *g = bp_model_grads(c.m);
    for (int i = 0; i < bp_model_num_tensors(c.m); i++) {
        const bp_tensor_info *t = bp_model_tensor(c.m, i);
        assert_true(nn_fd_check(mloss, &c, p + t->offset, g + t->offset, t->numel, t->name) <= 1);
    }
    if (c.x_in) assert_true(nn_fd_check(mloss, &c, c.x_in, c.dx_in, c.nin, "boundary input") <= 1);
    mctx_free(&c);
}

/* T = 6 < seq_len = 8: attention and positions must use the batch's T. */
static void test_gpt_full(void **s) {
    (void)s;
    check_model_grads(fx_gpt_small(), 0, -1, 2, 6);
}
/* Head without the embed block: the tied copy of wte gets the head's gradient. */
static void test_gpt_tail(void **s) {
    (void)s;
    check_model_grads(fx_gpt_small(), 1, -1, 2, 6);
}
static void test_gpt_middle(void **s) {
    (void)s;
    check_model_grads(fx_gpt_small(), 1, 2, 2, 6);
}
static void test_gpt_embed(void **s) {
    (void)s;
    check_model_grads(fx_gpt_small(), 0, 1, 2, 6);
}
static void test_gpt_head(void **s) {
    (void)s;
    check_model_grads(fx_gpt_small(), 3, 4, 2, 6);
}
static void test_mlp_full(void **s) {
    (void)s;
    check_model_grads(fx_mlp_small(), 0, -1, 3, 1);
}
static void test_mlp_tail(void **s) {
    (void)s;
    check_model_grads(fx_mlp_small(), 1, -1, 3, 1);
}
static void test_mlp_first(void **s) {
    (void)s;
    check_model_grads(fx_mlp_small(), 0, 1, 3, 1);
}
static void test_mlp_middle(void **s) {
    (void)s;
    check_model_grads(fx_mlp_small(), 1, 2, 3, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_full),   cmocka_unit_test(test_gpt_tail),
        cmocka_unit_test(test_gpt_middle), cmocka_unit_test(test_gpt_embed),
        cmocka_unit_test(test_gpt_head),   cmocka_unit_test(test_mlp_full),
        cmocka_unit_test(test_mlp_tail),   cmocka_unit_test(test_mlp_first),
        cmocka_unit_test(test_mlp_middle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
