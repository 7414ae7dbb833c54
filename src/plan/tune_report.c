/* `bagpipe tune`: the search of plan/tune_search.h for the options of plan/tune.h,
 * printed as a table and as the train command line to run. */
#include "plan/tune_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/blas.h"
#include "core/options.h"
#include "core/timer.h"
#include "parallel/dp/easgd.h"
#include "parallel/partition.h"
#include "plan/tune_search.h"

/* Options of the train command that tune chooses itself or that only tune has: the
 * suggested command line gets them from the chosen candidate, not from argv. */
static const char *const chosen_options[] = {
    "pipelines", "micro-batches", "schedule", "partition",    "mem-cap",
    "top",       "msg-us",        "load",     "wake-ms",      "busy-threads", "trial-steps"};

#define MB(x) ((double)(x) / 1048576.0)

/* One row of the profile table: a setup's partition and per stage its forward and
 * backward CPU ms and activation MB per micro-batch. */
static void print_setup(const bp_tune_result *t, const bp_tune_setup *u, FILE *out) {
    char part[256];
    bp_partition_format(u->first, t->S, part, sizeof part);
    fprintf(out, "  %3d %5d  %-12s", u->N, u->micro_B, part);
    for (int s = 0; s < t->S; s++) {
        char cell[64];
        snprintf(cell, sizeof cell, "%.2f/%.2f %.2fMB", u->stage[s].fwd_s * 1e3,
                 u->stage[s].bwd_s * 1e3, MB(u->stage[s].act_bytes));
        fprintf(out, "  %-21s", cell);
    }
    fprintf(out, "\n");
}

static void print_header(const bp_tune_config *c, const bp_tune_result *t, FILE *out) {
    const bp_train_config *tc = &c->train;
    bp_model_config mc;
    char shape[160];
    bp_train_model_config(tc, &mc);
    fprintf(out, "bagpipe tune: %s (%s)", bp_model_kind_name(mc.kind),
            bp_model_describe(&mc, shape, sizeof shape));
    fprintf(out, ", batch %d, dp %d x pp %d = %d ranks, network %s\n", tc->batch, t->dp, t->S,
            t->W, tc->comm.net[0] ? tc->comm.net : "off");
    fprintf(out, "profiled %d micro-batch sizes in %.1f s; machine load: computation runs %.2fx "
                 "its CPU time%s, a rank that waited runs again after %.3f ms%s\n",
            t->n_sizes, t->seconds, bp_tune_slowdown(t), c->load >= 1 ? " (given)" : "",
            t->wake_s * 1e3, c->wake_ms >= 0 ? " (given)" : "");
    fprintf(out, "per stage with N replicas: forward/backward CPU ms and activation MB per "
                 "micro-batch\n");
    fprintf(out, "  %3s %5s  %-12s", "N", "micro", "partition");
    for (int s = 0; s < t->S; s++) fprintf(out, "  stage %-15d", s);
    fprintf(out, "\n");
    for (int i = 0; i < t->n_setups; i++) print_setup(t, &t->setups[i], out);
}

static bool fits(const bp_tune_config *c, const bp_tune_candidate *k) {
    return c->mem_cap <= 0 || MB(k->r.peak_bytes) <= c->mem_cap;
}

/* What the trial found per N: the steps it ran, the samples to the target, their
 * factor over one pipeline's, and the seconds it took. */
static void print_trial(const bp_tune_config *c, const bp_tune_trial *tr, FILE *out) {
    char on[64] = "the test set"; /* mlp evaluates on all of it */
    if (bp_model_kind_facts((bp_model_kind)c->train.model)->reads_tokens)
        snprintf(on, sizeof on, "%d batches", tr->eval_batches);
    fprintf(out, "convergence trial: %lld steps of one pipeline reach validation loss %.4f "
                 "(the target); per N, the trainer's run in this process, evaluated every "
                 "%lld steps on %s, stopped at the target (%.1f s in all):\n",
            (long long)tr->steps, tr->target, (long long)tr->eval_every, on, tr->seconds);
    fprintf(out, "  %3s %6s %10s %7s %8s\n", "N", "steps", "samples", "factor", "seconds");
    for (int i = 0; i < tr->n; i++) {
        const bp_tune_curve *v = &tr->curve[i];
        char samples[32] = "never", factor[32] = "-";
        if (v->diverged) snprintf(samples, sizeof samples, "diverged");
        if (isfinite(v->to_target)) {
            snprintf(samples, sizeof samples, "%.0f", v->to_target);
            snprintf(factor, sizeof factor, "%.2f", v->to_target / tr->curve[0].to_target);
        }
        fprintf(out, "  %3d %6lld %10s %7s %8.1f\n", v->pipelines ? v->pipelines : 1,
                (long long)v->steps, samples, factor, v->seconds);
    }
}

