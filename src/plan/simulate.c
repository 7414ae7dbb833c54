#include "plan/simulate.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bagpipe/comm.h"
#include "core/device.h"
#include "parallel/partition.h"
#include "plan/sim_model.h"
#include "plan/sim_step.h"
#include "plan/sim_measure.h"

#define OFF(f) offsetof(bp_simulate_config, f)
#define PATH(name, field, meta, help) \
    {name, BP_OPT_STRING, OFF(field), sizeof(((bp_simulate_config *)0)->field), NULL, 0, 0, meta, help, NULL}
static const bp_option simulate_options[] = {
    PATH("measure", measure, "FILE",
         "profile every block, the optimizer and the codecs here, now (next to the job's "
         "other ranks as busy threads), save the profile to FILE and predict with it"),
    PATH("profile", profile, "FILE", "predict with a profile saved by --measure"),
    {"device-flops", BP_OPT_DOUBLE, OFF(device_flops), 0, NULL, 1, 1e20, "FLOP/S",
     "instead of a profile: the device's peak FLOP rate (e.g. 15.7e12 for a V100 in fp32)",
     NULL},
    {"device-bw", BP_OPT_DOUBLE, OFF(device_bw), 0, NULL, 1, 1e16, "B/S",
     "with --device-flops: its memory bandwidth in bytes per second", NULL},
    {"efficiency", BP_OPT_DOUBLE, OFF(efficiency), 0, NULL, 1e-3, 1, "X",
     "with --device-flops or --device emu:GPU: the share of peak FLOP rate and bandwidth "
     "reached (an emulated run's is 0.5)",
     NULL},
    PATH("intra", intra, "SPEC", "network within a node, as --net (bw=...,lat=...)"),
    PATH("inter", inter, "SPEC", "network between nodes, as --net; its bandwidth is per node"),
    {"ranks-per-node", BP_OPT_INT, OFF(ranks_per_node), 0, NULL, 1, 1 << 20, "N",
     "with --intra/--inter: ranks per node (grid order: tp, then dp, then pp)", "all ranks"},
    {"msg-us", BP_OPT_DOUBLE, OFF(msg_us), 0, NULL, 0, 1e9, "US",
     "a message between ranks on this machine (no --net, --intra or --inter): fixed cost", NULL},
    BP_SIM_EAGER_OPTION(OFF(eager_bytes)),
    {"wake-ms", BP_OPT_DOUBLE, OFF(wake_ms), 0, NULL, 0, 1e6, "MS",
     "a rank that waited for a message runs again this long after it arrived",
     "the profile's (measured), 0 without one"},
    {"load", BP_OPT_DOUBLE, OFF(load), 0, NULL, 1, 1e6, "X",
     "with a profile: computation X times slower than its CPU time instead of as measured",
     "measured"},
    {"vocab", BP_OPT_INT, OFF(vocab), 0, NULL, 1, 1 << 24, "V",
     "gpt's vocabulary, e.g. 50257 for GPT-2's tokens (training runs on 256 bytes)", "256"},
    {"busy-threads", BP_OPT_INT, OFF(busy_threads), 0, NULL, 0, 64, "N",
     "--measure: threads computing alongside, standing for the job's other ranks here",
     "ranks - 1"},
};
#undef PATH
#undef OFF

bp_option *bp_simulate_options(int *n) {
    return bp_train_options_with(simulate_options, (int)(sizeof simulate_options / sizeof simulate_options[0]), n);
}

void bp_simulate_config_defaults(bp_simulate_config *c) {
    memset(c, 0, sizeof *c);
    bp_train_config_defaults(&c->train);
    c->efficiency = 0.5;
    c->msg_us = 10; /* as tune: shared memory plus comm/'s bookkeeping */
    c->busy_threads = -1;
    c->wake_ms = -1;
    c->eager_bytes = BP_SIM_MPI_EAGER_BYTES;
}

static bp_status check_net(const char *spec, const char *option, bp_err *err) {
    bp_net net;
    return bp_net_parse(spec, &net, err) ? bp_err_context(err, "option --%s", option) : BP_OK;
}

