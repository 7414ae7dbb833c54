/* A predictor of one training step of a pipeline (docs/algorithms.md#avgpipe).
 *
 * A discrete-event simulation of exactly what the runtime (parallel/pipe.c) does:
 * every stage runs its operations of bp_schedule_stream over the K x N x M
 * positions of the AvgPipe stream, in order, one at a time. F(v) on stage s starts
 * when the stage is free and the activation of F(v) on stage s-1 has arrived; B(v)
 * when the gradient of B(v) on stage s+1 has arrived; an inline update U (a stream
 * of K > 1 steps without a flush) when the stage is free, and with a tied tensor
 * on the first and last stages when both have reached it (their collective). Sends
 * do not block the sender.
 *
 * A message takes, with an emulated network (bagpipe/comm.h), its serialization
 * on the sender's directed link, queued behind the link's earlier messages, plus
 * the latency; without one, a fixed cost plus its bytes at a copy bandwidth. A
 * stage that had to wait for a message resumes `wake_s` after it arrived: on a
 * machine with more runnable processes than cores, a rank that waits gives its
 * core away (MPI yields when idle) and must be scheduled again.
 *
 * A step on stage s is: `update_s` (zeroing gradients, the optimizer steps of its
 * N replicas, their averaging), then its operations, then the collectives that end
 * a step on every rank (`sync_s`), which make all stages wait for the slowest. So
 * the step time is the latest stage's end plus sync_s, over K for a stream of K
 * steps (update_s and sync_s then are the stream's last step's).
 *
 * Memory of stage s: N replicas' parameters, gradients, optimizer state and
 * workspace, plus the most micro-batch activations it holds at once. */
#ifndef BP_PLAN_SIM_PIPELINE_H
#define BP_PLAN_SIM_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>

#include "bagpipe/comm.h"
#include "bagpipe/status.h"
#include "parallel/schedule.h"

/* What one stage costs; times in seconds, per micro-batch where it says so. */
typedef struct bp_sim_stage {
    double fwd_s, bwd_s;  /* one micro-batch, including the per-operation overhead */
    double update_s;      /* once per step (stream), before the first operation */
    double inline_update_s; /* one pipeline's update inline in a stream (U) */
    size_t act_bytes;     /* activations one micro-batch in flight holds */
    size_t replica_bytes; /* parameters + gradients + optimizer state + workspace */
    size_t out_bytes;     /* activation sent to stage s+1 (its gradient comes back) */
    /* Compressed backpropagation (Optimus-CC): the last `cb_sends` of this stage's
     * backward sends (all: the stream's length) carry cb_bytes instead of the whole
     * gradient, and their backward takes cb_s longer (encoding). 0: none. */
    int cb_sends;
    size_t cb_bytes;
    double cb_s;
    /* The share of the time this stage's link to the others also carries its data-
     * parallel transfers (async's rounds, an overlapped exchange: one network card
     * a node), which take half of it while both send, as TCP's flows share a link:
     * a message's time on the wire grows by this share. 0: the link is its own. */
    double link_shared;
} bp_sim_stage;

/* How long a message takes. */
typedef struct bp_sim_link {
    bp_net net;      /* when on, it decides how long a message travels */
    double msg_s;    /* otherwise: fixed cost of a message */
    double copy_Bps; /* otherwise: bytes per second (0: free) */
    double wake_s;   /* a receiver that waited resumes this long after arrival */
    double poll_s;   /* waiting ranks test every poll_s and sleep in between (an
                      * emulated run's), so a hand-over between two ranks in a
                      * message's protocol takes an interval; 0: they block in MPI */
    double host_Bps; /* device memory: a message is copied to the host before it is
                      * sent and to the device after it arrived, each direction at
                      * this rate (comm/memory.c); 0: host memory */
    size_t eager_bytes; /* the run's MPI eager limit; 0: BP_SIM_MPI_EAGER_BYTES */
} bp_sim_link;

