/* One training step over the grid (the parts in order are in step.h). */
#include "parallel/step.h"

#include <math.h>
#include <string.h>

#include "core/timer.h"

bool bp_grid_reports_loss(const bp_grid *g) { return g->p == g->pp - 1 && g->t == 0; }

/* The first tensor of model m whose gradient is not finite, or -1. */
static int nonfinite_in(const bp_model *m) {
    const bp_backend *be = bp_model_backend(m);
    const float *g = bp_model_grads((bp_model *)m);
    /* One pass over the buffer in the usual case (one wait on a device), the tensors
     * only to name the first that is not finite. */
    if (be->all_finite(be, g, bp_model_num_params(m))) return -1;
    for (int i = 0; i < bp_model_num_tensors(m); i++) {
        const bp_tensor_info *ti = bp_model_tensor(m, i);
        if (!be->all_finite(be, g + ti->offset, ti->numel)) return i;
    }
    return -1;
}

/* The first tensor whose gradient is not finite in some replica, or NULL. */
static const char *nonfinite_tensor(const bp_grid_step_ctx *c) {
    int bad = bp_dp_nonfinite_tensor(c->dp);
    for (int j = 0; bad < 0 && j < c->n_replicas; j++) bad = nonfinite_in(c->models[j]);
    return bad < 0 ? NULL : bp_model_tensor(c->models[0], bad)->name;
}

/* Keep a local step's finding for the next agreement: the earliest step's. */
static void note(const bp_grid_step_ctx *c, struct bp_grid_pending f) {
    if (f.step && c->pending && (!c->pending->step || f.step < c->pending->step)) *c->pending = f;
}

/* This step's non-finite value on this rank: its step (0: none) and tensor. */
static struct bp_grid_pending finding(const bp_grid_step_ctx *c, const bp_grid_step_in *in,
                                      const bp_grid_step_out *out) {
    const char *tensor = nonfinite_tensor(c);
    bool bad = (bp_grid_reports_loss(c->grid) && !isfinite(out->loss)) || tensor;
    return (struct bp_grid_pending){.step = bad ? in->step + 1 : 0, .tensor = tensor};
}


/* After backward, every rank learns whether any rank saw a non-finite loss or
 * gradient (in this step or a local one since the last agreement), or was asked
 * to stop, so that all take the same path. */
static bp_status agree(const bp_grid_step_ctx *c, const bp_grid_step_in *in, bp_grid_step_out *out,
                       bp_err *err) {
    struct bp_grid_pending seen =
        c->pending && c->pending->step ? *c->pending : finding(c, in, out);
    if (c->pending) *c->pending = (struct bp_grid_pending){0};
    const char *tensor = seen.tensor;
    /* flags: any non-finite, any stop request, then each rank's step of its finding
     * (after local steps, a value spreads to other ranks in later steps) */
    int W = bp_comm_size(c->meta), me = bp_comm_rank(c->meta), first = -1;
    float flags[2 + W];
    memset(flags, 0, sizeof flags);
    flags[0] = seen.step != 0;
    flags[1] = in->stop_requested;
    flags[2 + me] = (float)seen.step;
    if (W > 1) {
        bp_status rc = bp_comm_fail(c->meta, bp_allreduce_sum(c->meta, flags, 2 + (size_t)W), err);
        if (rc) return rc;
    }
    out->stop = flags[1] > 0;
    out->skipped = flags[0] > 0 && c->skip_nonfinite;
    if (flags[0] == 0 || out->skipped) return BP_OK;
    out->together = true;
    for (int r = 0; r < W; r++)
        if (flags[2 + r] > 0 && (first < 0 || flags[2 + r] < flags[2 + first])) first = r;
    if (first != me) {
        bp_err_clear(err); /* the rank that saw it first says so */
        return BP_ENONFINITE;
    }
    return bp_fail(err, BP_ENONFINITE,
                   "rank %d, step %lld: non-finite %s%s (--skip-nonfinite skips such steps)",
                   bp_comm_rank(c->meta), (long long)seen.step,
                   tensor ? "gradient of tensor " : "loss", tensor ? tensor : "");
}

/* A replica's sum of squared gradients on this rank, counting each tensor of the
 * whole model once: the last stage's copy of the tied embedding is the first
 * stage's tensor, and a tensor replicated over the tp ranks is counted on rank 0.
 * One reduction per run of adjacent counted tensors, not one per tensor: on a
 * device each is a launch and a wait for its result, and a model has hundreds. */
static double own_sumsq(const bp_grid_step_ctx *c, const bp_model *m) {
    const bp_backend *be = bp_model_backend(m);
    const float *g = bp_model_grads((bp_model *)m);
    double s = 0;
    size_t from = 0, to = 0; /* the run being gathered: [from, to) */
    for (int i = 0; i < bp_model_num_tensors(m); i++) {
        const bp_tensor_info *ti = bp_model_tensor(m, i);
        if (ti->tied_copy || (ti->split_dim < 0 && c->grid->t != 0)) continue;
        if (ti->offset != to) {
            if (to > from) s += be->sumsq(be, g + from, to - from);
            from = ti->offset;
        }
        to = ti->offset + ti->numel;
    }
    if (to > from) s += be->sumsq(be, g + from, to - from);
    return s;
}

