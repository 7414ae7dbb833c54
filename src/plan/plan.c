#include "plan/plan.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/devsheet.h"
#include "core/timer.h"
#include "plan/plan_impl.h"
#include "plan/sim_measure.h"
#include "train/task.h"
#include "train/trainer.h"

#define OFF(f) offsetof(bp_plan_config, f)
static const bp_option plan_options[] = {
    {"cluster", BP_OPT_STRING, OFF(cluster), sizeof(((bp_plan_config *)0)->cluster), NULL, 0, 0,
     "SPEC",
     "a cluster to plan for instead of measuring the job's ranks: nodes=N,per-node=R,"
     "intra-bw=BW,intra-lat=T,inter-bw=BW,inter-lat=T,flops=X,mem-bw=B/S[,mem=BYTES], or "
     "gpu=v100|a100|h100|h200 for flops, mem-bw and mem (an emulated GPU's data sheet)",
     "measure"},
    {"json", BP_OPT_STRING, OFF(json), sizeof(((bp_plan_config *)0)->json), NULL, 0, 0, "FILE",
     "write the whole ranking here as JSON", NULL},
    {"top", BP_OPT_INT, OFF(top), 0, NULL, 1, 1000, "N", "configurations to print", NULL},
    {"mem-cap", BP_OPT_DOUBLE, OFF(mem_cap_mb), 0, NULL, 1, 1e12, "MB",
     "memory of one rank; configurations that need more are dropped",
     "the cluster's mem, or this node's memory over its ranks"},
    {"efficiency", BP_OPT_DOUBLE, OFF(efficiency), 0, NULL, 1e-3, 1, "X",
     "--cluster: share of the device's peak FLOP rate and bandwidth reached", NULL},
    {"trials", BP_OPT_INT, OFF(trials), 0, NULL, 0, 1 << 20, "K",
     "instead of the shipped table: train the leading kinds of configuration (and allreduce) K "
     "steps each on these ranks and measure their steps to a loss", "0: the table"},
    {"trial-kinds", BP_OPT_INT, OFF(trial_kinds), 0, NULL, 1, BP_PLAN_MAX_TRIAL_KINDS, "N",
     "--trials: kinds of update to try (dp algorithm and replicas, AvgPipe's N, Optimus-CC's "
     "flags), allreduce among them", NULL},
    {"factors", BP_OPT_STRING, OFF(factors), sizeof(((bp_plan_config *)0)->factors), NULL, 0, 0,
     "FILE",
     "instead of the shipped table: the factors an earlier plan --trials measured, from its --json "
     "FILE (the same model; steps to a loss do not depend on the network)", "none"},
    {"vocab", BP_OPT_INT, OFF(vocab), 0, NULL, 1, 1 << 24, "V",
     "gpt's vocabulary, e.g. 50257 for GPT-2's tokens (training runs on 256 bytes)", "256"},
    BP_SIM_EAGER_OPTION(OFF(eager_bytes)),
};
#undef OFF

/* The train options plan chooses for each configuration. */
static const char *const chosen[] = {
    "dp",          "pp",          "tp",          "partition",       "micro-batches", "schedule",
    "pipelines",   "dp-algo",     "peers",       "interval",        "sync-ms",       "rank",
    "hierarchical", "node-size",  "bucket-mb",   "sc-stages",       "sc-rank",       "cb",
    "cb-rank",     "cb-epilogue-only", "fused-embedding-sync", "grad-accum"};

bp_option *bp_plan_options(int *n) {
    return bp_train_options_with(plan_options, (int)(sizeof plan_options / sizeof plan_options[0]), n);
}

void bp_plan_config_defaults(bp_plan_config *c) {
    memset(c, 0, sizeof *c);
    bp_train_config_defaults(&c->train);
    strcpy(c->json, "plan.json");
    c->eager_bytes = BP_SIM_MPI_EAGER_BYTES;
    c->top = 10;
    c->efficiency = 0.5;
    c->trial_kinds = 6;
}

