/* How a run communicates (--bucket-mb, --no-overlap, --comm-poll-us, --net,
 * --comm-timeout, --comm-path, --hierarchical, --node-size), set by the options
 * that communication.c declares: the data-parallel engine's buckets and waits, and
 * the communicator's network emulation, timeout and collective path. */
#ifndef BP_PARALLEL_COMMUNICATION_H
#define BP_PARALLEL_COMMUNICATION_H

#include <stdbool.h>

#include "bagpipe/comm.h"
#include "core/options.h"

typedef struct bp_communication_settings {
    double bucket_mb;  /* gradient bucket size; NAN: auto (measured over the first steps) */
    bool no_overlap;   /* send buckets after backward instead of during it */
    double poll_us;    /* data-parallel waits test every poll_us (0: block in MPI) */
    char net[256];     /* emulated network, "" off */
    double timeout;    /* seconds before a communication aborts the job (0: never) */
    bp_path path;      /* collectives: ours over point-to-point, or MPI's */
    bool hierarchical; /* reduce within nodes, run the algorithm among node leaders */
    int node_size;     /* ranks per node (0: ranks sharing memory) */
} bp_communication_settings;

/* On an emulated device the poll interval is the device's, dilated like the rest of
 * the run, but at most this many seconds of the host's, so that the host's own
 * wake-ups stay prompt (the trainer's cap; the simulator charges the same waits). */
#define BP_COMM_POLL_HOST_MAX_S 0.01

extern const bp_option_group bp_communication_options;

/* Refuse a --net that does not parse; the message names the option. */
bp_status bp_communication_check(const bp_communication_settings *s, bp_err *err);

#endif