/* Exactly one source of computation costs, and networks that parse. */
static bp_status check_own(const bp_simulate_config *c, bp_err *err) {
    bool emu = c->train.device.kind == BP_DEVICE_EMU;
    int sources = (c->measure[0] != 0) + (c->profile[0] != 0) + (c->device_flops > 0) + emu;
    if (sources != 1)
        return bp_fail(err, BP_EUSAGE,
                       "option --measure, --profile, --device-flops or --device emu:GPU: give "
                       "exactly one source of computation costs (%d given)",
                       sources);
    if ((c->device_flops > 0) != (c->device_bw > 0))
        return bp_fail(err, BP_EUSAGE, "option --device-bw: needed with --device-flops, and only then");
    /* --measure times this machine's CPU; a GPU enters as its peak rates. */
    if (c->train.device.kind == BP_DEVICE_CUDA)
        return bp_fail(err, BP_EUSAGE,
                       "option --device: simulate measures on the CPU only; for a GPU give its "
                       "--device-flops and --device-bw");
    if (c->measure[0] && bp_check_output(c->measure, &bp_sim_profile_kind, err))
        return bp_err_context(err, "option --measure");
    if (c->train.comm.net[0] && (c->intra[0] || c->inter[0]))
        return bp_fail(err, BP_EUSAGE,
                       "option --net: emulates one network for every link; give it or "
                       "--intra/--inter, not both");
    bp_status rc = check_net(c->train.comm.net, "net", err);
    if (rc == BP_OK) rc = check_net(c->intra, "intra", err);
    if (rc == BP_OK) rc = check_net(c->inter, "inter", err);
    return rc;
}

bp_status bp_simulate_config_finalize(bp_simulate_config *c, bp_err *err) {
    bp_status rc = bp_train_config_finalize(&c->train, err);
    if (rc) return rc;
    bp_train_config *t = &c->train;
    if (!t->dp) t->dp = 1;
    int world;
    rc = bp_train_grid_ranks(t, t->dp, t->pipeline.stages, &world, err);
    if (rc == BP_OK) rc = bp_train_config_check_world(t, world, err);
    return rc ? rc : check_own(c, err);
}

/* ---- the machine -------------------------------------------------------------------- */

static bp_sim_link level(const bp_simulate_config *c, const char *spec, double copy_Bps,
                         double wake_s, double poll_s) {
    bp_sim_link l = {.msg_s = c->msg_us * 1e-6, .copy_Bps = copy_Bps,
                     .wake_s = c->wake_ms >= 0 ? c->wake_ms * 1e-3 : wake_s, .poll_s = poll_s,
                     .eager_bytes = (size_t)c->eager_bytes};
    bp_err ignored;
    (void)bp_net_parse(spec, &l.net, &ignored); /* checked by finalize */
    return l;
}

double bp_sim_emulated_poll_s(const bp_train_config *t) {
    double s = t->comm.poll_us * 1e-6, k = t->device.dilation;
    return k > 1 ? fmin(s, BP_COMM_POLL_HOST_MAX_S / k) : s;
}

/* Links: --net on every link, as comm/ emulates it per process; else the levels;
 * what is not given is this machine's shared memory (a message is copied twice).
 * Waits sleep between tests on this machine as on an emulated device: a profile's
 * measured sleep (tp 2's blocking allreduces took 0.53 ms at --comm-poll-us 50 and
 * 0.13 ms at 0, bench/simulate/README.md). */
static void set_network(const bp_simulate_config *c, const bp_sim_profile *p, bp_sim_machine *m) {
    double poll = p ? p->poll_sleep_s : m->polls ? bp_sim_emulated_poll_s(&c->train) : 0;
    double copy = p ? p->copy_Bps / 2 : 0, wake = p ? p->wake_s : 0.5 * poll;
    if (c->train.comm.net[0]) {
        /* One network for every link, a pair of ranks' own (comm/net.c);
         * hierarchical's nodes are still the runtime's groups of --node-size ranks,
         * which it reduces within first. */
        m->intra = m->inter = level(c, c->train.comm.net, copy, wake, poll);
        m->per_pair = true;
        const bp_communication_settings *cs = &c->train.comm;
        m->ranks_per_node = cs->hierarchical && cs->node_size > 0 ? cs->node_size : 1;
        return;
    }
    m->intra = level(c, c->intra, copy, wake, poll);
    m->inter = level(c, c->inter[0] ? c->inter : c->intra, copy, wake, poll);
    m->ranks_per_node = c->ranks_per_node;
}

/* ---- the job ------------------------------------------------------------------------ */

static bp_status partition(const bp_simulate_config *c, const bp_sim_machine *m,
                           const bp_sim_job *j, int *first, bp_err *err) {
    int n = bp_model_num_blocks(&j->mc), T = bp_model_sample_len(&j->mc);
    const char *partition = c->train.pipeline.partition;
    if (partition[0]) return bp_partition_parse(partition, n, j->pp, first, err);
    if (n < j->pp)
        return bp_fail(err, BP_EUSAGE, "option --pp: %d stages for %d blocks", j->pp, n);
    double *cost = malloc((size_t)n * sizeof *cost);
    if (!cost) return bp_fail(err, BP_ENOMEM, "out of memory");
    for (int b = 0; b < n; b++)
        cost[b] = bp_sim_block_s(m, &j->mc, j->tp, b, j->micro_B, T, false) +
                  bp_sim_block_s(m, &j->mc, j->tp, b, j->micro_B, T, true);
    bp_partition_balance(cost, n, j->pp, first);
    free(cost);
    return BP_OK;
}