/* The option argv[i] names ("--dp=2" and "--dp" alike), its length in *len. */
static const char *option_name(const char *arg, size_t *len) {
    if (strncmp(arg, "--", 2) != 0) return NULL;
    const char *name = arg + 2, *eq = strchr(name, '=');
    *len = eq ? (size_t)(eq - name) : strlen(name);
    return name;
}

static bool in_list(const char *name, size_t len, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strlen(list[i]) == len && !strncmp(list[i], name, len)) return true;
    return false;
}

static bool is_own(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof plan_options / sizeof plan_options[0]; i++)
        if (strlen(plan_options[i].name) == len && !strncmp(plan_options[i].name, name, len))
            return true;
    return false;
}

/* What the ranking may replace: an earlier ranking, not a run's metrics log. */
static const bp_output_kind plan_json_kind = {"ranking of bagpipe plan",
                                              "{\"format\":\"bagpipe-plan\"", false};

/* Options of plan that only another one gives a use: given without it, refused. */
static bp_status check_given(const bp_plan_config *c, int argc, char **argv, bp_err *err) {
    static const char *const needs_trials[] = {"trial-kinds"}, *const needs_cluster[] = {"efficiency"};
    for (int i = 0; i < argc; i++) {
        size_t len;
        const char *name = option_name(argv[i], &len);
        if (!name) continue;
        if (in_list(name, len, chosen, sizeof chosen / sizeof chosen[0]))
            return bp_fail(err, BP_EUSAGE, "option --%.*s: bagpipe plan chooses it; leave it out",
                           (int)len, name);
        if (c->trials == 0 && in_list(name, len, needs_trials, 1))
            return bp_fail(err, BP_EUSAGE, "option --trial-kinds: only with --trials");
        if (!c->cluster[0] && in_list(name, len, needs_cluster, 1))
            return bp_fail(err, BP_EUSAGE, "option --efficiency: only with --cluster (measured "
                           "ranks run at their own)");
    }
    return BP_OK;
}

static bp_status emulated_cluster(const bp_plan_config *c, bp_plan_cluster *cl, bp_err *err);

bp_status bp_plan_config_finalize(bp_plan_config *c, int argc, char **argv, bp_err *err) {
    bp_status rc = check_given(c, argc, argv, err);
    if (rc) return rc;
    /* Before anything is measured or trialled: the ranking must be writable. */
    if ((rc = bp_check_output(c->json, &plan_json_kind, err))) return bp_err_context(err, "option --json");
    bp_train_config *t = &c->train;
    rc = bp_train_config_finalize(t, err);
    if (rc) return rc;
    bp_model_config mc;
    bp_train_model_config(t, &mc);
    if (c->vocab > 0 && bp_model_input_width(&mc) > 0) /* reads floats, not token ids */
        return bp_fail(err, BP_EUSAGE, "option --vocab: a vocabulary of tokens; this model reads none");
    if (c->cluster[0] && c->trials > 0)
        return bp_fail(err, BP_EUSAGE, "option --trials: runs on the job's ranks, not with --cluster");
    if (c->trials > t->steps) /* a trial would run longer than the run it plans */
        return bp_fail(err, BP_EUSAGE, "option --trials: %d steps per trial is more than the "
                       "run's --steps %lld", c->trials, (long long)t->steps);
    if (c->trials == 1) /* its one evaluation comes after the target's step */
        return bp_fail(err, BP_EUSAGE, "option --trials: the target is allreduce's loss at 60%% of "
                       "the trial's steps; give at least 2");
    if (c->factors[0] && c->trials > 0)
        return bp_fail(err, BP_EUSAGE, "option --factors: takes an earlier --trials' factors; not with --trials");
    if (c->cluster[0]) rc = emulated_cluster(c, &(bp_plan_cluster){0}, err);
    else if (t->device.kind == BP_DEVICE_EMU) /* the probes would time this CPU, not the GPU */
        return bp_fail(err, BP_EUSAGE, "option --device %s: plan an emulated device with --cluster "
                       "(its nodes and links); it computes at its data sheet's rates", t->device.spec);
    return rc;
}

