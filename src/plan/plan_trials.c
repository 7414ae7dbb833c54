/* `bagpipe plan --trials K`: the statistical efficiency measured here instead of the
 * shipped table. Among the leading configurations that fit, one per kind of update
 * (the dp algorithm and the number of its replicas, AvgPipe's N, Optimus-CC's flags:
 * what the steps to a loss depend on; at most --trial-kinds), and plain allreduce,
 * each trains K steps on the job's ranks (evaluating every K / 10); the target is
 * allreduce's validation loss at 60% of its steps, and a kind's factor is its steps to
 * the target over allreduce's (never reached within K: infinite, so it ranks last).
 * A kind with one replica and no Optimus-CC flag updates as one process does (factor
 * 1) and is not tried. Kinds not trialled keep the table's factor. A kind whose
 * updates depend on timing (async) is trialled a few times and takes the median. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "core/log.h"
#include "parallel/dp/algo.h"
#include "plan/plan_impl.h"
#include "train/trainer.h"

/* A kind whose updates depend on timing (bp_dp_plan.timing_dependent) is trialled
 * TRIAL_REPEATS times. */
enum { TRIAL_POINTS = 10, MAX_KINDS = BP_PLAN_MAX_TRIAL_KINDS, TRIAL_REPEATS = 3 };

static bool same_kind(const bp_plan_knobs *a, const bp_plan_knobs *b) {
    return a->algo == b->algo && a->pipelines == b->pipelines && a->sc == b->sc && a->cb == b->cb &&
           a->fe == b->fe && a->dp == b->dp;
}

/* One replica without Optimus-CC: the updates of one process, nothing to measure. */
static bool plain(const bp_plan_knobs *k) {
    return k->dp <= 1 && !k->pipelines && !k->sc && !k->cb && !k->fe;
}

/* The trial's run of candidate k: its configuration for K steps into dir. */
static bp_status trial_config(const bp_plan_config *c, int argc, char **argv,
                              const bp_plan_candidate *k, const char *dir, bp_train_config *t,
                              bp_err *err) {
    bp_plan_candidate run = *k;
    int64_t every = c->trials >= TRIAL_POINTS ? c->trials / TRIAL_POINTS : 1;
    size_t len = strlen(run.args);
    int n = snprintf(run.args + len, sizeof run.args - len,
                     " --steps %d --eval-every %lld --progress none --overwrite --out %s", c->trials,
                     (long long)every, dir);
    if (n < 0 || (size_t)n >= sizeof run.args - len)
        return bp_fail(err, BP_EUSAGE, "option --json: %s is too long a path for the trials", c->json);
    bp_status rc = bp_plan_configure(argc, argv, &run, k->dp * k->pp * k->tp, t, err);
    /* The trial's log is where read_curve looks, whatever --metrics the plan was
     * given; it starts afresh and traces nothing. */
    if (rc == BP_OK) rc = bp_path_join(t->metrics, sizeof t->metrics, dir, "metrics.jsonl", err);
    t->resume[0] = t->trace[0] = '\0';
    return rc;
}

/* Rank 0: the evaluations in dir's metrics log, [(step, loss)] into s and l. */
static int read_curve(const char *dir, double *s, double *l, int cap) {
    char path[BP_PATH_MAX + 32], line[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && n < cap && fgets(line, sizeof line, f)) {
        const char *st = strstr(line, "\"step\":"), *vl = strstr(line, "\"val_loss\":");
        if (!strstr(line, "\"type\":\"eval\"") || !st || !vl) continue;
        s[n] = strtod(st + 7, NULL), l[n] = strtod(vl + 11, NULL);
        n++;
    }
    if (f) fclose(f);
    return n;
}

/* Steps at which curve (s, l) first reaches target, linear between evaluations. */
static double steps_to(const double *s, const double *l, int n, double target) {
    for (int i = 0; i < n; i++) {
        if (!(l[i] <= target)) continue;
        if (i == 0 || !isfinite(l[i - 1])) return s[i];
        return s[i - 1] + (l[i - 1] - target) / (l[i - 1] - l[i]) * (s[i] - s[i - 1]);
    }
    return INFINITY;
}

/* The kinds to try: plain allreduce over all ranks first, then the leading ones. */
static int pick_kinds(const bp_plan_result *r, int max, int *pick) {
    int n = 0;
    for (int i = 0; i < r->n_cand && n == 0; i++) {
        const bp_plan_candidate *k = &r->cand[i];
        if (k->verdict == BP_PLAN_OK && k->dp == r->world && k->knobs.algo == 0 && !k->knobs.sc &&
            !k->knobs.cb && !k->knobs.fe && !k->knobs.pipelines)
            pick[n++] = i;
    }
    for (int i = 0; i < r->n_cand && n < max; i++) {
        bool seen = r->cand[i].verdict != BP_PLAN_OK || plain(&r->cand[i].knobs);
        for (int j = 0; j < n && !seen; j++) seen = same_kind(&r->cand[pick[j]].knobs, &r->cand[i].knobs);
        if (!seen) pick[n++] = i;
    }
    return n;
}

/* How many trials kind k takes: one, or TRIAL_REPEATS where its updates depend on
 * timing (its factor is then their median). */
static int repeats(const bp_plan_knobs *k) {
    return bp_dp_ops(k->algo)->plan.timing_dependent ? TRIAL_REPEATS : 1;
}

