/* Tensor-parallel gpt in double precision: a set of 2 shards (threads of this
 * process, nn_tp.h) is one function of all their parameters. Every shard's gradient
 * of its split tensors, the gradient of the replicated tensors and the boundary
 * input gradient are checked against central differences of the total loss (of
 * sum(output * r) for a range that ends before the head, i.e. dy = r).
 *
 * A replicated tensor is one parameter that every rank holds: the check perturbs
 * rank 0's copy and the loss function copies it to the other ranks before each
 * forward. Its gradient must come out the same on every rank. */
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
#include "nn_tp.h"

_Static_assert(sizeof(bp_real) == sizeof(double), "gradient checks need the double build");

typedef struct gctx {
    tp_set s;
    fx_batch fb;
    bp_real *x_in; /* boundary input, shared by the ranks, when the range starts after 0 */
    bp_real *r;    /* weights of the output sum, when the range ends before the head */
    size_t nin, nout;
} gctx;

/* Rank 0's replicated tensors -> the other ranks (the tables list the same tensors). */
static void sync_replicated(tp_set *s) {
    for (int i = 0; i < bp_model_num_tensors(s->m[0]); i++) {
        const bp_tensor_info *t = bp_model_tensor(s->m[0], i);
        if (t->split_dim >= 0) continue;
        for (int r = 1; r < s->size; r++)
            memcpy(bp_model_params(s->m[r]) + t->offset, bp_model_params(s->m[0]) + t->offset,
                   t->numel * sizeof(bp_real));
    }
}

static double total_loss(void *p) {
    gctx *c = p;
    sync_replicated(&c->s);
    assert_int_equal(tp_set_forward(&c->s, &c->fb.b, c->x_in), BP_OK);
    if (bp_model_has_last(c->s.m[0])) return c->s.loss[0];
    const bp_real *y = bp_acts_output(c->s.a[0]);
    double sum = 0;
    for (size_t i = 0; i < c->nout; i++) sum += y[i] * c->r[i];
    return sum;
}

static void gctx_setup(gctx *c, bp_model_config cfg, int begin, int end, int size, int B, int T) {
    memset(c, 0, sizeof *c);
    assert_int_equal(tp_set_create(&c->s, cfg, begin, end, size, B, T), BP_OK);
    end = bp_model_block_end(c->s.m[0]);
    /* Random parameters well away from the initialization, drawn for the whole
     * tensors and sliced, so that the shards are one model. */
    bp_model *full = NULL;
    bp_err err;
    assert_int_equal(bp_model_create(&cfg, begin, end, &full, &err), BP_OK);
    nn_fill_normal(bp_model_params(full), bp_model_num_params(full), 0.3, 42);
    tp_set_load(&c->s, full);
    bp_model_destroy(full);
    fx_batch_make(&c->fb, &cfg, B, T, 5);
    c->nin = (size_t)B * T * bp_model_boundary_width(&cfg, begin);
    c->nout = (size_t)B * T * bp_model_boundary_width(&cfg, end);
    if (!bp_model_has_first(c->s.m[0])) {
        c->x_in = malloc(c->nin * sizeof *c->x_in);
        nn_fill_normal(c->x_in, c->nin, 1, 6);
    }
    if (!bp_model_has_last(c->s.m[0])) {
        c->r = malloc(c->nout * sizeof *c->r);
        nn_fill_normal(c->r, c->nout, 1, 7);
    }
}

static void gctx_free(gctx *c) {
    tp_set_destroy(&c->s);
    fx_batch_free(&c->fb);
    free(c->x_in);
    free(c->r);
}

static void check_tp_grads(int begin, int end) {
    gctx c;
    gctx_setup(&c, fx_gpt_small(), begin, end, 2, 2, 6);
    tp_set *s = &c.s;
    for (int r = 0; r < s->size; r++) bp_model_zero_grad(s->m[r]);
    total_loss(&c);
    assert_int_equal(tp_set_backward(s, &c.fb.b, c.r), BP_OK);
    int split = 0;
    for (int r = 0; r < s->size; r++) {
        bp_real *p = bp_model_params(s->m[r]), *g = bp_model_grads(s->m[r]);
        for (int i = 0; i < bp_model_num_tensors(s->m[r]); i++) {
            const bp_tensor_info *t = bp_model_tensor(s->m[r], i);
            char what[96];
            snprintf(what, sizeof what, "%s (tp rank %d)", t->name, r);
            if (t->split_dim < 0 && r > 0) {
                assert_memory_equal(g + t->offset, bp_model_grads(s->m[0]) + t->offset,
                                    t->numel * sizeof *g);
                continue;
            }
            split += t->split_dim >= 0;
            assert_true(nn_fd_check(total_loss, &c, p + t->offset, g + t->offset, t->numel, what) <=
                        1);
        }
    }
    /* 6 split tensors per transformer block on every rank: c_attn, c_fc (weight and
     * bias), the two c_proj weights. */
    int layers = 0, L = fx_gpt_small().n_layer;
    for (int b = begin; b < bp_model_block_end(s->m[0]); b++) layers += b >= 1 && b <= L;
    assert_int_equal(split, s->size * 6 * layers);
    if (c.x_in) {
        assert_true(nn_fd_check(total_loss, &c, c.x_in, s->dx[0], c.nin, "boundary input") <= 1);
        for (int r = 1; r < s->size; r++)
            assert_memory_equal(s->dx[r], s->dx[0], c.nin * sizeof(bp_real));
    }
    gctx_free(&c);
}

/* Embedding, both transformer blocks and the head (tied wte) in one range. */
static void test_tp_full(void **st) {
    (void)st;
    check_tp_grads(0, -1);
}
/* A pipeline stage in the middle: boundary input and output gradient. */
static void test_tp_middle(void **st) {
    (void)st;
    check_tp_grads(1, 3);
}
/* The last stage: a block, the head and its copy of the tied embedding. */
static void test_tp_tail(void **st) {
    (void)st;
    check_tp_grads(2, -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tp_full),
        cmocka_unit_test(test_tp_middle),
        cmocka_unit_test(test_tp_tail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
