#include "plan/plan_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "nn/model.h"
#include "parallel/dp.h"
#include "plan/sim_model.h"

#define MB(x) ((double)(x) / 1048576.0)

static const char *const verdicts[] = {"fits", "refused by train", "averaging diverges",
                                       "over the memory"};

/* The command that trains candidate k on the job's ranks. */
static void print_command(const bp_plan_result *r, const bp_plan_candidate *k, const char *prog,
                          int argc, char **argv, FILE *out) {
    if (r->world > 1) fprintf(out, "mpirun -np %d ", r->world);
    fprintf(out, "%s train", prog);
    bp_plan_print_given(argc, argv, out);
    fprintf(out, " %s", k->args);
}

static void print_link(const char *name, const bp_sim_link *l, FILE *out) {
    fprintf(out, "%s lat %.4g ms, bw %.4g Mbit/s", name, l->net.lat_s * 1e3, l->net.bw_bps / 1e6);
}

/* Whether candidate k's factor was measured on another model than the one planned. */
static bool borrowed(const bp_plan_result *r, const bp_plan_candidate *k) {
    return !k->trialled && k->source_model && strcmp(k->source_model, r->model) != 0;
}

/* How many of the configurations that fit take another model's factor, if any do. */
static void print_borrowed(const bp_plan_result *r, FILE *out) {
    int n = 0;
    const char *from = NULL;
    for (int i = 0; i < r->n_cand; i++)
        if (r->cand[i].verdict == BP_PLAN_OK && borrowed(r, &r->cand[i])) n++, from = r->cand[i].source_model;
    if (n)
        fprintf(out, "; %d configuration%s take%s %s's factor, not measured on %s", n, n > 1 ? "s" : "",
                n > 1 ? "" : "s", from, r->model);
}

static void print_header(const bp_plan_config *c, const bp_plan_result *r, FILE *out) {
    const bp_train_config *t = &c->train;
    bp_model_config mc;
    bp_train_model_config(t, &mc);
    int blocks = bp_model_num_blocks(&mc);
    if (c->vocab > 0) mc.vocab = c->vocab;
    fprintf(out, "bagpipe plan: %s (%d blocks, %.4g M parameters), batch %d, %lld steps; %d rank%s"
                 " on %d node%s (%d per node)\n",
            r->model, blocks, (double)bp_sim_model_params(&mc, 1, 0, blocks) / 1e6, t->batch,
            (long long)t->steps, r->world, r->world > 1 ? "s" : "", r->nodes, r->nodes > 1 ? "s" : "",
            r->per_node);
    if (r->measured && r->world == 1) {
        fprintf(out, "network: one rank, none to measure\ncomputation: profiled in %.2f s (load %.2fx)\n",
                r->profile_s, r->slowdown);
    } else if (r->measured) {
        fprintf(out, "network: measured in %.2f s over %d pairs: ", r->net.seconds, r->net.n_pairs);
        if (r->net.ranks_per_node != 1) print_link("within a node", &r->net.intra, out);
        if (r->nodes > 1) print_link(r->net.ranks_per_node != 1 ? "; between nodes" : "between nodes", &r->net.inter, out);
        fprintf(out, "\ncomputation: profiled on every rank at once in %.2f s (load %.2fx)\n",
                r->profile_s, r->slowdown);
    } else {
        fprintf(out, "network: --cluster, within a node lat %.4g ms bw %.4g Gbit/s; between nodes lat "
                     "%.4g ms bw %.4g Gbit/s\ncomputation: %s%s, %.4g TFLOP/s, %.4g GB/s at "
                     "efficiency %.2f\n",
                r->cluster.intra.lat_s * 1e3, r->cluster.intra.bw_bps / 1e9, r->cluster.inter.lat_s * 1e3,
                r->cluster.inter.bw_bps / 1e9, t->device.kind == BP_DEVICE_EMU ? "emulated " : "--cluster",
                t->device.kind == BP_DEVICE_EMU ? t->device.sheet->title : "", r->cluster.flops / 1e12,
                r->cluster.mem_Bps / 1e9, c->efficiency);
    }
    if (c->trials > 0)
        fprintf(out, "statistical efficiency: --trials, %d steps of the leading kinds here; steps to "
                     "loss %.4f (allreduce's at 60%%) over allreduce's; others from the table",
                c->trials, r->trial_target);
    else if (c->factors[0])
        fprintf(out, "statistical efficiency: --factors %s, %d kinds an earlier --trials measured; "
                     "others from the table", c->factors, r->factor_kinds);
    else
        fprintf(out, "statistical efficiency: the table of measured studies (docs/results), steps to "
                     "the loss allreduce reaches in %lld steps", (long long)t->steps);
    print_borrowed(r, out);
    fprintf(out, "\n");
    fprintf(out, "configurations: %d, of which %d fit %.0f MB; dropped: %d refused by train, %d whose "
                 "averaging diverges, %d over the memory (%.2f s)\n",
            r->n_cand, r->n_cand - r->dropped[1] - r->dropped[2] - r->dropped[3], MB(r->mem_cap_bytes),
            r->dropped[BP_PLAN_REFUSED], r->dropped[BP_PLAN_DIVERGES], r->dropped[BP_PLAN_MEMORY],
            r->seconds);
}

