/* mlp: in_dim - H - ... - H - n_class ReLU classifier (784-256-256-10 for Fashion-MNIST).
 *
 * Blocks: i < n_hidden is fc{i+1} + ReLU, fc{i+1}.weight [H, in_i] (in_0 = in_dim,
 * else H); block n_hidden is the head, fc_out.weight [n_class, H] + softmax
 * cross-entropy. Activations (rows = B): slot 0 is the input of the range
 * [B, width(begin)], then the ReLU output [B, H] of each hidden block of the range
 * (the ReLU runs in place: backward needs only the sign of its output), then for
 * the head logits [B, n_class] and log-sum-exp [B]. */
#include <stddef.h>
#include <stdio.h>

#include "nn/layers.h"
#include "nn/model_impl.h"

enum { FC_W, FC_B };
enum head_slot { S_LOGITS, S_LSE, HEAD_SLOTS };

#define MLP_DIM_MAX (1 << 24)

static bp_status mlp_check(const bp_model_config *c, bp_err *err) {
    const struct {
        const char *name;
        int v, min, max;
    } f[] = {
        {"in_dim", c->in_dim, 1, MLP_DIM_MAX},
        {"hidden", c->hidden, 1, MLP_DIM_MAX},
        {"n_hidden", c->n_hidden, 1, 1 << 16},
        {"n_class", c->n_class, 2, MLP_DIM_MAX},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < f[i].min || f[i].v > f[i].max)
            return bp_fail(err, BP_EUSAGE, "mlp config: %s (%d) must be in [%d, %d]", f[i].name,
                           f[i].v, f[i].min, f[i].max);
    return BP_OK;
}

static int mlp_num_blocks(const bp_model_config *c) { return c->n_hidden + 1; }

static void mlp_block_name(const bp_model_config *c, int block, char *buf, size_t n) {
    if (block < c->n_hidden)
        snprintf(buf, n, "fc%d", block + 1);
    else
        snprintf(buf, n, "fc_out");
}

/* Width of the input of `block` (= output of block - 1); n_class past the head. */
static int mlp_boundary_width(const bp_model_config *c, int block) {
    if (block == 0) return c->in_dim;
    return block <= c->n_hidden ? c->hidden : c->n_class;
}

static int mlp_block_tensors(const bp_model_config *c, int block, bp_tensor_spec *s) {
    int in = mlp_boundary_width(c, block), out = mlp_boundary_width(c, block + 1);
    char base[16], w[BP_TENSOR_NAME_MAX], b[BP_TENSOR_NAME_MAX];
    mlp_block_name(c, block, base, sizeof base);
    snprintf(w, sizeof w, "%s.weight", base);
    snprintf(b, sizeof b, "%s.bias", base);
    /* PyTorch's nn.Linear default: weight and bias uniform(+-1/sqrt(fan_in)). */
    double bound = 1 / sqrt((double)in);
    bp_tensor_spec_set(&s[FC_W], w, out, in, BP_INIT_UNIFORM, bound);
    bp_tensor_spec_set(&s[FC_B], b, out, 0, BP_INIT_UNIFORM, bound);
    return 2;
}

static bp_status mlp_check_batch(const bp_model *m, const bp_batch *b, bool backward, bp_err *err) {
    if (b->T != 1) return bp_fail(err, BP_EUSAGE, "mlp batch: T (%d) must be 1", b->T);
    if (bp_model_has_first(m) && !b->images)
        return bp_fail(err, BP_EUSAGE, "mlp batch: images missing");
    if (!bp_model_has_last(m) || (!b->targets && !backward)) return BP_OK;
    if (!b->targets) return bp_fail(err, BP_EUSAGE, "mlp batch: backward needs targets");
    for (int i = 0; i < b->B; i++)
        if (b->targets[i] < 0 || b->targets[i] >= m->cfg.n_class)
            return bp_fail(err, BP_EUSAGE, "mlp batch: targets[%d] = %d is not in [0, %d)", i,
                           b->targets[i], m->cfg.n_class);
    return BP_OK;
}

/* ---- activation layout ---- */

static int end_hidden(const bp_model *m) {
    return m->end < m->cfg.n_hidden ? m->end : m->cfg.n_hidden;
}

