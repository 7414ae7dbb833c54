#include "core/options.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const bp_option *find(const bp_option *opts, int n, const char *name, size_t len) {
    for (int i = 0; i < n; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0) return &opts[i];
    return NULL;
}

/* Index of `value` in "a|b|c", or -1. */
static int choice_index(const char *choices, const char *value) {
    size_t len = strlen(value);
    int idx = 0;
    for (const char *p = choices; *p; idx++) {
        const char *bar = strchr(p, '|');
        size_t k = bar ? (size_t)(bar - p) : strlen(p);
        if (k == len && strncmp(p, value, k) == 0) return idx;
        if (!bar) break;
        p = bar + 1;
    }
    return -1;
}

static bp_status range_error(const bp_option *o, const char *value, bp_err *err) {
    return bp_fail(err, BP_EUSAGE, "option --%s: %s is out of range [%g, %g]", o->name, value,
                   o->min, o->max);
}

static bp_status set_number(const bp_option *o, char *field, const char *value, bp_err *err) {
    char *end;
    errno = 0;
    if (o->type == BP_OPT_DOUBLE) {
        double v = o->choices && strcmp(value, o->choices) == 0 ? NAN : strtod(value, &end);
        if (isnan(v) && o->choices) {
            memcpy(field, &v, sizeof v);
            return BP_OK;
        }
        if (*value == '\0' || *end || errno || !isfinite(v))
            return bp_fail(err, BP_EUSAGE, "option --%s: '%s' is not a number%s%s", o->name, value,
                           o->choices ? " or " : "", o->choices ? o->choices : "");
        if (v < o->min || v > o->max) return range_error(o, value, err);
        memcpy(field, &v, sizeof v);
        return BP_OK;
    }
    long long v = strtoll(value, &end, 10);
    if (*value == '\0' || *end || (errno && errno != ERANGE))
        return bp_fail(err, BP_EUSAGE, "option --%s: '%s' is not an integer", o->name, value);
    if (errno == ERANGE) return range_error(o, value, err); /* digits beyond 64 bits */
    if ((double)v < o->min || (double)v > o->max) return range_error(o, value, err);
    if (o->type == BP_OPT_INT) {
        int x = (int)v;
        memcpy(field, &x, sizeof x);
    } else {
        int64_t x = v;
        memcpy(field, &x, sizeof x);
    }
    return BP_OK;
}

static bp_status set_value(const bp_option *o, void *target, const char *value, bp_err *err) {
    char *field = (char *)target + o->offset;
    switch (o->type) {
    case BP_OPT_STRING:
        if (strlen(value) >= o->size)
            return bp_fail(err, BP_EUSAGE, "option --%s: value is longer than %zu characters",
                           o->name, o->size - 1);
        memcpy(field, value, strlen(value) + 1);
        return BP_OK;
    case BP_OPT_CHOICE: {
        int idx = choice_index(o->choices, value);
        if (idx < 0)
            return bp_fail(err, BP_EUSAGE, "option --%s: '%s' is not one of %s", o->name, value,
                           o->choices);
        memcpy(field, &idx, sizeof idx);
        return BP_OK;
    }
    case BP_OPT_FLAG: {
        bool on = true;
        memcpy(field, &on, sizeof on);
        return BP_OK;
    }
    default:
        return set_number(o, field, value, err);
    }
}

bp_status bp_options_parse(const bp_option *opts, int n_opts, void *target, int argc, char **argv,
                           int *help, bp_err *err) {
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            if (help) *help = 1;
            return BP_OK;
        }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
            return bp_fail(err, BP_EUSAGE, "unexpected argument '%s'", arg);
        const char *name = arg + 2, *eq = strchr(name, '=');
        const bp_option *o = find(opts, n_opts, name, eq ? (size_t)(eq - name) : strlen(name));
        if (!o) return bp_fail(err, BP_EUSAGE, "unknown option '%s'", arg);
        const char *value = eq ? eq + 1 : NULL;
        if (o->type == BP_OPT_FLAG && value)
            return bp_fail(err, BP_EUSAGE, "option --%s takes no value", o->name);
        if (o->type != BP_OPT_FLAG && !value) {
            if (i + 1 >= argc) return bp_fail(err, BP_EUSAGE, "option --%s needs a value", o->name);
            value = argv[++i];
        }
        bp_status rc = set_value(o, target, value ? value : "", err);
        if (rc) return rc;
    }
    return BP_OK;
}