/* A candidate's samples and seconds to the target, or why there are none. */
static void target_cells(const bp_tune_candidate *k, char *samples, char *secs, size_t n) {
    if (isfinite(k->to_target)) {
        snprintf(samples, n, "%.0f", k->to_target);
        snprintf(secs, n, "%.2f", k->to_target_s);
    } else {
        snprintf(samples, n, "%s", k->diverged ? "diverged" : "never");
        snprintf(secs, n, "-");
    }
}

static void print_table(const bp_tune_config *c, const bp_tune_result *t, const bp_tune_trial *tr,
                        FILE *out) {
    int rows = c->top > 0 && c->top < t->n_cand ? c->top : t->n_cand;
    if (tr)
        fprintf(out, "predicted, least time to validation loss %.4f first (one pipeline's after "
                     "--trial-steps %lld) (%d of %d candidates):\n",
                tr->target, (long long)tr->steps, rows, t->n_cand);
    else
        fprintf(out, "predicted, most samples/s first (%d of %d candidates):\n", rows, t->n_cand);
    fprintf(out, "  %4s %3s %3s %5s  %-9s %9s %10s %8s %6s %4s %11s", "rank", "N", "M", "micro",
            "schedule", "step_ms", "samples/s", "peak_MB", "bubble", "fits", "unloaded_ms");
    fprintf(out, tr ? " %10s %9s\n" : "\n", "to_target", "target_s");
    for (int i = 0; i < rows; i++) {
        const bp_tune_candidate *k = &t->cand[i];
        char name[32], samples[32], secs[32];
        bp_schedule_name(&k->sched, name, sizeof name);
        fprintf(out, "  %4d %3d %3d %5d  %-9s %9.2f %10.1f %8.3f %5.0f%% %4s %11.2f", i + 1, k->N,
                k->M, t->setups[k->setup].micro_B, name, k->r.step_s * 1e3, k->samples_per_s,
                MB(k->r.peak_bytes), 100 * k->r.bubble, fits(c, k) ? "yes" : "no",
                k->unloaded_s * 1e3);
        target_cells(k, samples, secs, sizeof samples);
        fprintf(out, tr ? " %10s %9s\n" : "\n", samples, secs);
    }
}

static bool is_chosen(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof chosen_options / sizeof chosen_options[0]; i++)
        if (strlen(chosen_options[i]) == len && !strncmp(chosen_options[i], name, len)) return true;
    return false;
}

/* The given options (already validated) except those the candidate decides. */
static void print_given(int argc, char **argv, FILE *out) {
    int n;
    bp_option *opts = bp_tune_options(&n);
    for (int i = 0; opts && i < argc; i++) {
        const char *name = argv[i] + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        bool flag = false;
        for (int j = 0; j < n; j++)
            if (strlen(opts[j].name) == len && !strncmp(opts[j].name, name, len))
                flag = opts[j].type == BP_OPT_FLAG;
        bool takes_next = !eq && !flag && i + 1 < argc;
        if (!is_chosen(name, len)) {
            bp_options_print_shell_word(out, argv[i]);
            if (takes_next) bp_options_print_shell_word(out, argv[i + 1]);
        }
        i += takes_next;
    }
    free(opts);
}

static void print_command(const bp_tune_config *c, const bp_tune_result *t,
                          const bp_tune_candidate *k, const char *prog, int argc, char **argv,
                          FILE *out) {
    char sched[32];
    bp_schedule_name(&k->sched, sched, sizeof sched);
    fprintf(out, " ");
    if (t->W > 1) fprintf(out, " mpirun -np %d", t->W);
    bp_options_print_shell_word(out, prog);
    fprintf(out, " train");
    print_given(argc, argv, out);
    if (t->S > 1) {
        char part[256];
        bp_partition_format(t->setups[k->setup].first, t->S, part, sizeof part);
        fprintf(out, " --partition %s", part);
    }
    if (k->avgpipe) fprintf(out, " --pipelines %d", k->N);
    /* Spelled out, so that the command shows the alpha (N + 1) < 2 it converges with. */
    if (k->avgpipe && bp_easgd_of(&c->train.dp_settings)->alpha < 0)
        fprintf(out, " --ea-alpha %g", bp_dp_ea_default_alpha(k->N));
    fprintf(out, " --micro-batches %d --schedule %s\n", k->M, sched);
}