void bp_simulate_job(const bp_train_config *t, bp_sim_job *j) {
    bp_optim_config oc;
    bp_train_optim_config(t, &oc);
    *j = (bp_sim_job){.dp = t->dp, .pp = t->pipeline.stages, .tp = t->tp,
                      .avgpipe = t->avgpipe.pipelines > 0,
                      .local_steps = bp_train_local_steps(t, t->dp * t->pipeline.stages * t->tp),
                      .N = bp_train_replicas(t), .steps = t->steps,
                      .sc_stages = t->occ.sc_stages, .sc_rank = t->occ.sc_rank,
                      .sc_warmup = (int64_t)(t->occ.sc_warmup * (double)t->steps),
                      .cb_rank = t->occ.cb ? t->occ.cb_rank : 0,
                      .cb_epilogue_only = t->occ.cb_epilogue_only,
                      .fused_embedding = t->occ.fused_embedding_sync,
                      .optim_buffers = bp_optim_num_buffers(&oc)};
    j->stream_steps = j->local_steps ? bp_train_stream_steps(t) : 1;
    bp_train_model_config(t, &j->mc);
    j->M = t->pipeline.micro_batches * t->grad_accum;
    j->micro_B = bp_train_micro_rows(t, t->dp);
    bp_schedule_parse(t->pipeline.schedule, &j->sched, NULL);
    bp_train_dp_config(t, &j->dpc);
}

static void make_job(const bp_simulate_config *c, bp_sim_job *j) {
    bp_simulate_job(&c->train, j);
    if (c->vocab > 0 && bp_model_kind_facts(j->mc.kind)->reads_tokens) j->mc.vocab = c->vocab;
}

/* ---- output ------------------------------------------------------------------------- */

#define MB(x) ((double)(x) / 1048576.0)

static void print_header(const bp_simulate_config *c, const bp_sim_job *j, const int *first,
                         const bp_sim_machine *m, FILE *out) {
    const bp_train_config *t = &c->train;
    char sched[32], part[256], algo[160];
    bp_schedule_name(&j->sched, sched, sizeof sched);
    bp_partition_format(first, j->pp, part, sizeof part);
    bp_dp_describe(&j->dpc, algo, sizeof algo);
    const bp_model_config *mc = &j->mc;
    double params = (double)bp_sim_model_params(mc, 1, 0, bp_model_num_blocks(mc));
    char shape[160];
    fprintf(out, "bagpipe simulate: %s (%s", bp_model_kind_name(mc->kind),
            bp_model_describe(mc, shape, sizeof shape));
    fprintf(out, "; %.4g M parameters)", params / 1e6);
    fprintf(out, ", batch %d, dp %d x pp %d x tp %d = %d ranks\n", t->batch, j->dp, j->pp, j->tp,
            j->dp * j->pp * j->tp);
    fprintf(out, "pipeline: %s, partition %s, %d pipeline%s x %d micro-batches of %d%s", sched,
            part, j->N, j->N > 1 ? "s" : "", j->M, j->micro_B, j->avgpipe ? " (AvgPipe" : "");
    if (j->avgpipe && j->stream_steps > 1)
        fprintf(out, ", streams of %d steps without a flush", j->stream_steps);
    fprintf(out, "%s\n", j->avgpipe ? ")" : "");
    fprintf(out, "dp: %s", algo);
    if (j->sc_stages) fprintf(out, "; stages < %d: powersgd rank=%d", j->sc_stages, j->sc_rank);
    if (j->cb_rank) fprintf(out, "; cb rank=%d%s", j->cb_rank, j->cb_epilogue_only ? " epilogue-only" : "");
    if (j->fused_embedding) fprintf(out, "; fused embedding sync");
    fprintf(out, "\n");
    if (m->prof)
        fprintf(out, "computation: profile of %d blocks at micro-batch %d (load %.2fx)\n",
                m->prof->n_blocks, m->prof->micro_B, m->prof->slowdown);
    else
        fprintf(out, "computation: %s%s %.4g TFLOP/s, %.4g GB/s at efficiency %.2f\n",
                t->device.kind == BP_DEVICE_EMU ? "emulated " : "device",
                t->device.kind == BP_DEVICE_EMU ? t->device.sheet->title : "", m->flops / 1e12,
                m->mem_Bps / 1e9, c->efficiency);
    fprintf(out, "network: %s\n",
            t->comm.net[0]                       ? t->comm.net
            : c->intra[0] || c->inter[0]    ? "levels"
                                            : "this machine's shared memory");
    if (!t->comm.net[0] && (c->intra[0] || c->inter[0]))
        fprintf(out, "  intra %s, inter %s, %d ranks per node\n", c->intra[0] ? c->intra : "shared",
                c->inter[0] ? c->inter : "as intra", c->ranks_per_node);
}