/* PyTorch's clip_grad_norm_: gradients of norm `norm` scaled down to max_norm. */
static void clip_to(bp_model *m, double norm, double max_norm) {
    if (max_norm <= 0 || norm <= max_norm) return;
    const bp_backend *be = bp_model_backend(m);
    be->scale(be, bp_model_grads(m), bp_model_num_params(m), (float)(max_norm / (norm + 1e-6)));
}

/* Gradient norm of each replica over the whole model (all stages and tp ranks),
 * then clipping to c->clip. *norm is replica 0's. */
static bp_status clip_gradients(const bp_grid_step_ctx *c, double *norm, bp_err *err) {
    int n_rep = c->n_replicas;
    float sumsq[n_rep];
    for (int j = 0; j < n_rep; j++) sumsq[j] = (float)own_sumsq(c, c->models[j]);
    bp_comm *axes[2] = {c->grid->tp_comm, c->grid->pp_comm};
    for (int a = 0; a < 2; a++) {
        if (bp_comm_size(axes[a]) == 1) continue;
        bp_status rc = bp_comm_fail(axes[a], bp_allreduce_sum(axes[a], sumsq, (size_t)n_rep), err);
        if (rc) return rc;
    }
    for (int j = 0; j < n_rep; j++)
        clip_to(c->models[j], sqrt(sumsq[j]), c->clip);
    *norm = sqrt(sumsq[0]);
    return BP_OK;
}

/* ---- the parts of a step -------------------------------------------------------- */

/* The tied tensor of n replicas in sync between the first and last stages (where the
 * model has one), its time added to *secs where it is a collective of its own. */
static bp_status sync_tied(const bp_grid_step_ctx *c, bp_model **models, int n, double *secs,
                           bp_err *err) {
    if (!c->tied || !c->tied->comm) return BP_OK;
    double t0 = bp_now();
    bp_status rc = bp_tied_sync(c->tied, models, n, err);
    *secs += bp_now() - t0;
    return rc;
}

/* Before the first forward: the outputs cleared, the gradients zeroed, the step's
 * losses at 0, and the algorithm's step begun (with the last step's lr; a weight
 * exchange, decentralized's or streaming DiLoCo's, starts on its thread). */
static void begin(const bp_grid_step_ctx *c, int k, const bp_grid_step_in *in,
                  bp_grid_step_out *out, double *loss) {
    for (int t = 0; t < k; t++) out[t] = (bp_grid_step_out){.grad_norm = NAN};
    for (int t = 0; t < k; t++) loss[t] = 0;
    for (int j = 0; j < c->n_replicas; j++) bp_model_zero_grad(c->models[j]);
    bp_dp_step_begin(c->dp, in[k - 1].lr);
    const bp_backend *be = bp_model_backend(c->models[0]);
    if (in[0].poison) be->fill(be, bp_model_grads(c->models[0]), 1, NAN);
}

/* Positions between stop checks in a step of k; 0: none (a stream of several
 * steps updates inline; CB's codecs and a weight exchange change state as they go).
 * One stage checks after every micro-batch (its dp ranks run in step anyway); a
 * pipeline's check is a barrier of all stages, so it comes every
 * BP_GRID_STOP_EVERY positions, in steps longer than that only. */
static int stop_every(const bp_grid_step_ctx *c, int k, const bp_grid_step_in *in) {
    if (!c->stop || k != 1 || in->local || bp_pipe_compresses(c->pipe) || bp_dp_exchanging(c->dp))
        return 0;
    return c->grid->pp == 1 ? 1 : BP_GRID_STOP_EVERY;
}

/* After the backward of position v (op i) of a long step, every `every` positions
 * but the last: every rank learns, at the same position, whether any was asked to
 * stop, and if so the pipeline abandons the step there (BP_EINTERRUPTED). */
static bp_status stop_after(const bp_grid_step_ctx *c, int every, const bp_batch *micro, int v,
                            int i, bp_err *err) {
    if (every <= 0 || (v + 1) % every != 0 || v + 1 >= bp_pipe_positions(c->pipe)) return BP_OK;
    float asked = *c->stop != 0;
    if (bp_comm_size(c->meta) > 1) {
        bp_status rc = bp_comm_fail(c->meta, bp_allreduce_sum(c->meta, &asked, 1), err);
        if (rc) return rc;
    }
    return asked > 0 ? bp_pipe_abandon(c->pipe, micro, v, i + 1, err) : BP_OK;
}

/* Pipeline j's update of a local step inside a stream (AvgPipe): the tied embedding
 * in sync, a non-finite gradient remembered for the next agreement, the optimizer
 * step, and the gradients zeroed for the next step; its time is the stage's work. */
