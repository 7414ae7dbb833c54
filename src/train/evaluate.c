/* Evaluation on the fixed evaluation set, by replica 0: its stages run the batches
 * forward through the pipeline; the last stage scores them and sends the result to
 * stage 0, whose rank 0 logs it. Where the replicas' weights differ (decentralized,
 * async, easgd, AvgPipe), replica 0 evaluates their average, the model a checkpoint
 * holds, instead of its own weights: for elastic averaging the average is the model
 * the algorithm converges (its center), and one replica alone would measure its own
 * noise. Other replicas go on training meanwhile.
 *
 * A stop signal cuts an evaluation short where replica 0 is one rank (the ranks'
 * agreement after the next step then stops the run); with several stages or tp
 * ranks they would have to agree on every batch, so it ends first. */
#include <math.h>
#include <stdlib.h>

#include "core/log.h"
#include "train/trainer_impl.h"

enum { TAG_EVAL = 3 };

/* Loss summed over rows and correct predictions, on the last stage; *cut when a
 * stop signal ended it early. */
static bp_status score(trainer *t, double *sum, double *correct, double *rows, bool *cut,
                       bp_err *err) {
    *sum = *correct = *rows = 0;
    int n = bp_task_eval_count(&t->task, t->micro_B);
    bool alone = t->grid.pp == 1 && t->grid.tp == 1;
    for (int i = 0; i < n; i++) {
        if ((*cut = alone && *t->stop)) return BP_OK;
        bp_batch b;
        bp_task_eval_batch(&t->task, i, t->micro_B, &b);
        double loss;
        const bp_real *logits;
        bp_status rc = bp_pipe_eval(bp_stage_pipe(t->stage), 0, &b, &loss, &logits, err);
        if (rc) return rc;
        if (!logits) continue;
        *sum += loss * b.B;
        *rows += b.B;
        const bp_model_config *mc = bp_model_get_config(bp_stage_model(t->stage, 0));
        if (!bp_model_kind_facts(mc->kind)->accuracy) continue;
        int classes = bp_model_num_classes(mc);
        size_t bytes = (size_t)b.B * (size_t)classes * sizeof(float);
        if (!t->host_logits && !(t->host_logits = malloc((size_t)t->micro_B * classes * sizeof(float))))
            return bp_fail(err, BP_ENOMEM, "cannot allocate the host copy of the logits");
        t->dev.be->to_host(t->dev.be, t->host_logits, logits, bytes);
        *correct += bp_count_correct(t->host_logits, b.targets, b.B, classes);
    }
    return BP_OK;
}

/* Score replica 0, holding the average of the replicas where they differ. */
static bp_status score_model(trainer *t, double *sum, double *correct, double *rows, bool *cut,
                             bp_err *err) {
    const bp_backend *be = t->dev.be;
    bp_dp *dp = bp_stage_dp(t->stage);
    bool swap = bp_dp_replicas_differ(dp);
    size_t bytes = bp_model_num_params(bp_stage_model(t->stage, 0)) * sizeof(float);
    const char *what = "the averaged model for evaluation";
    bp_status rc = BP_OK;
    if (swap && !t->avg_params) rc = be->alloc(be, (void **)&t->avg_params, bytes, what, err);
    if (swap && rc == BP_OK && !t->eval_saved)
        rc = be->alloc(be, (void **)&t->eval_saved, bytes, what, err);
    if (swap && rc == BP_OK) rc = bp_dp_swap_in_average(dp, t->avg_params, t->eval_saved, err);
    if (rc) return rc;
    if (trainer_in_replica0(t)) rc = score(t, sum, correct, rows, cut, err);
    if (swap) bp_dp_swap_back(dp, t->eval_saved);
    return rc;
}

bp_status trainer_evaluate(trainer *t, bp_err *err) {
    double sum = 0, correct = 0, rows = 0;
    bool cut = false;
    bp_status rc = score_model(t, &sum, &correct, &rows, &cut, err);
    if (rc || !trainer_in_replica0(t)) return rc;
    if (cut) { /* replica 0 is this one rank: nobody waits for its result */
        bp_log_info("evaluation at step %lld cut short by a signal", (long long)t->step);
        return BP_OK;
    }
    float result[3] = {(float)sum, (float)correct, (float)rows};
    int last = t->grid.pp - 1;
    if (t->grid.t != 0) return BP_OK; /* tp ranks compute the same; rank t = 0 reports */
    if (last > 0 && t->grid.p == last) rc = bp_send(t->grid.pp_comm, result, 3, 0, TAG_EVAL);
    if (last > 0 && t->grid.p == 0) rc = bp_recv(t->grid.pp_comm, result, 3, last, TAG_EVAL);
    if (rc) return bp_comm_fail(t->grid.pp_comm, rc, err);
    if (t->rank != 0) return BP_OK;
    double loss = result[0] / result[2];
    const bp_model_config *mc = bp_model_get_config(bp_stage_model(t->stage, 0));
    double acc = bp_model_kind_facts(mc->kind)->accuracy ? result[1] / result[2] : NAN;
    bp_metrics_eval(&t->metrics, t->step, loss, acc);
    if (isnan(acc))
        bp_progress_note(&t->progress, "step %lld: validation loss %.4f", (long long)t->step, loss);
    else
        bp_progress_note(&t->progress, "step %lld: test loss %.4f, accuracy %.4f",
                         (long long)t->step, loss, acc);
    t->res->val_loss = loss;
    t->res->val_acc = acc;
    if (t->probe && t->probe->on_eval)
        t->probe_done = !t->probe->on_eval(t->probe->ctx, t->step, loss);
    return BP_OK;
}