/* Whether option argv[i] of the train table takes the next word as its value. */
static bool takes_value(const char *name, size_t len, bool has_eq) {
    if (has_eq) return false;
    int n;
    bp_option *opts = bp_train_options_with(NULL, 0, &n);
    bool takes = true; /* plan's own all take one */
    for (int j = 0; opts && j < n; j++)
        if (strlen(opts[j].name) == len && !strncmp(opts[j].name, name, len))
            takes = opts[j].type != BP_OPT_FLAG;
    free(opts);
    return takes;
}

/* Calls f(word, ctx) for each given word that train takes (not plan's own). */
void bp_plan_given_words(int argc, char **argv, void (*f)(const char *, void *), void *ctx) {
    for (int i = 0; i < argc; i++) {
        size_t len;
        const char *name = option_name(argv[i], &len);
        if (!name) continue;
        bool next = takes_value(name, len, name[len] == '=') && i + 1 < argc;
        if (!is_own(name, len)) {
            f(argv[i], ctx);
            if (next) f(argv[i + 1], ctx);
        }
        i += next;
    }
}

/* ---- --cluster ---------------------------------------------------------------------- */

/* A number with an optional suffix: k, M, G, T (x1000) or Ki, Mi, Gi (x1024). */
static bool number(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0) || !isfinite(v)) return false;
    static const struct {
        const char *suffix;
        double scale;
    } units[] = {{"", 1},       {"k", 1e3},         {"M", 1e6},         {"G", 1e9},
                 {"T", 1e12},   {"Ki", 1024.0},     {"Mi", 1048576.0},  {"Gi", 1073741824.0},
                 {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"GB", 1e9}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].suffix)) {
            *out = v * units[i].scale;
            return true;
        }
    return false;
}

static bp_status level_of(const char *bw, const char *lat, const char *which, bp_net *net,
                          bp_err *err) {
    char spec[160];
    snprintf(spec, sizeof spec, "bw=%s,lat=%s", bw, lat);
    if (bp_net_parse(spec, net, err))
        return bp_err_context(err, "option --cluster: %s", which);
    return BP_OK;
}

/* gpu=NAME: a data sheet's rates and memory, as an emulated run's. */
static bool sheet_of(const char *name, bp_plan_cluster *c) {
    const bp_device_sheet *d = bp_device_sheet_find(name);
    if (!d) return false;
    c->flops = d->tf32_flops, c->mem_Bps = d->mem_Bps, c->mem_bytes = d->mem_bytes;
    c->launch_s = d->launch_s, c->host_Bps = d->host_Bps;
    return true;
}

