#include "train/trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/blas.h"
#include "core/timer.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/progress.h"
#include "train/task.h"

typedef struct trainer {
    const bp_train_config *cfg;
    bp_model *model;
    bp_acts *acts;
    bp_optim optim;
    bp_lr_schedule lr;
    bp_task task;
    bp_metrics metrics;
    bp_progress progress;
    int64_t step, first_step;
    double *step_ms; /* per step of this run, for the median */
    bp_train_result *res;
} trainer;

static int resume(trainer *t, bp_err *err) {
    bp_checkpoint ck;
    int rc = bp_checkpoint_open(t->cfg->resume, &ck, err);
    if (rc) return rc;
    bp_model_config saved;
    rc = bp_checkpoint_model_config(&ck, &saved, err);
    if (rc == BP_OK) rc = bp_train_config_match(bp_model_get_config(t->model), &saved, ck.dir, err);
    if (rc == BP_OK) rc = bp_checkpoint_load_model(&ck, t->model, err);
    if (rc == BP_OK) rc = bp_checkpoint_load_optim(&ck, &t->optim, err);
    if (rc == BP_OK && ck.rs.step > t->cfg->steps)
        rc = bp_fail(err, BP_EUSAGE, "checkpoint %s is at step %lld, beyond --steps %lld", ck.dir,
                     (long long)ck.rs.step, (long long)t->cfg->steps);
    if (rc == BP_OK) {
        bp_task_set_state(&t->task, &ck.rs);
        t->step = t->first_step = ck.rs.step;
        bp_progress_note(&t->progress, "resumed from %s at step %lld", ck.dir, (long long)t->step);
    }
    bp_checkpoint_close(&ck);
    return rc;
}

static int setup(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    bp_model_config mc;
    bp_optim_config oc;
    bp_train_model_config(c, &mc);
    bp_train_optim_config(c, &oc);
    bp_train_lr_schedule(c, &t->lr);
    bp_blas_set_threads(c->threads);
    bp_progress_init(&t->progress, c->progress, c->steps, c->log_every,
                     c->model == BP_MODEL_GPT ? "tok" : "samples");
    int rc = bp_task_init(&t->task, c, 0, 1, err);
    if (rc == BP_OK) rc = bp_model_create(&mc, 0, -1, &t->model, err);
    if (rc == BP_OK) bp_model_init_weights(t->model, (uint64_t)c->seed);
    if (rc == BP_OK) rc = bp_optim_init(&t->optim, &oc, bp_model_num_params(t->model), err);
    if (rc == BP_OK) rc = bp_acts_create(t->model, t->task.B_local, t->task.T, &t->acts, err);
    if (rc == BP_OK && !(t->step_ms = calloc((size_t)c->steps + 1, sizeof(double))))
        rc = bp_fail(err, BP_ENOMEM, "out of memory");
    if (rc == BP_OK && c->resume[0]) rc = resume(t, err);
    if (rc == BP_OK) rc = bp_mkdir_p(c->out, err);
    if (rc == BP_OK) rc = bp_metrics_open(&t->metrics, c->metrics, c->resume[0] != 0, err);
    return rc;
}

static void teardown(trainer *t) {
    bp_metrics_close(&t->metrics);
    bp_acts_destroy(t->acts);
    bp_optim_free(&t->optim);
    bp_model_destroy(t->model);
    bp_task_free(&t->task);
    free(t->step_ms);
}

/* One optimizer step on the next batch; fills the record. */
static int train_step(trainer *t, bp_step_record *r, bp_err *err) {
    double t0 = bp_now();
    bp_batch b;
    bp_task_next(&t->task, &b);
    bp_model_zero_grad(t->model);
    double loss;
    int rc = bp_model_forward(t->model, t->acts, &b, NULL, &loss, err);
    if (rc) return rc;
    if (!isfinite(loss))
        return bp_fail(err, BP_ENONFINITE, "step %lld: the training loss is %g",
                       (long long)t->step + 1, loss);
    rc = bp_model_backward(t->model, t->acts, &b, NULL, NULL, 1, err);
    if (rc) return rc;
    size_t n = bp_model_num_params(t->model);
    r->grad_norm = bp_clip_grad_norm(bp_model_grads(t->model), n, t->cfg->clip);
    if (!isfinite(r->grad_norm))
        return bp_fail(err, BP_ENONFINITE, "step %lld: the gradient norm is %g",
                       (long long)t->step + 1, r->grad_norm);
    r->lr = bp_lr_at(&t->lr, t->step);
    bp_optim_step(&t->optim, bp_model_params(t->model), bp_model_grads(t->model), r->lr);
    t->step++;
    r->step = t->step;
    r->loss = loss;
    r->step_ms = (bp_now() - t0) * 1e3;
    r->items_per_s = (double)bp_task_items_per_step(&t->task) / (r->step_ms * 1e-3);
    return BP_OK;
}

