#include "parallel/dp/cost.h"

#include "nn/real.h"

double bp_dp_ring_bytes(int p, size_t n) {
    return p > 1 ? 2.0 * (p - 1) * (double)((n + (size_t)p - 1) / (size_t)p) * sizeof(bp_real) : 0;
}

double bp_dp_allreduce_cost(const bp_dp_cost_env *e, size_t n, double *bytes) {
    *bytes += bp_dp_ring_bytes(e->p, n);
    return e->price->ring_allreduce_s(e, n);
}

double bp_dp_staging_cost(const bp_dp_cost_env *e, size_t n) {
    return 2 * e->price->host_copy_s(e, n * sizeof(float));
}

size_t bp_dp_minmax_bytes(size_t n) { return n ? n + 2 * sizeof(float) : 0; }

double bp_dp_lp_allreduce_cost(const bp_dp_cost_env *e, size_t n, double *bytes) {
    int p = e->p;
    if (p <= 1) return 0;
    size_t part = (n + (size_t)p - 1) / (size_t)p, wire = bp_dp_minmax_bytes(part);
    const bp_dp_prices *c = e->price;
    *bytes += 2.0 * (p - 1) * (double)wire;
    /* A device's values are staged (comm/ codes on the host). */
    return bp_dp_staging_cost(e, n) + c->minmax_s(e, n, true) +
           c->alltoall_s(e, wire) +
           c->minmax_s(e, part * (size_t)p, false) + c->vec_s(e, n) +
           c->minmax_s(e, part, true) + (p - 1) * c->message_s(e, wire) +
           c->wake_s(e) + c->minmax_s(e, n, false) + c->pass_waits_s(e, 3 * p + 1);
}