bp_option *bp_options_compose(const bp_option_place *places, int n_places, const bp_option *own,
                              int n_own, int *n) {
    int total = n_own;
    for (int g = 0; g < n_places; g++) total += places[g].group->n;
    bp_option *all = malloc((size_t)(total > 0 ? total : 1) * sizeof *all);
    if (!all) return NULL;
    int k = 0;
    for (int g = 0; g < n_places; g++)
        for (int i = 0; i < places[g].group->n; i++) {
            all[k] = places[g].group->opts[i];
            all[k++].offset += places[g].base;
        }
    for (int i = 0; i < n_own; i++) all[k++] = own[i];
    *n = total;
    return all;
}

void bp_options_place_defaults(const bp_option_place *places, int n_places, void *target) {
    for (int g = 0; g < n_places; g++)
        if (places[g].group->defaults)
            memcpy((char *)target + places[g].base, places[g].group->defaults,
                   places[g].group->size);
}

void bp_options_value_text(const bp_option *o, const void *target, char *buf, size_t n) {
    const char *field = (const char *)target + o->offset;
    int i;
    bool b;
    int64_t l;
    double d;
    switch (o->type) {
    case BP_OPT_INT:
        memcpy(&i, field, sizeof i);
        snprintf(buf, n, "%d", i);
        break;
    case BP_OPT_INT64:
        memcpy(&l, field, sizeof l);
        snprintf(buf, n, "%" PRId64, l);
        break;
    case BP_OPT_DOUBLE:
        memcpy(&d, field, sizeof d);
        if (isnan(d) && o->choices)
            snprintf(buf, n, "%s", o->choices);
        else if (snprintf(buf, n, "%g", d) > 0 && strtod(buf, NULL) != d)
            snprintf(buf, n, "%.17g", d); /* every digit when %g would round it */
        break;
    case BP_OPT_STRING:
        snprintf(buf, n, "%s", *field ? field : "none");
        break;
    case BP_OPT_CHOICE: {
        memcpy(&i, field, sizeof i);
        const char *p = o->choices;
        for (int k = 0; k < i && p; k++) p = strchr(p, '|') ? strchr(p, '|') + 1 : NULL;
        size_t len = p ? strcspn(p, "|") : 0;
        snprintf(buf, n, "%.*s", (int)len, p ? p : "");
        break;
    }
    case BP_OPT_FLAG:
        memcpy(&b, field, sizeof b);
        snprintf(buf, n, "%s", b ? "on" : "off");
        break;
    }
}

void bp_options_print_help(FILE *f, const bp_option *opts, int n_opts, const void *defaults) {
    for (int i = 0; i < n_opts; i++) {
        const bp_option *o = &opts[i];
        char left[256], def[256];
        const char *meta = o->type == BP_OPT_CHOICE ? o->choices : o->metavar;
        snprintf(left, sizeof left, "--%s%s%s", o->name, meta ? " " : "", meta ? meta : "");
        if (o->default_text)
            snprintf(def, sizeof def, "%s", o->default_text);
        else
            bp_options_value_text(o, defaults, def, sizeof def);
        fprintf(f, "  %-28s %s (default: %s)\n", left, o->help, def);
    }
}

/* A heading, then the n options it heads (none when n is 0). */
static void print_section(FILE *f, const char *title, const bp_option *opts, int n,
                          const void *defaults) {
    if (n == 0) return;
    if (title) fprintf(f, "\n%s:\n", title);
    bp_options_print_help(f, opts, n, defaults);
}

void bp_options_print_help_placed(FILE *f, const bp_option *opts, const bp_option_place *places,
                                  int n_places, int n_own, const char *own_title,
                                  const void *defaults) {
    int k = 0;
    for (int g = 0; g < n_places; k += places[g++].group->n)
        print_section(f, places[g].title, opts + k, places[g].group->n, defaults);
    print_section(f, own_title, opts + k, n_own, defaults);
}

void bp_options_print_shell_word(FILE *f, const char *word) {
    static const char safe[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+=.,/:@%";
    if (*word && strspn(word, safe) == strlen(word)) {
        fprintf(f, " %s", word);
        return;
    }
    fputs(" '", f);
    for (; *word; word++) *word == '\'' ? fputs("'\\''", f) : fputc(*word, f);
    fputc('\'', f);
}
