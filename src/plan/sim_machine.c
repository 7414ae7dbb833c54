#include "plan/sim_machine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "core/json.h"
#include "nn/cost.h"
#include "nn/real.h"
#include "plan/sim_model.h"

/* ---- the profile file ---------------------------------------------------------- */

#define PROFILE_FORMAT "bagpipe-simulate-profile"

const bp_output_kind bp_sim_profile_kind = {"profile of bagpipe simulate",
                                            "{\"format\":\"" PROFILE_FORMAT "\"", false};

static void put_array(FILE *f, const char *key, const double *x, int n) {
    fprintf(f, ",\"%s\":[", key);
    for (int i = 0; i < n; i++) fprintf(f, "%s%.9g", i ? "," : "", x[i]);
    fprintf(f, "]");
}

/* Field f of the model's shape. */
static int *shape_field(const bp_model_config *mc, const bp_model_field *f) {
    return (int *)((char *)mc + f->offset);
}

bp_status bp_sim_profile_save(const bp_sim_profile *p, const char *path, bp_err *err) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return bp_fail(err, BP_ENOMEM, "option --measure: out of memory");
    const bp_model_config *mc = &p->mc;
    fprintf(f, "{\"format\":\"" PROFILE_FORMAT "\"");
    const bp_model_facts *facts = bp_model_kind_facts(mc->kind);
    fprintf(f, ",\"model\":\"%s\"", facts->name);
    for (int i = 0; i < facts->n_shape; i++)
        fprintf(f, ",\"%s\":%d", facts->shape[i].key, *shape_field(mc, &facts->shape[i]));
    fprintf(f, ",\"micro_batch\":%d,\"tp\":%d", p->micro_B, p->tp);
    put_array(f, "fwd_s", p->fwd_s, p->n_blocks);
    put_array(f, "bwd_s", p->bwd_s, p->n_blocks);
    fprintf(f,
            ",\"slowdown\":%.9g,\"wake_s\":%.9g,\"poll_sleep_s\":%.9g,\"optim_s_per_param\":%.9g,"
            "\"minmax_encode_Bps\":%.9g,"
            "\"minmax_decode_Bps\":%.9g,\"powersgd_flops\":%.9g,\"vec_Bps\":%.9g,"
            "\"copy_Bps\":%.9g}\n",
            p->slowdown, p->wake_s, p->poll_sleep_s, p->optim_s, p->mm_enc_Bps, p->mm_dec_Bps,
            p->psgd_flops, p->vec_Bps, p->copy_Bps);
    fclose(f);
    bp_status rc = bp_write_file_atomic(path, text, len, err);
    free(text);
    return rc ? bp_err_context(err, "option --measure") : BP_OK;
}

/* Positive number member `key`; false when missing or not positive. */
static bool positive(const bp_json *j, const char *key, double *out) {
    int i = bp_json_get(j, 0, key);
    if (i < 0 || j->nodes[i].type != BP_JSON_NUMBER || !(j->nodes[i].num > 0)) return false;
    *out = j->nodes[i].num;
    return true;
}

static bool int_member(const bp_json *j, const char *key, int *out) {
    double v;
    if (!positive(j, key, &v) || v != floor(v) || v > 1 << 30) return false;
    *out = (int)v;
    return true;
}

/* Array member `key` of n positive numbers into a new x. */
static bool times(const bp_json *j, const char *key, int n, double **x) {
    int a = bp_json_get(j, 0, key), k = 0;
    if (a < 0 || j->nodes[a].type != BP_JSON_ARRAY || !(*x = calloc((size_t)n, sizeof **x)))
        return false;
    for (int e = j->nodes[a].child; e >= 0; e = j->nodes[e].next, k++)
        if (k >= n || j->nodes[e].type != BP_JSON_NUMBER || !(j->nodes[e].num >= 0)) return false;
        else (*x)[k] = j->nodes[e].num;
    return k == n;
}

typedef struct int_field {
    const char *key;
    int *field;
} int_field;

/* The model measured: its kind's name and shape. Profiles were gpt's alone before
 * they named the model, so one without "model" is gpt's. */
static const char *parse_model(const bp_json *j, bp_sim_profile *p) {
    char name[32] = "gpt";
    int node = bp_json_get(j, 0, "model");
    bp_model_kind kind;
    if ((node >= 0 && !bp_json_str_copy(j, node, name, sizeof name)) ||
        bp_model_kind_parse(name, &kind, NULL))
        return "model";
    bp_model_config_init(&p->mc, kind);
    const bp_model_facts *facts = bp_model_kind_facts(kind);
    for (int i = 0; i < facts->n_shape; i++)
        if (!int_member(j, facts->shape[i].key, shape_field(&p->mc, &facts->shape[i])))
            return facts->shape[i].key;
    return NULL;
}

