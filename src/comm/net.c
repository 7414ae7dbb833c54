/* Network emulation: the spec parser, the link model and the per-link clocks
 * (comm.h describes the model and the units). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/internal.h"
#include "core/timer.h"

/* A non-negative finite number at the start of s; *end after it. */
static bool number(const char *s, double *v, const char **end) {
    char *e;
    *v = strtod(s, &e);
    *end = e;
    return e != s && isfinite(*v) && *v >= 0;
}

static bool parse_bw(const char *s, double *bps) {
    const char *u;
    if (!number(s, bps, &u)) return false;
    static const char prefixes[] = "kKmMgG";
    static const double scale[] = {1e3, 1e3, 1e6, 1e6, 1e9, 1e9};
    const char *p = *u ? strchr(prefixes, *u) : NULL;
    if (p) {
        *bps *= scale[p - prefixes];
        u++;
    }
    bool unit_ok = !*u || !strcmp(u, "bit") || !strcmp(u, "bit/s") || !strcmp(u, "bps");
    return unit_ok && *bps > 0;
}

/* Links slower than 1 Kbit/s or with a latency above 10 s would stall a job for
 * hours, faster than 1 Pbit/s emulate nothing (an overflow to infinity would turn
 * emulation off unnoticed): such values are mistakes, refused. */
#define NET_MIN_BPS 1e3
#define NET_MAX_BPS 1e15
#define NET_MAX_LAT_S 10.0

static bool in_range(int k, double v) {
    return k == 0 ? v >= NET_MIN_BPS && v <= NET_MAX_BPS : v <= NET_MAX_LAT_S;
}

/* A byte count with an optional binary K or M suffix. */
static bool parse_bytes(const char *s, double *bytes) {
    const char *u;
    if (!number(s, bytes, &u)) return false;
    if (*u == 'K' || *u == 'k') {
        *bytes *= 1024;
        u++;
    } else if (*u == 'M' || *u == 'm') {
        *bytes *= 1024 * 1024;
        u++;
    }
    return !*u || !strcmp(u, "B");
}

static bool parse_lat(const char *s, double *sec) {
    const char *u;
    if (!number(s, sec, &u)) return false;
    if (!strcmp(u, "us"))
        *sec *= 1e-6;
    else if (!strcmp(u, "ms"))
        *sec *= 1e-3;
    else if (strcmp(u, "s") && !(*u == '\0' && *sec == 0))
        return false;
    return true;
}

/* One "key=value" field of the spec (copied into `field`). */
static bp_status parse_field(char *field, bp_net *net, bool seen[3], bp_err *err) {
    char *eq = strchr(field, '=');
    const char *value = eq ? eq + 1 : "";
    if (eq) *eq = '\0';
    int k = !strcmp(field, "bw") ? 0 : !strcmp(field, "lat") ? 1 : !strcmp(field, "eager") ? 2 : -1;
    if (k < 0 || !eq)
        return bp_fail(err, BP_EUSAGE,
                       "net: unknown field '%s' (expected bw=<rate>, lat=<time> or eager=<bytes>)",
                       field);
    if (seen[k]) return bp_fail(err, BP_EUSAGE, "net: field '%s' given twice", field);
    seen[k] = true;
    if (k == 0 && !parse_bw(value, &net->bw_bps))
        return bp_fail(err, BP_EUSAGE,
                       "net: bad bw '%s' (expected bits per second > 0 with an optional K, M or "
                       "G prefix, e.g. 1Gbit or 100Mbit)",
                       value);
    if (k == 1 && !parse_lat(value, &net->lat_s))
        return bp_fail(err, BP_EUSAGE,
                       "net: bad lat '%s' (expected a time with unit us, ms or s, e.g. 1ms)",
                       value);
    if (k < 2 && !in_range(k, k == 0 ? net->bw_bps : net->lat_s))
        return bp_fail(err, BP_EUSAGE, "net: %s '%s' is out of range (%s)", field, value,
                       k == 0 ? "1Kbit to 1000000Gbit" : "0 to 10s");
    if (k == 2 && !parse_bytes(value, &net->eager))
        return bp_fail(err, BP_EUSAGE,
                       "net: bad eager '%s' (expected bytes with an optional K or M, e.g. 64K)",
                       value);
    return BP_OK;
}

bp_status bp_net_parse(const char *spec, bp_net *net, bp_err *err) {
    memset(net, 0, sizeof *net);
    if (!spec || !*spec || !strcmp(spec, "off")) return BP_OK;
    char *copy = strdup(spec);
    if (!copy) return bp_fail(err, BP_ENOMEM, "net: cannot copy the spec");
    bool seen[3] = {false, false, false};
    bp_status rc = BP_OK;
    char *save = NULL;
    for (char *f = strtok_r(copy, ",", &save); f && rc == BP_OK; f = strtok_r(NULL, ",", &save))
        rc = parse_field(f, net, seen, err);
    free(copy);
    net->on = rc == BP_OK;
    if (rc != BP_OK) memset(net, 0, sizeof *net);
    return rc;
}

static double serialization(const bp_net *net, size_t bytes) {
    return net->bw_bps > 0 ? (double)bytes * 8.0 / net->bw_bps : 0.0;
}

double bp_net_time(const bp_net *net, size_t bytes) {
    return net->on ? serialization(net, bytes) + net->lat_s : 0.0;
}

bool bpc_net_on(bp_world *w) {
    pthread_mutex_lock(&w->mu);
    bool on = w->net.on;
    pthread_mutex_unlock(&w->mu);
    return on;
}

bool bpc_net_reserve(bp_world *w, int proc, size_t bytes, double *sent, double *arrive) {
    pthread_mutex_lock(&w->mu);
    bool on = w->net.on;
    if (on) {
        double now = bp_now();
        double start = w->link_free[proc] > now ? w->link_free[proc] : now;
        *sent = w->link_free[proc] = start + serialization(&w->net, bytes);
        *arrive = *sent + w->net.lat_s;
    }
    pthread_mutex_unlock(&w->mu);
    return on;
}

double bpc_net_rendezvous(bp_world *w, int proc, size_t bytes, double arrive) {
    pthread_mutex_lock(&w->mu);
    const bp_net *net = &w->net;
    if (net->on && net->eager > 0 && (double)bytes > net->eager) {
        /* The clear-to-send leaves once our own link to the sender is free; the
         * rest of the message follows it. */
        size_t rest = bytes - (size_t)net->eager;
        double done = w->link_free[proc] + serialization(net, rest) + net->lat_s;
        if (done > arrive) arrive = done;
    }
    pthread_mutex_unlock(&w->mu);
    return arrive;
}

bp_status bp_comm_set_net(bp_comm *c, const char *spec) {
    bp_net net;
    bp_err err;
    bp_status rc = bp_net_parse(spec, &net, &err);
    if (rc != BP_OK) return bpc_comm_record(c, rc, &err);
    bp_world *w = c->world;
    pthread_mutex_lock(&w->mu);
    w->net = net;
    for (int i = 0; i < w->procs; i++) w->link_free[i] = 0;
    pthread_mutex_unlock(&w->mu);
    return BP_OK;
}