static int mlp_acts_slots(const bp_model *m, int B, int T, size_t *sizes) {
    (void)T;
    int n = 0;
    if (sizes) sizes[n] = (size_t)B * mlp_boundary_width(&m->cfg, m->begin);
    n++;
    for (int blk = m->begin; blk < end_hidden(m); blk++, n++)
        if (sizes) sizes[n] = (size_t)B * m->cfg.hidden;
    if (bp_model_has_last(m)) {
        if (sizes) {
            sizes[n + S_LOGITS] = (size_t)B * m->cfg.n_class;
            sizes[n + S_LSE] = (size_t)B;
        }
        n += HEAD_SLOTS;
    }
    return n;
}

/* The input of `block`: slot 0 for the first block of the range, else the output of
 * the block before. */
static bp_real *block_in(const bp_acts *a, int block) { return a->slot[block - a->m->begin]; }
static bp_real *head_slot(const bp_acts *a, int k) {
    return a->slot[1 + end_hidden(a->m) - a->m->begin + k];
}

static const bp_real *mlp_output(const bp_acts *a) { return block_in(a, a->m->end); }
static const bp_real *mlp_logits(const bp_acts *a) { return head_slot(a, S_LOGITS); }

/* ---- forward / backward ---- */

static bp_status mlp_forward(bp_model *m, bp_acts *a, const bp_batch *b, double *loss,
                             bp_err *err) {
    (void)err;
    int B = a->B;
    if (bp_model_has_first(m)) {
        /* Converted (not just copied) because the double build's bp_real is double. */
        size_t n = (size_t)B * m->cfg.in_dim;
        for (size_t i = 0; i < n; i++) a->slot[0][i] = (bp_real)b->images[i];
    }
    for (int blk = m->begin; blk < m->end; blk++) {
        int in = mlp_boundary_width(&m->cfg, blk), out = mlp_boundary_width(&m->cfg, blk + 1);
        bool head = blk == m->cfg.n_hidden;
        bp_real *y = head ? head_slot(a, S_LOGITS) : block_in(a, blk + 1);
        bp_linear_forward(y, block_in(a, blk), bp_model_param(m, blk, FC_W),
                          bp_model_param(m, blk, FC_B), B, in, out);
        if (!head)
            bp_relu_forward(y, y, (size_t)B * out);
        else if (b->targets)
            *loss = bp_crossentropy_forward(head_slot(a, S_LSE), y, b->targets, B, out);
    }
    return BP_OK;
}

static size_t mlp_scratch_len(const bp_model *m, int B, int T) {
    (void)T;
    int w = m->cfg.hidden > m->cfg.n_class ? m->cfg.hidden : m->cfg.n_class;
    return 2 * (size_t)B * w;
}

/* Two workspace buffers take turns: `cur` holds the gradient of the current block's
 * pre-activation output, `other` receives the gradient of its input. */
static bp_status mlp_backward(bp_model *m, bp_acts *a, const bp_batch *b, const bp_real *dy,
                              bp_real *dx_in, bp_real loss_scale, bp_err *err) {
    (void)err;
    int B = a->B, last = m->end - 1;
    bp_real *cur = m->scratch, *other = m->scratch + m->scratch_len / 2;
    if (bp_model_has_last(m))
        bp_crossentropy_backward(cur, head_slot(a, S_LOGITS), head_slot(a, S_LSE), b->targets, B,
                                 m->cfg.n_class, loss_scale);
    else
        bp_relu_backward(cur, block_in(a, m->end), dy, (size_t)B * m->cfg.hidden);
    for (int blk = last;; blk--) {
        int in = mlp_boundary_width(&m->cfg, blk), out = mlp_boundary_width(&m->cfg, blk + 1);
        bp_real *dx = blk > m->begin ? other : dx_in; /* dx_in is NULL on the first stage */
        bp_linear_backward(dx, bp_model_grad(m, blk, FC_W), bp_model_grad(m, blk, FC_B), cur,
                           block_in(a, blk), bp_model_param(m, blk, FC_W), B, in, out);
        bp_model_block_done(m, blk);
        if (blk == m->begin) return BP_OK;
        bp_relu_backward(other, block_in(a, blk), other, (size_t)B * in);
        bp_real *t = cur;
        cur = other;
        other = t;
    }
}