static void print_top(const bp_plan_config *c, const bp_plan_result *r, const char *prog, int argc,
                      char **argv, FILE *out) {
    fprintf(out, "%4s %10s %8s %11s %9s  configuration\n", "rank", "step_ms", "steps_x", "to_loss_s",
            "peak_MB");
    for (int i = 0; i < r->n_cand && i < c->top && r->cand[i].verdict == BP_PLAN_OK; i++) {
        const bp_plan_candidate *k = &r->cand[i];
        fprintf(out, "%4d %10.4g %8.3f %11.4g %9.4g  %s\n     ", i + 1, k->step_s * 1e3, k->factor,
                k->to_loss_s, MB(k->peak_bytes), k->args);
        print_command(r, k, prog, argc, argv, out);
        fprintf(out, "\n");
    }
}

/* A JSON string of s. */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

static void json_link(FILE *f, const char *key, const bp_sim_link *l) {
    fprintf(f, "\"%s\":{\"lat_s\":%.6g,\"bw_bps\":%.6g}", key, l->net.lat_s, l->net.bw_bps);
}

static void json_network(FILE *f, const bp_plan_result *r) {
    const bp_plan_network *n = &r->net;
    fprintf(f, "\"network\":{\"measured\":%s,", r->measured ? "true" : "false");
    if (r->measured) {
        fprintf(f, "\"seconds\":%.4g,\"node\":[", n->seconds);
        for (int i = 0; i < n->world; i++) fprintf(f, "%s%d", i ? "," : "", n->node[i]);
        fprintf(f, "],\"pairs\":[");
        for (int i = 0; i < n->n_pairs; i++)
            fprintf(f, "%s{\"a\":%d,\"b\":%d,\"lat_s\":%.6g,\"bw_bps\":%.6g}", i ? "," : "",
                    n->pairs[i].a, n->pairs[i].b, n->pairs[i].lat_s, n->pairs[i].bw_bps);
        fprintf(f, "],");
        json_link(f, "intra", &n->intra);
        fputc(',', f);
        json_link(f, "inter", &n->inter);
    } else {
        bp_sim_link a = {.net = r->cluster.intra}, b = {.net = r->cluster.inter};
        json_link(f, "intra", &a);
        fputc(',', f);
        json_link(f, "inter", &b);
    }
    fprintf(f, "}");
}

/* Each axis's link of candidate k as measured: its slowest pair (rank 0's groups). */
static void json_axes(FILE *f, const bp_plan_result *r, const bp_plan_candidate *k) {
    if (!r->measured) return;
    bp_sim_link dp = bp_plan_group_link(&r->net, 0, k->tp, k->dp),
                pp = bp_plan_group_link(&r->net, 0, k->dp * k->tp, k->pp),
                tp = bp_plan_group_link(&r->net, 0, 1, k->tp);
    fprintf(f, ",\"axes\":{");
    json_link(f, "dp", &dp);
    fputc(',', f);
    json_link(f, "pp", &pp);
    fputc(',', f);
    json_link(f, "tp", &tp);
    fputc('}', f);
}

/* `,"key":v`, or null for a kind that never reached the trials' target (infinite):
 * JSON has no infinity. */
static void json_num(FILE *f, const char *key, double v) {
    if (isfinite(v))
        fprintf(f, ",\"%s\":%.6g", key, v);
    else
        fprintf(f, ",\"%s\":null", key);
}

