#include "parallel/communication.h"

#include "parallel/dp.h"

#define S bp_communication_settings
static const bp_option options[] = {
    {"bucket-mb", BP_OPT_DOUBLE, offsetof(S, bucket_mb), 0, "auto", 1e-6, 1e6, "MB|auto",
     "gradient bucket size; auto: the fastest of 0.25 to 10 MB, measured over the first steps",
     NULL},
    BP_OPT_SWITCH(S, "no-overlap", no_overlap,
                  "send gradient buckets after backward instead of during it"),
    BP_OPT_NUM(S, "comm-poll-us", BP_OPT_DOUBLE, poll_us, 0, 1e6, "US",
               "every wait for a message tests every US microseconds and sleeps in between, "
               "leaving the core to computation (0: block in MPI)"),
    BP_OPT_STR(S, "net", net, "SPEC",
               "emulate a network, e.g. bw=1Gbit,lat=1ms (off on real clusters)", "off"),
    BP_OPT_NUM(S, "comm-timeout", BP_OPT_DOUBLE, timeout, 0, 1e9, "S",
               "abort the job when a communication has not finished after S seconds (0: never)"),
    BP_OPT_CHOOSE(S, "comm-path", path, "own|mpi",
                  "collectives: our algorithms over point-to-point, or MPI's", NULL),
    BP_OPT_SWITCH(S, "hierarchical", hierarchical,
                  "reduce within nodes, run the algorithm among node leaders, broadcast back"),
    BP_OPT_NUM(S, "node-size", BP_OPT_INT, node_size, 0, 1 << 20, "N",
               "hierarchical: ranks per node (0: ranks sharing memory)"),
};
#undef S
static const bp_communication_settings defaults = {
    .bucket_mb = BP_DP_BUCKET_MB, .poll_us = 50, .timeout = 600, .path = BP_PATH_OWN};
const bp_option_group bp_communication_options = BP_OPTION_GROUP(options, defaults);

bp_status bp_communication_check(const bp_communication_settings *s, bp_err *err) {
    bp_net net;
    bp_status rc = bp_net_parse(s->net, &net, err);
    if (rc) return bp_err_context(err, "option --net");
    return BP_OK;
}