static void print_axes(const char *key, const double *x, double scale, FILE *out) {
    static const char *names[BP_SIM_AXES] = {"dp", "pp", "tp", "embed"};
    fprintf(out, "%-18s", key);
    for (int a = 0; a < BP_SIM_AXES; a++) fprintf(out, " %s=%.6g", names[a], x[a] * scale);
    fprintf(out, "\n");
}

static void print_result(const bp_simulate_config *c, const bp_sim_step_result *r, FILE *out) {
    fprintf(out, "%-18s %.6g\n", "step_ms", r->step_s * 1e3);
    fprintf(out, "%-18s %.6g\n", "samples_per_s",
            (double)c->train.batch * c->train.grad_accum * bp_train_batches_per_step(&c->train) /
                r->step_s);
    fprintf(out, "%-18s %.6g\n", "compute_ms", r->compute_s * 1e3);
    print_axes("exposed_ms", r->exposed_s, 1e3, out);
    print_axes("bytes_total", r->bytes, 1, out);
    print_axes("bytes_max", r->max_bytes, 1, out);
    fprintf(out, "%-18s %.6g\n", "bubble", r->bubble);
    fprintf(out, "%-18s %.6g\n", "peak_MB", MB(r->peak_bytes));
    fprintf(out, "%-18s %d\n", "peak_stash", r->peak_stash);
}

bp_status bp_simulate_predict(const bp_simulate_config *c, const bp_sim_machine *m, int *first,
                              bp_sim_step_result *r, bp_err *err) {
    bp_sim_job j;
    make_job(c, &j);
    bp_status rc = partition(c, m, &j, first, err);
    j.first = first;
    return rc ? rc : bp_sim_step(&j, m, r, err);
}

/* --device emu:GPU: the emulated device's data sheet, at --efficiency, the rates an
 * emulated run of the same options computes at (train/device.c). */
static bp_status emulated_device(const bp_simulate_config *c, bp_sim_machine *m, bp_err *err) {
    const bp_device_settings *d = &c->train.device;
    if (d->kind != BP_DEVICE_EMU) return BP_OK;
    bp_device_rate r;
    bp_status rc = bp_device_sheet_rate(d->sheet, d->dtype == BP_DTYPE_BF16, c->efficiency,
                                        "option --dtype bf16", &r, err);
    if (rc == BP_OK)
        *m = (bp_sim_machine){.flops = r.flops, .mem_Bps = r.mem_Bps, .efficiency = r.efficiency,
                              .launch_s = r.launch_s, .host_Bps = d->sheet->host_Bps,
                              .polls = true};
    return rc;
}

bp_status bp_simulate_run(const bp_simulate_config *c, FILE *out, bp_err *err) {
    bp_sim_profile prof = {0};
    bp_sim_machine m = {.flops = c->device_flops, .mem_Bps = c->device_bw,
                        .efficiency = c->efficiency};
    bp_sim_job j;
    make_job(c, &j);
    bp_status rc = emulated_device(c, &m, err);
    if (c->measure[0]) rc = bp_sim_measure(c, j.micro_B, &prof, err);
    if (rc == BP_OK && c->measure[0]) rc = bp_sim_profile_save(&prof, c->measure, err);
    if (rc == BP_OK && c->profile[0]) rc = bp_sim_profile_load(c->profile, &prof, err);
    if (rc == BP_OK && prof.fwd_s && c->load >= 1) { /* the given load instead */
        for (int b = 0; b < prof.n_blocks; b++) {
            prof.fwd_s[b] *= c->load / prof.slowdown;
            prof.bwd_s[b] *= c->load / prof.slowdown;
        }
        prof.slowdown = c->load;
    }
    if (prof.fwd_s) m.prof = &prof;
    set_network(c, m.prof, &m);
    m.intra.host_Bps = m.inter.host_Bps = m.host_Bps;
    int *first = calloc((size_t)j.pp + 1, sizeof *first);
    if (rc == BP_OK && !first) rc = bp_fail(err, BP_ENOMEM, "out of memory");
    bp_sim_step_result r;
    if (rc == BP_OK) rc = bp_simulate_predict(c, &m, first, &r, err);
    if (rc == BP_OK) {
        print_header(c, &j, first, &m, out);
        print_result(c, &r, out);
    }
    free(first);
    bp_sim_profile_free(&prof);
    return rc;
}