typedef struct bp_sim_config {
    int S, N, M; /* stages, pipelines, micro-batches per pipeline */
    int stream_len; /* steps of one stream without a flush (0 or 1: a flush every step) */
    bool tied;   /* the first and last stages meet in each inline update */
    /* Their tied tensor's allreduce goes over the links of the pipeline's messages (2
     * stages, whose pair it is; or a pipeline across nodes of one network card each),
     * so it starts once the messages on them have left: the last stage's gradient,
     * sent just before its update, delays the meeting by its time on the wire. */
    bool tied_rides_pipeline;
    bp_schedule sched;
    const bp_sim_stage *stage; /* [S] */
    bp_sim_link link;
    double sync_s; /* collectives at the end of a step */
} bp_sim_config;

typedef struct bp_sim_stage_result {
    double end_s;   /* the stage's last operation ends */
    double busy_s;  /* computing */
    double idle_s;  /* waiting for activations or gradients */
    /* waiting at inline updates for the tied tensor's meeting (the other end, and the
     * link it rides): the runtime counts it as the embedding's, not the pipeline's */
    double meet_s;
    int peak_stash; /* most micro-batches held at once */
    double peak_bytes;
    double last_bwd_start_s; /* the stream's last backward starts (data parallelism's
                              * buckets overlap it) */
} bp_sim_stage_result;

typedef struct bp_sim_result {
    double step_s;     /* one step (the stream's time over K) */
    double peak_bytes; /* the largest stage's */
    double bubble;     /* idle share of the stages' time in the step */
    bool deadlock;     /* some stage waits forever (never for the runtime's schedules) */
} bp_sim_result;

/* Seconds one message of `bytes` takes on an idle link (without wake_s). */
double bp_sim_message_s(const bp_sim_link *l, size_t bytes);

/* MPI's eager limit by default (Open MPI's TCP transport, btl_tcp_eager_limit): a
 * message up to this size travels at once, a larger one only after the receiver's
 * clear-to-send. A run that raises it (the emulated studies send up to 32 MiB
 * eagerly, bench/emu/cluster_runs.py) is simulated with --mpi-eager-bytes. */
#define BP_SIM_MPI_EAGER_BYTES 65536

/* Seconds of the hand-overs one message of `bytes` needs between two ranks that
 * test every l->poll_s (0 when they block in MPI): comm/ sends a stamp before the
 * data and posts the receive once the stamp has come (comm/transport.c). Up to
 * MPI's eager limit the data comes with the stamp: one hand-over. Above it three:
 * the receiver sees the stamp and MPI's request to send, the sender the receiver's
 * clear-to-send, the receiver the data. Each takes a whole interval: the two ranks
 * of an exchange complete each other's messages at the same tests, so they test in
 * step, and what one posts at a test the other sees at its next. Measured on
 * emulated A100s (tp 2 at dilation 256, 100 Gbit, one or two ranks per host) the
 * allreduces of activations took these hand-overs within 5%. */
double bp_sim_handover_s(const bp_sim_link *l, size_t bytes);

/* Seconds of an allreduce of `bytes` over `ranks` as comm runs it (bagpipe/comm.h): a
 * ring, reduce-scatter then allgather, 2 (ranks - 1) exchanges of bytes / ranks, each
 * waited for; up to BP_ALLREDUCE_TREE_MAX_BYTES over more than 2 ranks, a binomial
 * reduce and broadcast, 2 ceil(log2 ranks) messages of all the bytes. 0 for one rank.
 * Where the ranks poll, an exchange takes at least its messages' hand-overs: the
 * reduce-scatter's in segments of BP_RING_SEGMENT_FLOATS, one after another. */
double bp_sim_allreduce_s(const bp_sim_link *l, int ranks, size_t bytes);

/* Simulate one step. per_stage ([S], or NULL) gets every stage's figures.
 * BP_EINTERNAL (and r->deadlock) when the stages cannot all finish; BP_ENOMEM. */
bp_status bp_sim_run(const bp_sim_config *c, bp_sim_result *r, bp_sim_stage_result *per_stage);

#endif
