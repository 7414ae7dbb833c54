#include "plan/tune.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "plan/simulate.h"
#include "parallel/dp/easgd.h"

#define OFF(f) offsetof(bp_tune_config, f)
static const bp_option tune_options[] = {
    {"mem-cap", BP_OPT_DOUBLE, OFF(mem_cap), 0, NULL, 0, 1e12, "MB",
     "memory per rank the chosen candidate must fit in (parameters, gradients, optimizer state "
     "and workspace of every replica, plus stashed activations)",
     "no cap"},
    {"top", BP_OPT_INT, OFF(top), 0, NULL, 0, 1 << 20, "N", "print only the N fastest candidates",
     "all"},
    {"msg-us", BP_OPT_DOUBLE, OFF(msg_us), 0, NULL, 0, 1e9, "US",
     "without --net: fixed cost of one message between ranks, in microseconds", NULL},
    {"load", BP_OPT_DOUBLE, OFF(load), 0, NULL, 1, 1e6, "X",
     "predict for computation X times slower than its CPU time (1: cores free) instead of the "
     "slowdown measured now",
     "measured"},
    {"wake-ms", BP_OPT_DOUBLE, OFF(wake_ms), 0, NULL, 0, 1e6, "MS",
     "predict for ranks that run again this long after a message they waited for arrived, "
     "instead of the delay measured now",
     "measured"},
    {"busy-threads", BP_OPT_INT, OFF(busy_threads), 0, NULL, 0, 64, "N",
     "threads computing alongside the profile, standing for the job's other ranks on this "
     "machine",
     "ranks - 1"},
    {"trial-steps", BP_OPT_INT64, OFF(trial_steps), 0, NULL, 0, 10000, "K",
     "rank by the time to a validation loss: train one pipeline and each N of the candidates "
     "K steps in this process (the run's model, data, batch per pipeline, seed, learning rate "
     "and averaging) and take the loss one pipeline reaches as the target (0: rank by samples "
     "per second; at most 10000)",
     NULL},
};
#undef OFF

bp_option *bp_tune_options(int *n) {
    return bp_train_options_with(tune_options, (int)(sizeof tune_options / sizeof tune_options[0]), n);
}

void bp_tune_config_defaults(bp_tune_config *c, int for_help) {
    memset(c, 0, sizeof *c);
    bp_train_config_defaults(&c->train);
    /* Open MPI's shared-memory latency plus comm/'s bookkeeping, on cores that are
     * free; the scheduler's delay on a loaded machine is measured apart. */
    c->msg_us = 10;
    c->busy_threads = -1;
    c->wake_ms = -1;
    c->trial_steps = 100;
    if (for_help) return;
    c->train.pipeline.micro_batches = 0; /* 0, "" and pipelines 0: search */
    c->train.pipeline.schedule[0] = '\0';
}

static int data_ranks(const bp_train_config *t) { return t->dp > 0 ? t->dp : 1; }

bp_status bp_tune_config_finalize(bp_tune_config *c, bp_err *err) {
    bp_status rc = bp_train_config_finalize(&c->train, err);
    if (rc) return rc;
    if (c->trial_steps > c->train.steps) /* the trial runs the first steps of the run */
        return bp_fail(err, BP_EUSAGE, "option --trial-steps: %lld is more than --steps %lld",
                       (long long)c->trial_steps, (long long)c->train.steps);
    if (c->train.tp > 1) /* its stages would be timed whole and its command lack the tp ranks */
        return bp_fail(err, BP_EUSAGE,
                       "option --tp: tune does not model tensor parallelism; tune with --tp 1 and "
                       "add --tp to the suggested command (with tp times the ranks)");
    bp_train_config probe = c->train;
    if (!probe.pipeline.micro_batches) probe.pipeline.micro_batches = 1;
    if (!probe.pipeline.schedule[0])
        snprintf(probe.pipeline.schedule, sizeof probe.pipeline.schedule, "1f1b");
    probe.dp = data_ranks(&probe);
    int world;
    rc = bp_train_grid_ranks(&probe, probe.dp, probe.pipeline.stages, &world, err);
    if (rc == BP_OK) rc = bp_train_config_check_world(&probe, world, err);
    c->train.dp = probe.dp;
    return rc;
}

/* Whether a candidate makes a valid `bagpipe train` run: the train checks. */
static bool valid_run(void *ctx, int pipelines, int micro_batches, const bp_schedule *sched) {
    const bp_tune_config *c = ctx;
    bp_train_config tc = c->train;
    tc.avgpipe.pipelines = pipelines;
    tc.pipeline.micro_batches = micro_batches;
    bp_schedule_name(sched, tc.pipeline.schedule, sizeof tc.pipeline.schedule);
    bp_err ignored;
    int world = data_ranks(&c->train) * c->train.pipeline.stages;
    return bp_train_config_check_world(&tc, world, &ignored) == BP_OK;
}

bp_status bp_tune_problem_init(const bp_tune_config *c, bp_tune_problem *p, bp_err *err) {
    const bp_train_config *tc = &c->train;
    *p = (bp_tune_problem){.S = tc->pipeline.stages, .dp = data_ranks(tc), .batch = tc->batch,
                           .grad_accum = tc->grad_accum,
                           .ea_period = bp_easgd_of(&tc->dp_settings)->period,
                           .pipelines = tc->avgpipe.pipelines,
                           .own_batches = tc->avgpipe.batch == BP_AVGPIPE_OWN_BATCH,
                           .micro_batches = tc->pipeline.micro_batches,
                           .msg_us = c->msg_us, .load = c->load, .wake_ms = c->wake_ms,
                           .poll_s = tc->comm.poll_us * 1e-6,
                           .busy_threads = c->busy_threads, .valid = valid_run, .ctx = (void *)c};
    bp_train_config with_avgpipe = *tc; /* whether AvgPipe candidates would run local steps */
    with_avgpipe.avgpipe.pipelines = 1;
    p->local_steps = bp_train_local_steps(&with_avgpipe, p->dp * p->S);
    p->stream_steps = p->local_steps ? bp_train_stream_steps(&with_avgpipe) : 1;
    bp_train_model_config(tc, &p->model);
    bp_train_optim_config(tc, &p->optim);
    bp_train_config probe = *tc; /* a valid run for reading the rest of the options */
    probe.pipeline.micro_batches = 1;
    snprintf(probe.pipeline.schedule, sizeof probe.pipeline.schedule, "1f1b");
    bp_simulate_job(&probe, &p->job);
    snprintf(p->schedule, sizeof p->schedule, "%s", tc->pipeline.schedule);
    snprintf(p->partition, sizeof p->partition, "%s", tc->pipeline.partition);
    bp_status rc = bp_net_parse(tc->comm.net, &p->net, err);
    return rc ? bp_err_context(err, "option --net") : BP_OK;
}