static int evaluate(trainer *t, bp_err *err) {
    double loss, acc;
    int rc = bp_task_eval(&t->task, t->model, t->acts, &loss, &acc, err);
    if (rc) return rc;
    bp_metrics_eval(&t->metrics, t->step, loss, acc);
    if (isnan(acc))
        bp_progress_note(&t->progress, "step %lld: validation loss %.4f", (long long)t->step, loss);
    else
        bp_progress_note(&t->progress, "step %lld: test loss %.4f, accuracy %.4f",
                         (long long)t->step, loss, acc);
    t->res->val_loss = loss;
    t->res->val_acc = acc;
    return BP_OK;
}

static int checkpoint(trainer *t, bp_err *err) {
    bp_resume_state rs = {.step = t->step};
    bp_task_get_state(&t->task, &rs);
    int rc = bp_checkpoint_save(t->cfg->out, t->model, &t->optim, &rs, t->cfg->keep_checkpoints, err);
    char name[64];
    snprintf(name, sizeof name, "ckpt-%08lld", (long long)t->step);
    if (rc == BP_OK)
        rc = bp_path_join(t->res->checkpoint, sizeof t->res->checkpoint, t->cfg->out, name, err);
    return rc;
}

static int every(int64_t step, int64_t n) { return n > 0 && step % n == 0; }

static int loop(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    double start = bp_now();
    int rc = BP_OK;
    while (rc == BP_OK && t->step < c->steps) {
        bp_step_record r;
        if ((rc = train_step(t, &r, err))) break;
        t->step_ms[t->step - t->first_step - 1] = r.step_ms;
        t->res->final_loss = r.loss;
        bp_metrics_step(&t->metrics, &r);
        double elapsed = bp_now() - start, done = (double)(t->step - t->first_step);
        bp_progress_step(&t->progress, t->step, r.loss, r.items_per_s,
                         elapsed / done * (double)(c->steps - t->step));
        if (every(t->step, c->eval_every) || (c->eval_every > 0 && t->step == c->steps))
            rc = evaluate(t, err);
        if (rc == BP_OK && (every(t->step, c->checkpoint_every) || t->step == c->steps))
            rc = checkpoint(t, err);
    }
    return rc;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summary(trainer *t) {
    int64_t n = t->step - t->first_step;
    qsort(t->step_ms, (size_t)n, sizeof(double), cmp_double);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t params = bp_model_num_params(t->model) * sizeof(bp_real);
    bp_memory_record m = {
        .steps = t->step,
        .median_step_ms = n > 0 ? t->step_ms[n / 2] : NAN,
        .peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024,
        .param_bytes = params,
        .grad_bytes = params,
        .optim_bytes = params * (uint64_t)bp_optim_num_buffers(&t->optim.cfg),
        .act_bytes = bp_acts_bytes(t->acts),
    };
    bp_metrics_summary(&t->metrics, &m);
}

int bp_train_run(const bp_train_config *cfg, bp_train_result *res, bp_err *err) {
    trainer t = {.cfg = cfg, .res = res};
    *res = (bp_train_result){.final_loss = NAN, .val_loss = NAN, .val_acc = NAN};
    int rc = setup(&t, err);
    if (rc == BP_OK) rc = loop(&t, err);
    bp_progress_finish(&t.progress);
    if (rc == BP_OK) summary(&t);
    res->steps = t.step;
    teardown(&t);
    return rc;
}