/* Trial `rep` of kind i (candidate k) into <json>.trials/i (a repeat: i.rep); rank 0
 * reads its curve into (s, l), *len points. */
static bp_status one_trial(const bp_plan_config *c, bp_comm *world, int argc, char **argv,
                           const bp_plan_candidate *k, int i, int n, int rep, double *s,
                           double *l, int *len, bp_err *err) {
    char dir[176];
    if (rep) snprintf(dir, sizeof dir, "%.140s.trials/%d.%d", c->json, i, rep);
    else snprintf(dir, sizeof dir, "%.140s.trials/%d", c->json, i);
    bp_train_config t;
    bp_status rc = trial_config(c, argc, argv, k, dir, &t, err);
    /* Trials run for minutes or more: say which, so that a long plan is seen to move. */
    if (rc == BP_OK && bp_comm_rank(world) == 0) {
        char again[32] = "";
        if (repeats(&k->knobs) > 1) snprintf(again, sizeof again, " (%d of %d)", rep + 1, repeats(&k->knobs));
        bp_log_info("plan: trial %d of %d%s, %d steps: %s", i + 1, n, again, c->trials, k->args);
    }
    bp_train_result res = {0};
    static const volatile sig_atomic_t never = 0; /* a trial runs its steps */
    if (rc == BP_OK) rc = bp_train_run(&t, world, &never, &res, err);
    if (rc) bp_err_context(err, "option --trials: the trial of %s", k->args);
    if (rc == BP_OK && bp_comm_rank(world) == 0) *len = read_curve(dir, s, l, TRIAL_POINTS + 2);
    return rc;
}

/* Kind i's steps to the target: the median of its trials', each listed in `each`. */
static double kind_steps(int reps, double s[][TRIAL_POINTS + 2], double l[][TRIAL_POINTS + 2],
                         const int *len, double target, char *each, size_t cap) {
    double steps[TRIAL_REPEATS];
    size_t used = 0;
    each[0] = '\0';
    for (int r = 0; r < reps; r++) {
        steps[r] = steps_to(s[r], l[r], len[r], target);
        int w = snprintf(each + used, cap - used, "%s%.0f", r ? ", " : "", steps[r]);
        if (w > 0 && (size_t)w < cap - used) used += (size_t)w;
    }
    qsort(steps, (size_t)reps, sizeof *steps, bp_plan_cmp_double);
    return reps % 2 ? steps[reps / 2] : (steps[reps / 2 - 1] + steps[reps / 2]) / 2;
}

bp_status bp_plan_trials(const bp_plan_config *c, bp_comm *world, int argc, char **argv,
                         bp_plan_result *r, bp_err *err) {
    int pick[MAX_KINDS], n = pick_kinds(r, c->trial_kinds, pick);
    if (n == 0 || r->cand[pick[0]].dp != r->world)
        return bp_fail(err, BP_EUSAGE, "option --trials: plain allreduce over every rank does not fit");
    double s[MAX_KINDS][TRIAL_REPEATS][TRIAL_POINTS + 2], l[MAX_KINDS][TRIAL_REPEATS][TRIAL_POINTS + 2];
    int len[MAX_KINDS][TRIAL_REPEATS] = {{0}};
    if (strlen(c->json) > 140)
        return bp_fail(err, BP_EUSAGE, "option --json: %s is too long a path for the trials", c->json);
    bp_status rc = BP_OK;
    for (int i = 0; rc == BP_OK && i < n; i++)
        for (int rep = 0; rc == BP_OK && rep < repeats(&r->cand[pick[i]].knobs); rep++)
            rc = one_trial(c, world, argc, argv, &r->cand[pick[i]], i, n, rep, s[i][rep], l[i][rep],
                           &len[i][rep], err);
    if (rc || bp_comm_rank(world) != 0) return rc;
    double base = INFINITY, target = NAN;
    for (int p = 0; p < len[0][0]; p++)
        if (s[0][0][p] <= 0.6 * c->trials) target = l[0][0][p];
    if (!isfinite(target))
        return bp_fail(err, BP_EIO, "option --trials: allreduce's trial logged no evaluation by "
                       "step %.0f (60%% of %d)", 0.6 * c->trials, c->trials);
    base = steps_to(s[0][0], l[0][0], len[0][0], target);
    r->trial_target = target;
    for (int i = 0; i < n; i++) {
        const bp_plan_knobs *kind = &r->cand[pick[i]].knobs;
        char each[96];
        int reps = repeats(kind);
        double steps = kind_steps(reps, s[i], l[i], len[i], target, each, sizeof each), f = steps / base;
        for (int j = 0; j < r->n_cand; j++) {
            bp_plan_candidate *k = &r->cand[j];
            if (!same_kind(kind, &k->knobs)) continue;
            k->factor = f;
            k->trialled = true;
            int w = snprintf(k->trial_source, sizeof k->trial_source,
                             "trial of %d steps: %.0f steps to loss %.4f against allreduce's %.0f", c->trials,
                             steps, target, base);
            if (reps > 1 && w > 0 && (size_t)w < sizeof k->trial_source)
                snprintf(k->trial_source + w, sizeof k->trial_source - (size_t)w,
                         " (the median of %d trials, %s: its updates depend on timing)", reps, each);
        }
    }
    return BP_OK;
}