bp_status bp_plan_cluster_parse(const char *spec, bp_plan_cluster *c, bp_err *err) {
    memset(c, 0, sizeof *c);
    c->mem_bytes = 16e9;
    char buf[512], ibw[64] = "", ilat[64] = "", obw[64] = "", olat[64] = "";
    snprintf(buf, sizeof buf, "%s", spec);
    double nodes = 0, per = 0;
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) return bp_fail(err, BP_EUSAGE, "option --cluster: '%s' is not key=value", kv);
        *eq = 0;
        const char *k = kv, *v = eq + 1;
        bool ok = true;
        if (!strcmp(k, "nodes")) ok = number(v, &nodes);
        else if (!strcmp(k, "per-node")) ok = number(v, &per);
        else if (!strcmp(k, "flops")) ok = number(v, &c->flops);
        else if (!strcmp(k, "mem-bw")) ok = number(v, &c->mem_Bps);
        else if (!strcmp(k, "mem")) ok = number(v, &c->mem_bytes);
        else if (!strcmp(k, "gpu")) ok = sheet_of(v, c);
        else if (!strcmp(k, "intra-bw")) snprintf(ibw, sizeof ibw, "%s", v);
        else if (!strcmp(k, "intra-lat")) snprintf(ilat, sizeof ilat, "%s", v);
        else if (!strcmp(k, "inter-bw")) snprintf(obw, sizeof obw, "%s", v);
        else if (!strcmp(k, "inter-lat")) snprintf(olat, sizeof olat, "%s", v);
        else return bp_fail(err, BP_EUSAGE, "option --cluster: unknown key '%s'", k);
        if (!ok && strcmp(k, "gpu"))
            return bp_fail(err, BP_EUSAGE, "option --cluster: %s=%s is not a positive number", k, v);
        if (!ok) {
            char names[64];
            bp_device_sheet_names(names, sizeof names);
            return bp_fail(err, BP_EUSAGE, "option --cluster: gpu=%s is not a GPU of a data sheet (%s)",
                           v, names);
        }
    }
    if (nodes < 1 || per < 1 || nodes != floor(nodes) || per != floor(per) || nodes * per > 65536)
        return bp_fail(err, BP_EUSAGE,
                       "option --cluster: nodes and per-node are needed, whole, at most 65536 ranks");
    if (!(c->flops > 0) || !(c->mem_Bps > 0))
        return bp_fail(err, BP_EUSAGE, "option --cluster: flops and mem-bw are needed");
    if (!ibw[0] || !ilat[0] || !obw[0] || !olat[0])
        return bp_fail(err, BP_EUSAGE,
                       "option --cluster: intra-bw, intra-lat, inter-bw and inter-lat are needed");
    c->nodes = (int)nodes, c->per_node = (int)per;
    bp_status rc = level_of(ibw, ilat, "intra", &c->intra, err);
    return rc ? rc : level_of(obw, olat, "inter", &c->inter, err);
}

/* --cluster, with --device emu:GPU: that GPU's data sheet at --efficiency in the dtype
 * the run computes in (as simulate --device emu:GPU), the rest as described. */
static bp_status emulated_cluster(const bp_plan_config *c, bp_plan_cluster *cl, bp_err *err) {
    const bp_device_settings *d = &c->train.device;
    if (d->kind != BP_DEVICE_EMU) return bp_plan_cluster_parse(c->cluster, cl, err);
    static const char *const sheet_keys[] = {"gpu=", "flops=", "mem-bw=", "mem="};
    for (size_t i = 0; i < sizeof sheet_keys / sizeof sheet_keys[0]; i++)
        if (strstr(c->cluster, sheet_keys[i]))
            return bp_fail(err, BP_EUSAGE, "option --cluster: %.*s comes from --device %s's data "
                           "sheet; leave it out", (int)strlen(sheet_keys[i]) - 1, sheet_keys[i], d->spec);
    char spec[sizeof c->cluster + 64];
    snprintf(spec, sizeof spec, "gpu=%s,%s", d->sheet->name, c->cluster);
    bp_device_rate r;
    bp_status rc = bp_plan_cluster_parse(spec, cl, err);
    if (rc == BP_OK) rc = bp_device_sheet_rate(d->sheet, d->dtype == BP_DTYPE_BF16, c->efficiency,
                                               "option --dtype bf16", &r, err);
    if (rc == BP_OK) cl->flops = r.flops, cl->mem_Bps = r.mem_Bps, cl->launch_s = r.launch_s;
    return rc;
}

/* ---- the machine -------------------------------------------------------------------- */

static double node_memory(int ranks_here) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    double all = pages > 0 && size > 0 ? (double)pages * (double)size : 8e9;
    return all / (ranks_here > 0 ? ranks_here : 1);
}

