#include "parallel/sim/cost.h"

#include <math.h>

#include "nn/real.h"
#include "parallel/sim/pipeline.h"

double bp_sim_ring_bytes(int p, size_t n) {
    return p > 1 ? 2.0 * (p - 1) * (double)((n + (size_t)p - 1) / (size_t)p) * sizeof(bp_real) : 0;
}

double bp_sim_allreduce_cost(const bp_dp_cost_env *e, size_t n, double *bytes) {
    *bytes += bp_sim_ring_bytes(e->p, n);
    return bp_sim_ring_allreduce_s(e->m, e->link, e->p, n);
}

size_t bp_sim_minmax_bytes(size_t n) { return n ? n + 2 * sizeof(float) : 0; }

double bp_sim_burst_s(const bp_sim_link *l, int k, size_t bytes) {
    if (k <= 0) return 0;
    if (l->net.on) return k * (double)bytes * 8.0 / l->net.bw_bps + l->net.lat_s + l->wake_s;
    return l->msg_s + (l->copy_Bps > 0 ? k * (double)bytes / l->copy_Bps : 0) + l->wake_s;
}

/* The all-to-all of C_LP_S: each rank posts p - 1 messages of `wire` bytes; with
 * `here` of the p ranks on each node, the node's link carries here x (p - here)
 * of them. */
static double alltoall_s(const bp_dp_cost_env *e, size_t wire) {
    int p = e->p, here = e->here;
    double t = bp_sim_burst_s(e->link, p - 1, wire);
    const bp_sim_link *node = &e->m->inter;
    if (here > 1 && here < p && node->net.on)
        t = fmax(t, (double)here * (p - here) * (double)wire * 8.0 / node->net.bw_bps +
                        node->net.lat_s + node->wake_s);
    return t;
}

double bp_sim_lp_allreduce_cost(const bp_dp_cost_env *e, size_t n, double *bytes) {
    int p = e->p;
    if (p <= 1) return 0;
    size_t part = (n + (size_t)p - 1) / (size_t)p, wire = bp_sim_minmax_bytes(part);
    const bp_sim_machine *m = e->m;
    *bytes += 2.0 * (p - 1) * (double)wire;
    return bp_sim_minmax_s(m, n, true) + alltoall_s(e, wire) +
           bp_sim_minmax_s(m, part * (size_t)p, false) + bp_sim_vec_s(m, n) +
           bp_sim_minmax_s(m, part, true) + (p - 1) * bp_sim_message_s(e->link, wire) +
           e->link->wake_s + bp_sim_minmax_s(m, n, false);
}
