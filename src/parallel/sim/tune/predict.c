/* Prediction for the tuner (parallel/sim/tune.h): a candidate's step from the
 * profiled stages, by the pipeline simulation. */
#include "parallel/sim/tune/tuner.h"

/* Steps of candidate k's pipeline stream (1: a flush every step). */
static int stream_steps(const tuner *t, const bp_tune_candidate *k) {
    return k->avgpipe && t->c->stream_steps > 1 ? t->c->stream_steps : 1;
}

/* One replica's tied embedding allreduce between the first and last stages. */
static double embed_s(const tuner *t, const bp_sim_link *l) {
    if (t->c->model.kind != BP_MODEL_GPT || t->S <= 1) return 0;
    return bp_sim_allreduce_s(
        l, 2, (size_t)t->c->model.vocab * (size_t)t->c->model.n_embd * sizeof(bp_real));
}

/* The collectives that end a step (a stream of K steps: its last): the tied
 * embedding's gradient between the first and last stage (per replica), the ranks'
 * agreement on the step (2 floats), the global gradient norm over the stages (a
 * float per replica; with AvgPipe's local steps these two only every --ea-period
 * steps), and across dp ranks the gradients (an allreduce each step; other dp
 * algorithms are costed alike) or, for AvgPipe, the centers every --ea-period steps. */
static double sync_seconds(const tuner *t, const bp_tune_candidate *k, const bp_sim_link *l) {
    const bp_tune_setup *p = &t->setups[k->setup];
    double s = k->N * embed_s(t, l), per = (double)stream_steps(t, k) / (double)t->c->ea_period;
    double agree = bp_sim_allreduce_s(l, t->W, 2 * sizeof(float)) +
                   bp_sim_allreduce_s(l, t->S, (size_t)k->N * sizeof(float));
    s += k->avgpipe && t->c->local_steps ? agree * per : agree;
    size_t params = 0;
    for (int i = 0; i < t->S; i++) params = p->param_bytes[i] > params ? p->param_bytes[i] : params;
    double dp_s = bp_sim_allreduce_s(l, t->dp, params);
    s += k->avgpipe ? dp_s * per : dp_s;
    return s;
}

/* Each replica's update, plus AvgPipe's elastic averaging every --ea-period steps
 * (a stream of K steps: its last step's, and the averaging once), which passes over
 * every replica's weights about like an optimizer step does. */
static double update_seconds(const tuner *t, const bp_tune_candidate *k, double one) {
    double avg = k->avgpipe ? one * stream_steps(t, k) / (double)t->c->ea_period : 0;
    return k->N * (one + avg);
}

/* Simulate candidate k with computation `slow` times its CPU time and ranks that
 * waited running again after `wake` seconds. A stream's inline updates cost one
 * replica's optimizer step, plus its tied embedding's allreduce on the first and
 * last stages. */
static int simulate(const tuner *t, const bp_tune_candidate *k, double slow, double wake,
                    bp_sim_result *r) {
    const bp_tune_setup *p = &t->setups[k->setup];
    bp_sim_stage st[t->S];
    bp_sim_link link = t->link;
    link.wake_s = wake;
    for (int s = 0; s < t->S; s++) {
        st[s] = p->stage[s];
        st[s].fwd_s *= slow;
        st[s].bwd_s *= slow;
        st[s].update_s = slow * update_seconds(t, k, p->stage[s].update_s);
        bool ends = s == 0 || s == t->S - 1;
        st[s].upd_s = slow * p->stage[s].update_s + (ends ? embed_s(t, &link) : 0);
    }
    bp_sim_config sc = {.S = t->S, .N = k->N, .M = k->M * t->c->grad_accum,
                        .K = stream_steps(t, k), .tied = t->c->model.kind == BP_MODEL_GPT,
                        .sched = k->sched, .stage = st, .link = link};
    sc.sync_s = sync_seconds(t, k, &sc.link);
    return bp_sim_run(&sc, r, NULL);
}

bp_status bp_tune_predict(const tuner *t, bp_tune_candidate *k) {
    bp_sim_result idle;
    int rc = simulate(t, k, bp_tune_slowdown(t), t->wake_s, &k->r);
    if (rc == BP_OK) rc = simulate(t, k, 1.0, 0.0, &idle);
    k->unloaded_s = idle.step_s;
    k->samples_per_s = (double)t->c->batch * t->c->grad_accum * k->batches / k->r.step_s;
    k->to_target = k->to_target_s = NAN;
    return (bp_status)rc;
}