/* Every rank profiles at once, the others' computation being the load; the mean. */
static bp_status profile(const bp_plan_config *c, bp_comm *world, bp_sim_profile *p, bp_err *err) {
    int W = bp_comm_size(world);
    bp_simulate_config sc;
    bp_simulate_config_defaults(&sc);
    sc.train = c->train;
    sc.train.dp = W, sc.train.pipeline.stages = 1, sc.train.tp = 1;
    sc.busy_threads = 0;
    int micro_B = c->train.batch / W > 0 ? c->train.batch / W : 1;
    bp_status rc = bp_sim_measure(&sc, micro_B, p, err);
    int n = p->n_blocks, k = 2 * n + 9;
    float *x = rc == BP_OK ? calloc((size_t)k, sizeof *x) : NULL;
    if (rc == BP_OK && !x) rc = bp_fail(err, BP_ENOMEM, "out of memory");
    if (rc) return rc;
    double *f[9] = {&p->slowdown, &p->wake_s, &p->optim_s, &p->mm_enc_Bps, &p->mm_dec_Bps,
                    &p->psgd_flops, &p->vec_Bps, &p->copy_Bps, &p->poll_sleep_s};
    for (int b = 0; b < n; b++) x[b] = (float)p->fwd_s[b], x[n + b] = (float)p->bwd_s[b];
    for (int i = 0; i < 9; i++) x[2 * n + i] = (float)*f[i];
    rc = bp_allreduce_avg(world, x, (size_t)k);
    for (int b = 0; rc == BP_OK && b < n; b++) p->fwd_s[b] = x[b], p->bwd_s[b] = x[n + b];
    for (int i = 0; rc == BP_OK && i < 9; i++) *f[i] = x[2 * n + i];
    free(x);
    return rc ? bp_comm_fail(world, rc, err) : BP_OK;
}

/* A group's link as the probe measured it (bp_sim_measured_link over the network). */
static bp_sim_link measured_link(const void *net, int first, int stride, int size) {
    return bp_plan_group_link(net, first, stride, size);
}

static bp_status measured_machine(const bp_plan_config *c, bp_comm *world, bp_plan_result *r,
                                  bp_sim_profile *p, bp_sim_machine *m, bp_err *err) {
    double t0 = bp_now();
    /* --net emulates a network on every message, as train will: the probe sees it */
    bp_status rc = c->train.comm.net[0] ? bp_comm_set_net(world, c->train.comm.net) : BP_OK;
    if (rc) {
        bp_comm_fail(world, rc, err);
        return bp_err_context(err, "option --net");
    }
    rc = bp_plan_measure_network(world, &r->net, err);
    if (rc == BP_OK) rc = profile(c, world, p, err);
    if (rc) return rc;
    r->profile_s = bp_now() - t0 - r->net.seconds;
    r->world = r->net.world, r->nodes = r->net.nodes;
    r->per_node = r->net.ranks_per_node > 0 ? r->net.ranks_per_node : 1;
    r->slowdown = p->slowdown;
    r->measured = true;
    *m = (bp_sim_machine){.prof = p, .ranks_per_node = r->per_node, .intra = r->net.intra,
                          .inter = r->net.inter, .measured = measured_link,
                          .measured_ctx = &r->net};
    /* The probe's one-way times already hold the receiver's wake-up (it waited in a
     * blocking receive), so the links add none of the profile's on top. */
    m->intra.wake_s = m->inter.wake_s = 0;
    /* Its hand-overs within a message do not: a waiting rank sleeps between tests. */
    m->intra.poll_s = m->inter.poll_s = p->poll_sleep_s;
    r->mem_cap_bytes = c->mem_cap_mb > 0 ? c->mem_cap_mb * 1048576.0 : node_memory(r->per_node);
    return BP_OK;
}

/* An emulated run's ranks as simulate --device emu:GPU charges them: each message
 * its fixed cost, and a waiting rank tests and sleeps the poll interval
 * (bp_sim_emulated_poll_s). */
