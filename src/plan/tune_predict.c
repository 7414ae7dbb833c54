/* Prediction for the tuner (plan/tune_search.h): a candidate's step by the step
 * simulator (plan/sim_step.h), with its stages as profiled and the machine of
 * the kernels timed with them. */
#include <math.h>

#include "plan/tune_impl.h"

/* The machine with computation `slow` times its CPU time and ranks that waited
 * running again after `wake` seconds, into *m (whose profile is *p). */
static void machine(const tuner *t, double slow, double wake, bp_sim_profile *p,
                    bp_sim_machine *m) {
    *p = t->kernels;
    p->slowdown = slow;
    p->wake_s = wake;
    bp_sim_link l = t->link;
    l.wake_s = wake;
    *m = (bp_sim_machine){.prof = p, .intra = l, .inter = l};
}

/* Simulate candidate k with computation `slow` times its CPU time and ranks that
 * waited running again after `wake` seconds. */
static bp_status simulate(const tuner *t, const bp_tune_candidate *k, double slow, double wake,
                          bp_sim_step_result *r) {
    const bp_tune_setup *u = &t->setups[k->setup];
    bp_sim_stage st[t->S];
    for (int s = 0; s < t->S; s++) {
        st[s] = u->stage[s];
        st[s].fwd_s *= slow;
        st[s].bwd_s *= slow;
        st[s].update_s *= slow;
    }
    bp_sim_job j = t->c->job;
    j.N = k->N;
    j.avgpipe = k->avgpipe;
    j.local_steps = k->avgpipe && t->c->local_steps;
    j.stream_steps = k->avgpipe ? t->c->stream_steps : 1;
    j.M = k->M * t->c->grad_accum;
    j.micro_B = u->micro_B;
    j.sched = k->sched;
    j.first = u->first;
    j.measured = st;
    bp_sim_profile p;
    bp_sim_machine m;
    machine(t, slow, wake, &p, &m);
    bp_err ignored; /* a stall is reported by the search, naming the candidate */
    return bp_sim_step(&j, &m, r, &ignored);
}

bp_status bp_tune_predict(const tuner *t, bp_tune_candidate *k) {
    bp_sim_step_result loaded, idle = {0};
    bp_status rc = simulate(t, k, bp_tune_slowdown(t), t->wake_s, &loaded);
    if (rc == BP_OK) rc = simulate(t, k, 1.0, 0.0, &idle);
    k->r = (bp_sim_result){.step_s = loaded.step_s, .peak_bytes = loaded.peak_bytes,
                           .bubble = loaded.bubble};
    k->unloaded_s = idle.step_s;
    k->samples_per_s = (double)t->c->batch * t->c->grad_accum * k->batches / k->r.step_s;
    k->to_target = k->to_target_s = NAN;
    return rc;
}
