/* This rank's pipeline stage (stage.h). */
#include "parallel/stage.h"

#include <stdlib.h>

#include "parallel/tied.h"

struct bp_stage {
    bp_tp tp;              /* the models' tensor-parallel sums, over the grid's tp group */
    int n_replicas;        /* AvgPipe's pipelines, else 1 */
    bp_model **models;     /* [n_replicas] */
    bp_optim *optims;      /* [n_replicas] */
    bp_tied tied;
    bp_pipe *pipe;
    bp_grid_step_ctx stepper; /* its dp from bp_stage_start */
    struct bp_grid_pending unagreed; /* a local step's non-finite value, not yet agreed on */
    bp_pipe_stats totals;  /* of every take */
};

static bp_status tp_allreduce(void *ctx, bp_real *x, size_t n) {
    bp_comm *tp = ctx;
    return bp_allreduce_sum(tp, x, n);
}

/* One replica of the stage's blocks, made on the host and moved to the run's
 * device, its weights initialized there (drawn on the host and copied: the same
 * values on every device; none drawn on a device that computes none), and its
 * optimizer there. */
static bp_status create_replica(const bp_stage_config *c, bp_stage *s, bp_model **m, bp_optim *o,
                                bp_err *err) {
    bp_status rc = bp_model_create_tp(c->model, c->block_begin, c->block_end, &s->tp, m, err);
    if (rc) return rc;
    if (c->be != bp_backend_cpu() || c->bf16)
        rc = bp_model_set_device(*m, c->be, c->device_ops, c->bf16, err);
    if (rc == BP_OK) bp_model_init_weights(*m, c->seed);
    if (rc == BP_OK) rc = bp_optim_init_on(o, &c->optim, bp_model_num_params(*m), c->be, err);
    return rc;
}

/* The replicas, alike from the seed (the data-parallel engine then copies replica
 * 0 over them anyway): one per AvgPipe pipeline, one without --pipelines. */
static bp_status create_replicas(const bp_stage_config *c, bp_stage *s, bp_err *err) {
    s->n_replicas = c->replicas;
    s->models = calloc((size_t)s->n_replicas, sizeof *s->models);
    s->optims = calloc((size_t)s->n_replicas, sizeof *s->optims);
    if (!s->models || !s->optims) return bp_fail(err, BP_ENOMEM, "out of memory");
    bp_status rc = BP_OK;
    for (int j = 0; rc == BP_OK && j < s->n_replicas; j++)
        rc = create_replica(c, s, &s->models[j], &s->optims[j], err);
    return rc;
}

bp_status bp_stage_create(const bp_stage_config *c, bp_stage **out, bp_err *err) {
    *out = NULL;
    bp_stage *s = calloc(1, sizeof *s);
    if (!s) return bp_fail(err, BP_ENOMEM, "out of memory");
    s->tp = (bp_tp){.rank = c->grid->t, .size = c->grid->tp, .allreduce_sum = tp_allreduce,
                    .ctx = c->grid->tp_comm};
    bp_status rc = create_replicas(c, s, err);
    const char *tied = bp_model_tied_tensor(c->model);
    if (rc == BP_OK) bp_tied_init(&s->tied, c->grid, s->models[0], tied, c->occ.fused_embedding);
    if (rc == BP_OK)
        rc = bp_pipe_create(c->grid->pp_comm, s->models, s->n_replicas, &c->schedule,
                            c->micro_batches, c->stream_len, tied != NULL, c->micro_B, c->T,
                            &c->occ, &s->pipe, err);
    if (rc) {
        bp_stage_destroy(s);
        return rc;
    }
    s->stepper = (bp_grid_step_ctx){
        .grid = c->grid, .meta = c->meta, .models = s->models, .n_replicas = s->n_replicas,
        .pipe = s->pipe, .tied = &s->tied, .clip = c->clip, .skip_nonfinite = c->skip_nonfinite,
        .pending = &s->unagreed, .stop = c->stop};
    *out = s;
    return BP_OK;
}

bp_status bp_stage_start(bp_stage *s, const bp_dp_config *d, int64_t step, bp_err *err) {
    return bp_dp_create(s->stepper.grid->dp_comm, d, s->models, s->optims, s->n_replicas, step,
                        &s->stepper.dp, err);
}

void bp_stage_destroy(bp_stage *s) {
    if (!s) return;
    bp_dp_destroy(s->stepper.dp);
    bp_pipe_destroy(s->pipe);
    for (int j = 0; s->models && s->optims && j < s->n_replicas; j++) {
        bp_optim_free(&s->optims[j]);
        bp_model_destroy(s->models[j]);
    }
    free(s->models);
    free(s->optims);
    free(s);
}

bp_status bp_stage_steps(bp_stage *s, int k, const bp_grid_step_in *in, bp_grid_step_out *out,
                         bp_err *err) {
    return bp_grid_steps(&s->stepper, k, in, out, err);
}

int bp_stage_replicas(const bp_stage *s) { return s->n_replicas; }
bp_model *bp_stage_model(const bp_stage *s, int j) { return s->models[j]; }
bp_optim *bp_stage_optim(const bp_stage *s, int j) { return &s->optims[j]; }
bp_pipe *bp_stage_pipe(const bp_stage *s) { return s->pipe; }
bp_dp *bp_stage_dp(const bp_stage *s) { return s->stepper.dp; }

void bp_stage_stats_take(bp_stage *s, bp_pipe_stats *out) {
    bp_pipe_stats_take(s->pipe, out);
    s->totals.busy_s += out->busy_s;
    s->totals.idle_s += out->idle_s;
    s->totals.cb_sends += out->cb_sends;
    s->totals.cb_compressed += out->cb_compressed;
    s->totals.cb_rel_err += out->cb_rel_err;
}

void bp_stage_totals(bp_stage *s, bp_pipe_stats *out) {
    bp_pipe_stats now;
    bp_pipe_stats_take(s->pipe, &now);
    *out = s->totals;
    out->peak_stash = now.peak_stash;
    out->act_bytes = now.act_bytes;
}
