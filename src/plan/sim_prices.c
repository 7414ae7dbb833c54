/* The prices of what the dp algorithms declare they do (parallel/dp/cost.h) on a
 * simulated machine: the environment's machine is a bp_sim_machine, its link a
 * bp_sim_link. */
#include <math.h>

#include "plan/sim_machine.h"

static const bp_sim_machine *machine(const bp_dp_cost_env *e) { return e->machine; }
static const bp_sim_link *link_of(const bp_dp_cost_env *e) { return e->link; }

static double ring_allreduce_s(const bp_dp_cost_env *e, size_t n) {
    return bp_sim_ring_allreduce_s(machine(e), link_of(e), e->p, n);
}

static double message_s(const bp_dp_cost_env *e, size_t bytes) {
    return bp_sim_message_s(link_of(e), bytes);
}

static double wake_s(const bp_dp_cost_env *e) { return link_of(e)->wake_s; }

/* k messages of `bytes` that one rank posts at once, serialized by its link. */
static double burst_on(const bp_sim_link *l, int k, size_t bytes) {
    if (k <= 0) return 0;
    if (l->net.on) return k * (double)bytes * 8.0 / l->net.bw_bps + l->net.lat_s + l->wake_s;
    return l->msg_s + (l->copy_Bps > 0 ? k * (double)bytes / l->copy_Bps : 0) + l->wake_s;
}

/* Where links are per pair (comm/'s --net books each pair's link on its own, and a
 * rank posts its messages to different peers at once), they travel side by side:
 * the time of one. Measured on emulated A100s at dilation 128 (bytegrad dp4 and dp8,
 * lp-decentralized dp4: 1.01-1.09 measured over predicted); at 32 the hosts' own
 * costs of 4-8 ranks on 2 cores added 10-15% (docs/results/emu_sim_validation). */
static int side_by_side(const bp_dp_cost_env *e, int k) {
    return machine(e)->per_pair && k > 1 ? 1 : k;
}

static double burst_s(const bp_dp_cost_env *e, int k, size_t bytes) {
    return burst_on(link_of(e), side_by_side(e, k), bytes);
}

static double alltoall_s(const bp_dp_cost_env *e, size_t wire) {
    int p = e->p, here = e->here;
    double t = burst_on(link_of(e), side_by_side(e, p - 1), wire);
    const bp_sim_link *node = &machine(e)->inter;
    if (here > 1 && here < p && node->net.on)
        t = fmax(t, (double)here * (p - here) * (double)wire * 8.0 / node->net.bw_bps +
                        node->net.lat_s + node->wake_s);
    return t;
}

static double peer_exchange_s(const bp_dp_cost_env *e, size_t bytes) {
    double t = bp_sim_message_s(link_of(e), bytes);
    const bp_sim_link *node = &machine(e)->inter;
    if (e->here > 1 && 2 * e->here <= e->p && node->net.on)
        t = fmax(t, e->here * (double)bytes * 8.0 / node->net.bw_bps + node->net.lat_s);
    return t;
}

static double minmax_s(const bp_dp_cost_env *e, size_t n, bool encode) {
    return bp_sim_minmax_s(machine(e), n, encode);
}

static double matmul_s(const bp_dp_cost_env *e, double flops) { return bp_sim_matmul_s(machine(e), flops); }

static double vec_s(const bp_dp_cost_env *e, size_t n) { return bp_sim_vec_s(machine(e), n); }

/* As the emulated backend's and cuda's copies: a launch, then the link's rate. */
static double host_copy_s(const bp_dp_cost_env *e, size_t bytes) {
    const bp_sim_machine *m = machine(e);
    return m->host_Bps > 0 ? m->launch_s + (double)bytes / m->host_Bps : 0;
}

/* Each waits for one of the kernels computing beside it (core/backend_emu_timeline.h:
 * an engine falling free starts the operation ready longest, so the pass runs at the
 * kernel's end; the host issues the next one just after, while backward's next kernel
 * has started). */
static double pass_waits_s(const bp_dp_cost_env *e, int k) { return k * e->beside_kernel_s; }

const bp_dp_prices bp_sim_prices = {
    .ring_allreduce_s = ring_allreduce_s,
    .message_s = message_s,
    .wake_s = wake_s,
    .burst_s = burst_s,
    .alltoall_s = alltoall_s,
    .peer_exchange_s = peer_exchange_s,
    .minmax_s = minmax_s,
    .matmul_s = matmul_s,
    .vec_s = vec_s,
    .host_copy_s = host_copy_s,
    .pass_waits_s = pass_waits_s,
};
