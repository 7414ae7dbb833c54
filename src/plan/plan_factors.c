/* `bagpipe plan --factors FILE`: the statistical efficiency an earlier `plan --trials`
 * measured, read back from the ranking it wrote (--json). A kind's steps to a loss
 * depend on its update rule, its number of replicas and the model, not on the
 * network, so trials run once (on a fast network, or at a quiet hour) serve every
 * later plan of the same model and ranks: another network, another load, or a
 * --cluster of as many ranks. The file's rows that were trialled (or themselves read
 * from such a file) give one factor per kind; kinds the file lacks keep the table's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "core/json.h"
#include "parallel/dp.h"
#include "plan/plan_impl.h"

typedef struct factor {
    char algo[32], source[256];
    int dp, N;
    bool sc, cb, fe;
    double f;
} factor;

struct bp_plan_factors {
    const char *path; /* the --factors file, named in each factor's source */
    factor *row;
    int n;
};

/* Number member `key` of object node o into *out; false when missing. */
static bool num(const bp_json *j, int o, const char *key, double *out) {
    int i = bp_json_get(j, o, key);
    if (i < 0 || j->nodes[i].type != BP_JSON_NUMBER) return false;
    *out = j->nodes[i].num;
    return true;
}

static bool flag(const bp_json *j, int o, const char *key, bool *out) {
    int i = bp_json_get(j, o, key);
    if (i < 0 || j->nodes[i].type != BP_JSON_BOOL) return false;
    *out = j->nodes[i].num != 0;
    return true;
}

/* Ranking row o as a factor; false when it is not a trialled row in full. */
static bool row_factor(const bp_json *j, int o, factor *f) {
    bool trialled = false;
    double dp = 0, N = 0;
    memset(f, 0, sizeof *f);
    if (!flag(j, o, "trialled", &trialled) || !trialled) return false;
    bool whole = bp_json_str_copy(j, bp_json_get(j, o, "algo"), f->algo, sizeof f->algo) &&
                 bp_json_str_copy(j, bp_json_get(j, o, "efficiency_source"), f->source, sizeof f->source) &&
                 num(j, o, "dp", &dp) && num(j, o, "pipelines", &N) && num(j, o, "steps_factor", &f->f) &&
                 flag(j, o, "sc", &f->sc) && flag(j, o, "cb", &f->cb) && flag(j, o, "fe", &f->fe);
    f->dp = (int)dp, f->N = (int)N;
    return whole && f->f > 0;
}

static bool same(const factor *a, const factor *b) {
    return !strcmp(a->algo, b->algo) && a->dp == b->dp && a->N == b->N && a->sc == b->sc &&
           a->cb == b->cb && a->fe == b->fe;
}

/* The distinct trialled kinds of parsed ranking j into t; the reason when j is not a
 * ranking of `model` or holds none. */
static const char *collect(const bp_json *j, const char *model, bp_plan_factors *t) {
    if (!bp_json_str_eq(j, bp_json_get(j, 0, "format"), "bagpipe-plan")) return "is not a ranking of bagpipe plan";
    if (!bp_json_str_eq(j, bp_json_get(j, 0, "model"), model)) return "planned another model";
    int a = bp_json_get(j, 0, "ranking");
    if (a < 0 || j->nodes[a].type != BP_JSON_ARRAY) return "has no ranking";
    int cap = 0;
    for (int e = j->nodes[a].child; e >= 0; e = j->nodes[e].next) cap++;
    if (!(t->row = calloc((size_t)cap + 1, sizeof *t->row))) return "is too large to read";
    for (int e = j->nodes[a].child; e >= 0; e = j->nodes[e].next) {
        factor f;
        bool seen = !row_factor(j, e, &f);
        for (int i = 0; i < t->n && !seen; i++) seen = same(&t->row[i], &f);
        if (!seen) t->row[t->n++] = f;
    }
    return t->n ? NULL : "holds no factor measured by --trials";
}

bp_status bp_plan_factors_load(const char *path, const char *model, bp_plan_factors **out, bp_err *err) {
    *out = NULL;
    bp_plan_factors *t = calloc(1, sizeof *t);
    if (!t) return bp_fail(err, BP_ENOMEM, "option --factors: out of memory");
    t->path = path;
    bp_bytes b;
    bp_json j;
    if (bp_read_file(path, &b, err)) {
        free(t);
        bp_err_context(err, "option --factors");
        return err->code = BP_EUSAGE;
    }
    bp_status rc = bp_json_parse((const char *)b.data, b.n, &j, err);
    const char *bad = rc ? "is not JSON" : collect(&j, model, t);
    if (!rc) bp_json_free(&j);
    free(b.data);
    if (!bad) {
        *out = t;
        return BP_OK;
    }
    bp_plan_factors_free(t);
    return bp_fail(err, BP_EUSAGE, "option --factors: %s %s (write one with plan --trials K --json FILE "
                   "on the same model)", path, bad);
}

void bp_plan_factors_free(bp_plan_factors *t) {
    if (!t) return;
    free(t->row);
    free(t);
}

void bp_plan_factors_apply(const bp_plan_factors *t, bp_plan_result *r) {
    r->factor_kinds = t->n;
    for (int i = 0; i < r->n_cand; i++) {
        bp_plan_candidate *k = &r->cand[i];
        factor want = {.dp = k->dp, .N = k->N, .sc = k->knobs.sc, .cb = k->knobs.cb, .fe = k->knobs.fe};
        snprintf(want.algo, sizeof want.algo, "%s", bp_dp_algo_name(k->knobs.algo));
        for (int m = 0; m < t->n; m++) {
            if (!same(&t->row[m], &want)) continue;
            k->factor = t->row[m].f;
            k->trialled = true;
            snprintf(k->trial_source, sizeof k->trial_source, "%.100s: %s", t->path, t->row[m].source);
            break;
        }
    }
}