static void emulated_waits(const bp_train_config *t, bp_sim_machine *m) {
    bp_simulate_config sc;
    bp_simulate_config_defaults(&sc);
    double poll = bp_sim_emulated_poll_s(t);
    m->polls = true;
    m->intra.msg_s = m->inter.msg_s = sc.msg_us * 1e-6;
    m->intra.wake_s = m->inter.wake_s = 0.5 * poll;
    m->intra.poll_s = m->inter.poll_s = poll;
}

static void cluster_machine(const bp_plan_config *c, bp_plan_result *r, bp_sim_machine *m) {
    bp_err ignored;
    emulated_cluster(c, &r->cluster, &ignored); /* checked by finalize */
    const bp_plan_cluster *cl = &r->cluster;
    r->world = cl->nodes * cl->per_node, r->nodes = cl->nodes, r->per_node = cl->per_node;
    *m = (bp_sim_machine){.flops = cl->flops, .mem_Bps = cl->mem_Bps, .efficiency = c->efficiency,
                          .launch_s = cl->launch_s, .host_Bps = cl->host_Bps,
                          .ranks_per_node = cl->per_node};
    m->intra.net = cl->intra, m->inter.net = cl->inter;
    m->intra.host_Bps = m->inter.host_Bps = cl->host_Bps;
    if (c->train.device.kind == BP_DEVICE_EMU) emulated_waits(&c->train, m);
    r->mem_cap_bytes = c->mem_cap_mb > 0 ? c->mem_cap_mb * 1048576.0 : cl->mem_bytes;
}

/* The data the measured ranks will train on, read once as train reads it, so that a
 * file train would refuse is refused before anything is measured. */
static bp_status check_data(const bp_plan_config *c, bp_err *err) {
    bp_task task;
    bp_status rc = bp_task_init(&task, &c->train, 0, 1, err);
    if (rc == BP_OK) bp_task_free(&task);
    return rc;
}

bp_status bp_plan_run(const bp_plan_config *c, bp_comm *world, int argc, char **argv,
                      bp_plan_result *r, bp_err *err) {
    double t0 = bp_now();
    memset(r, 0, sizeof *r);
    snprintf(r->model, sizeof r->model, "%s", bp_model_kind_name((bp_model_kind)c->train.model));
    bp_sim_profile prof = {0};
    bp_sim_machine m;
    bp_plan_factors *factors = NULL; /* read before anything is measured */
    bp_status rc = c->factors[0] ? bp_plan_factors_load(c->factors, r->model, &factors, err) : BP_OK;
    if (rc == BP_OK && c->cluster[0]) cluster_machine(c, r, &m);
    else if (rc == BP_OK) {
        bool together = false; /* a file missing on one rank's node stops every rank */
        rc = bp_train_agree(world, check_data(c, err), &together, err);
        if (rc == BP_OK) rc = measured_machine(c, world, r, &prof, &m, err);
    }
    if (rc == BP_OK) m.intra.eager_bytes = m.inter.eager_bytes = (size_t)c->eager_bytes;
    if (rc == BP_OK) rc = bp_plan_enumerate(c, r, err);
    if (rc == BP_OK) rc = bp_plan_evaluate(c, world, &m, argc, argv, r, err);
    if (rc == BP_OK && factors) bp_plan_factors_apply(factors, r);
    bp_plan_factors_free(factors);
    if (rc == BP_OK) bp_plan_rank(c, r);
    r->trial_target = NAN;
    if (rc == BP_OK && c->trials > 0) rc = bp_plan_trials(c, world, argc, argv, r, err);
    if (rc == BP_OK && c->trials > 0) bp_plan_rank(c, r);
    bp_sim_profile_free(&prof);
    r->seconds = bp_now() - t0;
    return rc;
}

void bp_plan_result_free(bp_plan_result *r) {
    bp_plan_network_free(&r->net);
    free(r->cand);
    memset(r, 0, sizeof *r);
}