static const char *parse_profile(const bp_json *j, bp_sim_profile *p) {
    if (!bp_json_str_eq(j, bp_json_get(j, 0, "format"), PROFILE_FORMAT)) return "format";
    const char *bad = parse_model(j, p);
    if (bad) return bad;
    const int_field ints[] = {{"micro_batch", &p->micro_B}, {"tp", &p->tp}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!int_member(j, ints[i].key, ints[i].field)) return ints[i].key;
    p->n_blocks = bp_model_num_blocks(&p->mc);
    if (!times(j, "fwd_s", p->n_blocks, &p->fwd_s)) return "fwd_s";
    if (!times(j, "bwd_s", p->n_blocks, &p->bwd_s)) return "bwd_s";
    const struct {
        const char *key;
        double *field;
    } nums[] = {{"slowdown", &p->slowdown},          {"optim_s_per_param", &p->optim_s},
                {"minmax_encode_Bps", &p->mm_enc_Bps}, {"minmax_decode_Bps", &p->mm_dec_Bps},
                {"powersgd_flops", &p->psgd_flops},  {"vec_Bps", &p->vec_Bps},
                {"copy_Bps", &p->copy_Bps}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (!positive(j, nums[i].key, nums[i].field)) return nums[i].key;
    int w = bp_json_get(j, 0, "wake_s"); /* 0 for one rank */
    if (w < 0 || j->nodes[w].type != BP_JSON_NUMBER || !(j->nodes[w].num >= 0)) return "wake_s";
    p->wake_s = j->nodes[w].num;
    int s = bp_json_get(j, 0, "poll_sleep_s"); /* absent from earlier profiles: 0 */
    if (s >= 0 && (j->nodes[s].type != BP_JSON_NUMBER || !(j->nodes[s].num >= 0)))
        return "poll_sleep_s";
    p->poll_sleep_s = s >= 0 ? j->nodes[s].num : 0;
    return NULL;
}

bp_status bp_sim_profile_load(const char *path, bp_sim_profile *p, bp_err *err) {
    memset(p, 0, sizeof *p);
    bp_bytes b;
    bp_status rc = bp_read_file(path, &b, err);
    if (rc) { /* a file the user named: a usage error */
        bp_err_context(err, "option --profile");
        err->code = BP_EUSAGE;
        return BP_EUSAGE;
    }
    bp_json j;
    rc = bp_json_parse((const char *)b.data, b.n, &j, err);
    if (rc) {
        free(b.data);
        bp_err_context(err, "option --profile: %s is not JSON", path);
        err->code = BP_EUSAGE;
        return BP_EUSAGE;
    }
    const char *bad = parse_profile(&j, p); /* strings point into the text */
    bp_json_free(&j);
    free(b.data);
    if (!bad) return BP_OK;
    bp_sim_profile_free(p);
    return bp_fail(err, BP_EUSAGE,
                   "option --profile: %s is not a profile of bagpipe simulate --measure "
                   "(field '%s' missing or invalid)",
                   path, bad);
}

void bp_sim_profile_free(bp_sim_profile *p) {
    free(p->fwd_s);
    free(p->bwd_s);
    p->fwd_s = p->bwd_s = NULL;
}

/* ---- computation ----------------------------------------------------------------- */

/* The data sheet's rates as the shared cost model (core/devsheet.h) takes them. */
static bp_device_rate rate_of(const bp_sim_machine *m) {
    return (bp_device_rate){.flops = m->flops, .mem_Bps = m->mem_Bps, .efficiency = m->efficiency,
                            .launch_s = m->launch_s};
}

double bp_sim_block_cost(const bp_model_config *mc, int tp, int b, int B, int T) {
    return bp_sim_block_flops(mc, tp, b, B, T) + BP_SIM_BALANCE * bp_model_block_traffic(mc, tp, b, B, T);
}

/* The profile's block of the same kind as block b of mc (plan/sim_model.h): the mean
 * time of the profile's blocks of that kind, scaled by the cost of block b over
 * the cost of the first of them. A model without middle blocks (an mlp of one
 * hidden layer) lends its first block's time. */
static double profiled_s(const bp_sim_profile *p, const bp_model_config *mc, int tp, int b, int B,
                         int T, bool backward) {
    const double *x = backward ? p->bwd_s : p->fwd_s;
    bp_sim_block_kind kind = bp_sim_block_kind_of(mc, b);
    if (kind == BP_SIM_MIDDLE && p->n_blocks <= 2) kind = BP_SIM_FIRST;
    double t = 0;
    int n = 0, pb = -1;
    for (int i = 0; i < p->n_blocks; i++)
        if (bp_sim_block_kind_of(&p->mc, i) == kind) {
            t += x[i], n++;
            if (pb < 0) pb = i;
        }
    t /= n > 0 ? n : 1;
    double base = pb >= 0 ? bp_sim_block_cost(&p->mc, p->tp, pb, p->micro_B, bp_model_sample_len(&p->mc))
                         : 0;
    return base > 0 ? t * bp_sim_block_cost(mc, tp, b, B, T) / base : t;
}

double bp_sim_block_s(const bp_sim_machine *m, const bp_model_config *mc, int tp, int b, int B,
                      int T, bool backward) {
    if (m->prof) return profiled_s(m->prof, mc, tp, b, B, T, backward);
    bp_device_rate r = rate_of(m);
    return bp_model_block_s(&r, mc, tp, b, B, T, backward);
}

/* A memory-bound pass over n floats touching `per` floats per element. */
static double pass_s(const bp_sim_machine *m, size_t n, double per) {
    bp_device_rate r = rate_of(m);
    return bp_device_op_s(&r, 0, (double)n * per * sizeof(bp_real));
}

double bp_sim_optim_s(const bp_sim_machine *m, size_t params) {
    /* Four kernels, as the step issues them: AdamW reads weight, gradient and both
     * moments and writes three of them; zeroing, the finite check and the sum of
     * squares pass over the gradient once each. */
    if (m->prof) return m->prof->optim_s * m->prof->slowdown * (double)params;
    return pass_s(m, params, 7) + 3 * pass_s(m, params, 1);
}

double bp_sim_minmax_s(const bp_sim_machine *m, size_t n, bool encode) {
    if (!m->prof) return pass_s(m, n, encode ? 2.25 : 1.25); /* two reads (min/max, code) */
    return (double)n * sizeof(bp_real) * m->prof->slowdown /
           (encode ? m->prof->mm_enc_Bps : m->prof->mm_dec_Bps);
}

double bp_sim_matmul_s(const bp_sim_machine *m, double flops) {
    bp_device_rate r = rate_of(m);
    return m->prof ? flops * m->prof->slowdown / m->prof->psgd_flops : bp_device_op_s(&r, flops, 0);
}

double bp_sim_vec_s(const bp_sim_machine *m, size_t n) {
    return m->prof ? (double)n * sizeof(bp_real) * m->prof->slowdown / m->prof->vec_Bps
                   : pass_s(m, n, 3);
}

/* ---- network ---------------------------------------------------------------------- */

static int node_of(const bp_sim_machine *m, int rank) {
    return m->ranks_per_node > 0 ? rank / m->ranks_per_node : 0;
}

bool bp_sim_group_spans(const bp_sim_machine *m, int first, int stride, int size) {
    for (int i = 1; i < size; i++)
        if (node_of(m, first + i * stride) != node_of(m, first)) return true;
    return false;
}

bp_sim_link bp_sim_group_link(const bp_sim_machine *m, int first, int stride, int size,
                              int world) {
    int home = node_of(m, first), here = 0;
    for (int i = 0; i < size; i++) here += node_of(m, first + i * stride) == home;
    bool spans = here < size;
    bp_sim_link l = spans ? m->inter : m->intra;
    if (m->measured && size > 1) l.net = m->measured(m->measured_ctx, first, stride, size).net;
    if (!spans || m->per_pair) return l;
    int on_node = m->ranks_per_node < world ? m->ranks_per_node : world;
    int sharing = here > 0 ? on_node / here : 1; /* groups with ranks on this node */
    if (sharing > 1) {
        if (l.net.on) l.net.bw_bps /= sharing;
        if (l.copy_Bps > 0) l.copy_Bps /= sharing;
    }
    return l;
}

double bp_sim_ring_allreduce_s(const bp_sim_machine *m, const bp_sim_link *l, int ranks, size_t n) {
    if (ranks <= 1) return 0.0;
    /* The exchanges of a ring overlap on every rank, so a rank that gave its core
     * away while waiting pays the delay to run again once per collective, not per
     * exchange (a ring where every exchange waits for a wake-up is as slow as the
     * slowest rank's scheduling, which the machine's load already stands for). */
    bp_sim_link quick = *l;
    if (!m->polls) quick.wake_s = 0;
    size_t part = (n + (size_t)ranks - 1) / (size_t)ranks;
    return bp_sim_allreduce_s(&quick, ranks, n * sizeof(bp_real)) + (m->polls ? 0 : l->wake_s) +
           (double)(ranks - 1) * bp_sim_vec_s(m, part) + bp_sim_staging_s(m, n);
}

double bp_sim_staging_s(const bp_sim_machine *m, size_t n) {
    if (m->host_Bps <= 0) return 0.0;
    return 2.0 * (m->launch_s + (double)(n * sizeof(bp_real)) / m->host_Bps);
}