static bp_status choose(const bp_tune_config *c, const bp_tune_result *t, const bp_tune_trial *tr,
                        const char *prog, int argc, char **argv, FILE *out, bp_err *err) {
    const bp_tune_candidate *best = NULL, *smallest = &t->cand[0];
    for (int i = 0; i < t->n_cand; i++) {
        if (!best && fits(c, &t->cand[i]) && !t->cand[i].diverged) best = &t->cand[i];
        if (t->cand[i].r.peak_bytes < smallest->r.peak_bytes) smallest = &t->cand[i];
    }
    char name[32];
    if (!best && fits(c, smallest)) /* only the diverged ones fit */
        return bp_fail(err, BP_EUSAGE,
                       "option --trial-steps: every candidate%s diverged in the convergence "
                       "trial (its loss went non-finite)",
                       c->mem_cap > 0 ? " within --mem-cap" : "");
    if (!best) {
        bp_schedule_name(&smallest->sched, name, sizeof name);
        return bp_fail(err, BP_EUSAGE,
                       "option --mem-cap: no candidate fits in %g MB; the smallest needs %.3f MB "
                       "(N=%d, M=%d, %s)",
                       c->mem_cap, MB(smallest->r.peak_bytes), smallest->N, smallest->M,
                       name);
    }
    bp_schedule_name(&best->sched, name, sizeof name);
    char to_target[96] = "";
    if (tr && isfinite(best->to_target))
        snprintf(to_target, sizeof to_target, ", %.2f s to validation loss %.4f", best->to_target_s,
                 tr->target);
    fprintf(out, "fastest%s: N=%d M=%d %s, %.2f ms per step, %.1f samples/s%s, peak %.3f MB\n",
            c->mem_cap > 0 ? " within --mem-cap" : "", best->N, best->M, name,
            best->r.step_s * 1e3, best->samples_per_s, to_target, MB(best->r.peak_bytes));
    print_command(c, t, best, prog, argc, argv, out);
    return BP_OK;
}

/* The convergence trial of t's candidates in this process (MPI with one rank, as
 * the trainer needs it), and t ranked by its time to the target. */
static bp_status trial(const bp_tune_config *c, bp_tune_result *t, bp_tune_trial *tr, bp_err *err) {
    bp_comm *world;
    bp_status rc = bp_comm_init(NULL, NULL, &world, err);
    if (rc) return rc;
    if (bp_comm_size(world) > 1)
        rc = bp_fail(err, BP_EUSAGE, "bagpipe tune runs in one process: start it without mpirun");
    if (rc == BP_OK) rc = bp_tune_trial_run(c, world, t, tr, err);
    bp_comm_finalize(world);
    if (rc == BP_OK) bp_tune_rank_by_target(t, tr);
    return rc;
}

/* Progress of the profile on stderr when it will be slow, with more threads standing
 * for the job's other ranks than this machine has cores (a quick tune stays silent):
 * a line at once, then one after a measurement every 10 s at most, with the time left. */
typedef struct progress_state {
    double start, last;
    bool slow;
} progress_state;

static void show_progress(void *ctx, int done, int total, int busy_threads) {
    progress_state *ps = ctx;
    double now = bp_now(), took = now - ps->start;
    if (done == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        ps->slow = cores > 0 && busy_threads + 1 > cores;
        ps->start = ps->last = now;
        if (ps->slow)
            fprintf(stderr,
                    "tune: profiling %d setups with %d threads standing for the job's other ranks "
                    "on %ld cores: this takes minutes (--busy-threads sets how many)\n",
                    total, busy_threads, cores);
    } else if (ps->slow && (now - ps->last >= 10 || done == total)) {
        ps->last = now;
        fprintf(stderr, "tune: profiled %d of %d setups in %.0f s, about %.0f s left\n", done,
                total, took, took / done * (total - done));
    }
}

bp_status bp_tune_report(const bp_tune_config *c, const char *prog, int argc, char **argv, FILE *out,
                         bp_err *err) {
    bp_tune_problem p;
    bp_status rc = bp_tune_problem_init(c, &p, err);
    if (rc) return rc;
    progress_state ps = {0};
    p.progress = show_progress;
    p.progress_ctx = &ps;
    bp_blas_set_threads(c->train.threads);
    bp_train_denormals(&c->train.device); /* the profile computes as the runs will */
    bp_tune_result t;
    bp_tune_trial tr = {0};
    if ((rc = bp_tune_search(&p, &t, err))) return rc;
    if (c->trial_steps > 0) rc = trial(c, &t, &tr, err);
    if (rc == BP_OK) {
        print_header(c, &t, out);
        if (tr.n) print_trial(c, &tr, out);
        print_table(c, &t, tr.n ? &tr : NULL, out);
        rc = choose(c, &t, tr.n ? &tr : NULL, prog, argc, argv, out, err);
    }
    bp_tune_trial_free(&tr);
    bp_tune_result_free(&t);
    return rc;
}