static void json_candidate(FILE *f, const bp_plan_result *r, const bp_plan_candidate *k, int rank,
                           const char *prog, int argc, char **argv) {
    fprintf(f, "{\"rank\":%d,\"verdict\":\"%s\",\"args\":", rank, verdicts[k->verdict]);
    json_str(f, k->args);
    fprintf(f, ",\"dp\":%d,\"pp\":%d,\"tp\":%d,\"micro_batches\":%d,\"pipelines\":%d,\"algo\":\"%s\","
               "\"sc\":%s,\"cb\":%s,\"fe\":%s",
            k->dp, k->pp, k->tp, k->M, k->N, bp_dp_algo_name(k->knobs.algo), k->knobs.sc ? "true" : "false",
            k->knobs.cb ? "true" : "false", k->knobs.fe ? "true" : "false");
    if (k->verdict == BP_PLAN_OK || k->verdict == BP_PLAN_MEMORY)
        fprintf(f, ",\"step_s\":%.6g,\"peak_MB\":%.6g", k->step_s, MB(k->peak_bytes));
    json_num(f, "steps_factor", k->factor);
    fprintf(f, ",\"trialled\":%s,\"efficiency_source\":", k->trialled ? "true" : "false");
    if (borrowed(r, k)) {
        char text[512];
        snprintf(text, sizeof text, "%s's, not measured on %s: %s", k->source_model, r->model, k->source);
        json_str(f, text);
    } else {
        json_str(f, k->trialled ? k->trial_source : k->source);
    }
    const char *on = k->trialled ? r->model : k->source_model;
    fprintf(f, ",\"efficiency_model\":");
    if (on) json_str(f, on);
    else fprintf(f, "null");
    if (k->verdict == BP_PLAN_OK) {
        json_num(f, "time_to_loss_s", k->to_loss_s);
        fprintf(f, ",\"command\":");
        char *cmd = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&cmd, &len);
        if (m) {
            print_command(r, k, prog, argc, argv, m);
            fclose(m);
            json_str(f, cmd ? cmd : "");
            free(cmd);
        }
    }
    json_axes(f, r, k);
    fprintf(f, "}");
}

static bp_status write_json(const bp_plan_config *c, const bp_plan_result *r, const char *prog,
                            int argc, char **argv, bp_err *err) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return bp_fail(err, BP_ENOMEM, "option --json: out of memory");
    fprintf(f, "{\"format\":\"bagpipe-plan\",\"world\":%d,\"nodes\":%d,\"per_node\":%d,"
               "\"steps\":%lld,\"efficiency\":\"%s\",\"mem_cap_MB\":%.6g,\"seconds\":%.4g,"
               "\"model\":\"%s\",",
            r->world, r->nodes, r->per_node, (long long)c->train.steps,
            c->trials > 0 ? "trials" : c->factors[0] ? "factors" : "table", MB(r->mem_cap_bytes),
            r->seconds, r->model);
    json_network(f, r);
    fprintf(f, ",\"dropped\":{\"refused\":%d,\"diverges\":%d,\"memory\":%d},\"ranking\":[\n",
            r->dropped[BP_PLAN_REFUSED], r->dropped[BP_PLAN_DIVERGES], r->dropped[BP_PLAN_MEMORY]);
    for (int i = 0; i < r->n_cand; i++) {
        json_candidate(f, r, &r->cand[i], i + 1, prog, argc, argv);
        fprintf(f, "%s\n", i + 1 < r->n_cand ? "," : "");
    }
    fprintf(f, "]}\n");
    fclose(f);
    bp_status rc = bp_write_file_atomic(c->json, text, len, err);
    free(text);
    return rc ? bp_err_context(err, "option --json") : BP_OK;
}

bp_status bp_plan_report(const bp_plan_config *c, const bp_plan_result *r, const char *prog,
                         int argc, char **argv, FILE *out, bp_err *err) {
    print_header(c, r, out);
    print_top(c, r, prog, argc, argv, out);
    if (r->n_cand == r->dropped[1] + r->dropped[2] + r->dropped[3])
        return bp_fail(err, BP_EUSAGE, "no configuration fits: %d refused, %d diverge, %d over %.0f MB",
                       r->dropped[1], r->dropped[2], r->dropped[3], MB(r->mem_cap_bytes));
    bp_status rc = write_json(c, r, prog, argc, argv, err);
    if (rc == BP_OK) fprintf(out, "ranking of all %d: %s\n", r->n_cand, c->json);
    return rc;
}