static bp_status local_update(const bp_grid_step_ctx *c, const bp_grid_step_in *in, int j,
                              double *embed_s, bp_err *err) {
    double t0 = bp_now();
    bp_model *m = c->models[j];
    bp_status rc = sync_tied(c, c->models + j, 1, embed_s, err);
    if (rc == BP_OK) {
        int bad = nonfinite_in(m);
        if (bad >= 0)
            note(c, (struct bp_grid_pending){.step = in->step + 1,
                                             .tensor = bp_model_tensor(m, bad)->name});
        bp_dp_replica_update(c->dp, j, in->lr);
        bp_model_zero_grad(m);
    }
    bp_pipe_add_busy(c->pipe, bp_now() - t0);
    return rc;
}

/* The steps' mean losses (the last stage's; NaN elsewhere) and tied-sync times into
 * out; a local step's non-finite loss remembered for the next agreement. */
static void losses(const bp_grid_step_ctx *c, int k, const bp_grid_step_in *in,
                   bp_grid_step_out *out, const double *sum, double embed_s) {
    bool last_stage = c->grid->p == c->grid->pp - 1;
    for (int t = 0; t < k; t++) {
        out[t].loss = last_stage ? sum[t] / bp_pipe_positions(c->pipe) : NAN;
        out[t].embed_s = embed_s / k;
        if (t < k - 1 && bp_grid_reports_loss(c->grid) && !isfinite(out[t].loss))
            note(c, (struct bp_grid_pending){.step = in[t].step + 1});
    }
}

/* A step abandoned between micro-batches: on every rank, before any update. */
static bp_status abandoned(const bp_grid_step_ctx *c, bp_grid_step_out *out, bp_err *err) {
    bp_dp_abandon_step(c->dp);
    out->stop = out->together = true;
    bp_err_clear(err);
    return BP_EINTERRUPTED;
}

/* ---- the step ----------------------------------------------------------------------- */

bp_status bp_grid_steps(const bp_grid_step_ctx *c, int k, const bp_grid_step_in *in,
                        bp_grid_step_out *out, bp_err *err) {
    const bp_grid_step_in *last = &in[k - 1];
    bp_grid_step_out *end = &out[k - 1];
    int N = c->n_replicas, V = bp_pipe_positions(c->pipe), n;
    double loss[k], embed_s = 0;
    const bp_pipe_op *op;
    begin(c, k, in, out, loss); /* gradients zeroed, the dp algorithm's step begun */
    int every = stop_every(c, k, in);

    /* 1. Forward and backward of the micro-batches, in the schedule's order (AvgPipe:
     *    its pipelines' local steps updated as they end). The dp algorithm's buckets
     *    start as the last backward writes them and travel while it goes on. */
    bp_status rc = bp_pipe_begin(c->pipe, k, in[0].step, &op, &n, err);
    for (int i = 0; rc == BP_OK && i < n; i++) {
        int v = op[i].micro;
        if (op[i].update) {
            rc = local_update(c, &in[v / N], v % N, &embed_s, err);
        } else if (op[i].forward) {
            double l = 0;
            rc = bp_pipe_forward(c->pipe, &in[0].micro[v], v, &l, err);
            loss[v / V] += l;
        } else {
            if (i == n - 1) bp_dp_backward_begin(c->dp); /* the buckets may start */
            rc = bp_pipe_backward(c->pipe, &in[0].micro[v], v, err);
            if (rc == BP_OK) rc = stop_after(c, every, in[0].micro, v, i, err);
        }
    }
    if (rc == BP_EINTERRUPTED) return abandoned(c, end, err);
    losses(c, k, in, out, loss, embed_s);
    if (rc == BP_OK) rc = bp_dp_count_steps(c->dp, k - 1, err); /* the local steps counted */

    /* 2. The gradient exchange: the buckets waited for (with early updates, each one's
     *    optimizer step taken as it arrived). */
    if (rc == BP_OK) rc = bp_dp_backward_end(c->dp, err);
    /* 3. The tied embedding in sync between the first and last stages. */
    if (rc == BP_OK) rc = sync_tied(c, c->models, N, &end->embed_s, err);
    /* 4. Agreement of every rank on non-finite values and stop requests (a local
     *    step remembers its own for the next agreement); every rank skips alike. */
    if (rc == BP_OK && last->local) note(c, finding(c, last, end));
    else if (rc == BP_OK) rc = agree(c, last, end, err);
    if (rc) return rc;
    if (end->skipped) {
        bp_dp_skip_step(c->dp);
        return BP_OK;
    }
    /* 5. Clipping by the gradient norm over every stage and tp rank. */
    if (!last->local) rc = clip_gradients(c, &end->grad_norm, err);
    /* 6. The optimizer's step. */
    if (rc == BP_OK) rc = bp_dp_update(c->dp, err);
    /* 7. The averaging: what the algorithm does to the weights after it (decentralized
     *    mixing, elastic averaging of easgd and AvgPipe, DiLoCo's outer step). */
    return rc ? rc : bp_dp_average(c->dp, err);
}
