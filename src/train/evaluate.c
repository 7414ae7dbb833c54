/* Evaluation on the fixed evaluation set, by replica 0: its stages run the batches
 * forward through the pipeline; the last stage scores them and sends the result to
 * stage 0, whose rank 0 logs it. Other replicas go on training meanwhile. */
#include <math.h>

#include "train/trainer_impl.h"

enum { TAG_EVAL = 3 };

/* Loss summed over rows and correct predictions, on the last stage. */
static int score(trainer *t, double *sum, double *correct, double *rows, bp_err *err) {
    *sum = *correct = *rows = 0;
    int n = bp_task_eval_count(&t->task, t->micro_B);
    for (int i = 0; i < n; i++) {
        bp_batch b;
        bp_task_eval_batch(&t->task, i, t->micro_B, &b);
        double loss;
        const bp_real *logits;
        int rc = bp_pipe_eval(t->pipe, 0, &b, &loss, &logits, err);
        if (rc) return rc;
        if (!logits) continue;
        *sum += loss * b.B;
        *rows += b.B;
        if (t->task.kind == BP_MODEL_MLP) *correct += bp_count_correct(logits, b.targets, b.B, 10);
    }
    return BP_OK;
}

int trainer_evaluate(trainer *t, bp_err *err) {
    if (!trainer_in_replica0(t)) return BP_OK;
    double sum, correct, rows;
    int rc = score(t, &sum, &correct, &rows, err);
    if (rc) return rc;
    float result[3] = {(float)sum, (float)correct, (float)rows};
    int last = t->grid.pp - 1;
    if (t->grid.t != 0) return BP_OK; /* tp ranks compute the same; rank t = 0 reports */
    if (last > 0 && t->grid.p == last) rc = bp_send(t->grid.pp_comm, result, 3, 0, TAG_EVAL);
    if (last > 0 && t->grid.p == 0) rc = bp_recv(t->grid.pp_comm, result, 3, last, TAG_EVAL);
    if (rc) return bp_fail(err, (bp_status)rc, "%s", bp_comm_errmsg(t->grid.pp_comm));
    if (t->rank != 0) return BP_OK;
    double loss = result[0] / result[2];
    double acc = t->task.kind == BP_MODEL_MLP ? result[1] / result[2] : NAN;
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
