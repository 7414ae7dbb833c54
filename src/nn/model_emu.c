/* Every model kind on the emulated device (core/backend_emu.h): forward and backward
 * compute nothing and take each block's modeled time (nn/cost.h) on the device's
 * timeline, with the tensor-parallel allreduces of the real layers at their places
 * (two in each transformer block's forward and two in its backward, of the
 * residual stream), so that the bytes between ranks are the real counts.
 *
 * Backward hands each block's gradients to the grad hook when the device would have
 * computed them: the host waits for the block's kernel to end first, so that the
 * data-parallel engine's buckets become ready in the order and at the times of a
 * GPU's backward. Without a hook the host returns at once, as from a GPU. */
#include "nn/model_emu.h"

#include "core/backend_emu.h"
#include "nn/cost.h"
#include "nn/model_impl.h"

static const bp_device_rate *rate_of(const bp_model *m) {
    return &bp_backend_emu_config(m->be)->rate;
}

static bp_status emu_check(const bp_model *m, bool bf16, bp_err *err) {
    (void)m, (void)bf16, (void)err; /* the backend's rate is already the dtype's */
    return BP_OK;
}

static bp_status emu_attach(bp_model *m, bool bf16, bp_err *err) {
    (void)m, (void)bf16, (void)err;
    return BP_OK;
}

static void emu_detach(bp_model *m) { (void)m; }

/* The activations the real layers keep, and at least the widest boundary or
 * residual stream that the output and the tp allreduces use. */
static size_t emu_acts_bytes(const bp_model *m, int B, int T) {
    size_t rows = (size_t)B * (size_t)T, wide = 0;
    for (int b = m->begin; b <= m->end; b++) {
        size_t w = (size_t)bp_model_boundary_width(&m->cfg, b);
        if (w > wide) wide = w;
    }
    size_t act = bp_model_act_bytes(&m->cfg, m->tp.size, m->begin, m->end, B, T);
    size_t io = rows * wide * sizeof(bp_real);
    return act > io ? act : io;
}

static bool tp_layer(const bp_model *m, int b) {
    return m->tp.size > 1 && b > 0 && b < bp_model_num_blocks(&m->cfg) - 1;
}

/* `s` seconds as n kernels of equal length; returns the last. */
static uint64_t kernels(bp_model *m, double s, int n) {
    uint64_t last = 0;
    for (int k = 0; k < n; k++) last = bp_backend_emu_kernel(m->be, NULL, s / n);
    return last;
}

/* Block b's forward or backward: its time, in two halves around two allreduces of
 * the residual stream in a tensor-parallel layer. *end: its last kernel. */
static bp_status run_block(bp_model *m, bp_acts *a, int b, bool backward, uint64_t *end,
                           bp_err *err) {
    double s = bp_model_block_s(rate_of(m), &m->cfg, m->tp.size, b, a->B, a->T, backward);
    if (!tp_layer(m, b)) {
        *end = kernels(m, s, BP_MODEL_BLOCK_KERNELS);
        return BP_OK;
    }
    size_t n = (size_t)a->B * a->T * (size_t)bp_model_boundary_width(&m->cfg, b);
    const char *what[2][2] = {{"attn.c_proj forward", "mlp.c_proj forward"},
                              {"mlp.c_fc backward", "attn.c_attn backward"}};
    for (int half = 0; half < 2; half++) {
        *end = kernels(m, s / 2, BP_MODEL_BLOCK_KERNELS / 2);
        bp_status rc = bp_model_tp_allreduce(m, a->buf, n, b, what[backward][half], err);
        if (rc) return rc;
    }
    return BP_OK;
}

static bp_status emu_forward(bp_model *m, bp_acts *a, const bp_batch *b, const bp_real *x_in,
                             double *loss, bp_err *err) {
    (void)b, (void)x_in;
    uint64_t end;
    for (int blk = m->begin; blk < m->end; blk++) {
        bp_status rc = run_block(m, a, blk, false, &end, err);
        if (rc) return rc;
    }
    *loss = 0; /* not computed: finite, and reported as absent */
    return BP_OK;
}

static bp_status emu_backward(bp_model *m, bp_acts *a, const bp_batch *b, const bp_real *dy,
                              bp_real *dx_in, bp_real loss_scale, bp_err *err) {
    (void)b, (void)dy, (void)dx_in, (void)loss_scale;
    for (int blk = m->end - 1; blk >= m->begin; blk--) {
        uint64_t end;
        bp_status rc = run_block(m, a, blk, true, &end, err);
        if (rc) return rc;
        if (!m->grad_hook) continue;
        bp_backend_emu_sync(m->be, end);
        bp_model_block_done(m, blk);
    }
    return BP_OK;
}

static const bp_real *emu_output(const bp_acts *a) { return a->buf; }

const bp_model_device_ops bp_model_emu = {
    .name = "emulated",
    .no_values = true,
    .check = emu_check,
    .attach = emu_attach,
    .detach = emu_detach,
    .acts_bytes = emu_acts_bytes,
    .forward = emu_forward,
    .backward = emu_backward,
    .output = emu_output,
    .logits = emu_output,
};