/* Fashion-MNIST: 28 x 28 images of 10 classes. */
static void mlp_fixed_sizes(bp_model_config *c) {
    c->in_dim = 28 * 28;
    c->n_class = 10;
}
static int mlp_sample_len(const bp_model_config *c) { return (void)c, 1; }
static int mlp_input_width(const bp_model_config *c) { return c->in_dim; }
static int mlp_num_classes(const bp_model_config *c) { return c->n_class; }

/* The fully connected layer of block b: one product of [B, in] by [in, out]. */
static double mlp_block_flops(const bp_model_config *mc, int tp, int b, int B, int T) {
    (void)tp, (void)T;
    return 2.0 * B * mlp_boundary_width(mc, b) * mlp_boundary_width(mc, b + 1);
}

/* mlp_acts_slots': the range's input, each hidden layer's output, and with the head
 * its logits and log-sum-exp. */
static size_t mlp_act_bytes(const bp_model_config *mc, int tp, int b0, int b1, int B, int T) {
    (void)tp, (void)T;
    size_t n = (size_t)B, floats = bp_acts_slot_floats(n * (size_t)mlp_boundary_width(mc, b0));
    for (int b = b0; b < b1 && b < mc->n_hidden; b++)
        floats += bp_acts_slot_floats(n * (size_t)mc->hidden);
    if (b1 == mlp_num_blocks(mc))
        floats += bp_acts_slot_floats(n * (size_t)mc->n_class) + bp_acts_slot_floats(n);
    return floats * sizeof(bp_real);
}

static void mlp_trim(bp_model_config *c) {
    c->vocab = c->n_layer = c->n_embd = c->n_head = c->seq_len = 0;
}

static void mlp_describe(const bp_model_config *c, char *buf, size_t n) {
    snprintf(buf, n, "%d inputs, %d hidden layers of %d, %d classes", c->in_dim, c->n_hidden,
             c->hidden, c->n_class);
}

static const bp_model_field mlp_shape[] = {{"in_dim", offsetof(bp_model_config, in_dim)},
                                           {"hidden", offsetof(bp_model_config, hidden)},
                                           {"n_hidden", offsetof(bp_model_config, n_hidden)},
                                           {"n_class", offsetof(bp_model_config, n_class)}};

/* Fashion-MNIST's 60000 training images, one epoch by default. One epoch of SGD at a
 * constant 0.05 ends anywhere between 0.79 and 0.85 test accuracy depending on the seed
 * (in PyTorch too); decaying to 0.005 over the epoch ends at 0.85 +- 0.002, so mlp
 * decays by default. */
const bp_model_ops bp_mlp_ops = {
    .facts = {.name = "mlp",
              .reads_tokens = false,
              .accuracy = true,
              .on_cuda = false,
              .unit = "samples",
              .sample = "images",
              .loss_per = "image",
              .data = "/usr/share/datasets/fashion-mnist",
              .train_samples = 60000,
              .batch = 64,
              .steps = 0,
              .optim = BP_OPTIM_SGD,
              .lr = 0.05,
              .lr_schedule = BP_LR_COSINE,
              .shape = mlp_shape,
              .n_shape = sizeof mlp_shape / sizeof mlp_shape[0]},
    .describe = mlp_describe,
    .trim = mlp_trim,
    .block_flops = mlp_block_flops,
    .act_bytes = mlp_act_bytes,
    .check = mlp_check,
    .check_tp = NULL, /* nothing to split: the trainer runs mlp with tp 1 */
    .num_blocks = mlp_num_blocks,
    .block_name = mlp_block_name,
    .block_tensors = mlp_block_tensors,
    .boundary_width = mlp_boundary_width,
    .tied_tensor = NULL,
    .fixed_sizes = mlp_fixed_sizes,
    .sample_len = mlp_sample_len,
    .input_width = mlp_input_width,
    .num_classes = mlp_num_classes,
    .check_batch = mlp_check_batch,
    .acts_slots = mlp_acts_slots,
    .scratch_len = mlp_scratch_len,
    .forward = mlp_forward,
    .backward = mlp_backward,
    .output = mlp_output,
    .logits = mlp_logits,
};
