/* bagpipe communication library: groups of ranks, point-to-point messages,
 * collectives and Bagua's relaxed primitives on flat float buffers, over MPI.
 *
 * Shape (after NCCL): an opaque bp_comm handle per group, explicit element counts,
 * a bp_status from every call that can fail (bagpipe/status.h), and the last
 * error of a group readable with bp_comm_errmsg(), a line that names the rank, the
 * group and the operation. After a collective failed on some rank the group is in
 * an unknown state: report the message and end the job (bp_comm_abort).
 *
 * Ordering and threads. MPI is started with MPI_THREAD_MULTIPLE, so any call may
 * come from any thread. Collectives of one group must be issued in the same order
 * on every rank and one at a time; a second thread that needs its own stream of
 * collectives uses its own group (bp_comm_dup). Point-to-point calls may overlap
 * freely. Free every group derived from the world before bp_comm_finalize.
 *
 * Buffers may have any length, not only multiples of the group size: collectives
 * that split a buffer across ranks use bp_chunk(). Every rank passes the same count
 * (and the same codec settings): on our own path each message of a collective
 * carries the sender's operation and count, and a rank that receives from a peer
 * that disagrees fails the operation with a line naming both counts and both
 * ranks, before anything is written to its buffer; a peer found in another
 * collective (another kind, or one more) is named so after a second of waiting.
 * MPI's path leaves these checks to MPI. Sums and averages are computed
 * in float32; on our own path every rank gets the same bits (each part is summed
 * once, by its owner, and copied), as MPI's collectives usually also give.
 *
 * Paths. By default every operation runs our own algorithms over point-to-point
 * messages (ring reduce-scatter + allgather for allreduce, or for a small one over
 * more than 2 ranks a binomial reduce and broadcast; binomial trees for broadcast and
 * reduce, pairwise exchange for all-to-all, dissemination barrier).
 * bp_comm_set_path(c, BP_PATH_MPI) uses MPI's collectives instead. While network
 * emulation is on (bp_comm_set_net), our own path is always taken so that every
 * message pays the emulated link.
 *
 * Network emulation spec: comma-separated fields
 *   bw=<number>[K|M|G][bit|bit/s|bps]   link bandwidth in bits per second, decimal
 *                                       prefixes (1Gbit = 1e9 bit/s); default infinite
 *   lat=<number>(us|ms|s)               one-way latency; default 0
 *   eager=<number>[K|M]                 rendezvous threshold in bytes (K = 1024);
 *                                       default 0 (every message eager)
 * e.g. "bw=1Gbit,lat=1ms"; "" or "off" turns it off. Each directed link between two
 * processes serializes its messages (bytes * 8 / bw, one after another) and then
 * adds the latency: a message of b bytes sent on an idle link arrives
 * b * 8 / bw + lat seconds after it was sent. A blocking send returns once the
 * message is serialized. With eager=E, a message of b > E bytes is sent as MPI over
 * TCP sends it: its first E bytes, then the rest once the receiver's clear-to-send
 * has come back, and that reply queues behind whatever the receiver is itself
 * sending to the sender; so the message arrives no earlier than (b - E) * 8 / bw +
 * lat after the receiver's own link to the sender is free. Two ranks exchanging
 * large messages then share the link as if it were half-duplex, as measured on
 * kernel-shaped TCP links with Open MPI (eager=64K is its TCP default). Times use
 * the monotonic clock, so the emulation is meant for ranks on one machine.
 *
 * Watchdog: bp_comm_set_timeout(c, s) makes any operation that has not finished
 * after s seconds print one line naming the rank, the group and the operation, and
 * abort the whole job with MPI_Abort (exit code 1). Off (0) by default. */
#ifndef BAGPIPE_COMM_H
#define BAGPIPE_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bagpipe/compress.h"
#include "bagpipe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bp_comm bp_comm;
typedef struct bp_request bp_request;

/* User tags of point-to-point messages are 0..BP_TAG_MAX. */
#define BP_TAG_MAX 16383
/* A color for bp_comm_split with which this rank joins no group (*out = NULL). */
#define BP_COLOR_NONE (-1)

/* --- groups ------------------------------------------------------------------- */

/* Start MPI (MPI_THREAD_MULTIPLE) unless the program already did, and return the
 * group of all ranks, "world". On failure *world is NULL and err says why. */
bp_status bp_comm_init(int *argc, char ***argv, bp_comm **world, bp_err *err);

/* Free the world group and shut MPI down (if bp_comm_init started it). Every
 * other group must be freed first (BP_EUSAGE otherwise, and nothing is done). */
bp_status bp_comm_finalize(bp_comm *world);

/* Free a group made by split, dup or split_node (NULL is allowed). */
bp_status bp_comm_destroy(bp_comm *c);

/* Collective over c: ranks with the same color form a new group, ordered by key
 * then by rank in c. name (may be NULL: "<parent>/<color>") appears in messages.
 * BP_COLOR_NONE gives *out = NULL. The new group inherits the path; hierarchy
 * must be set on it again. */
bp_status bp_comm_split(bp_comm *c, int color, int key, const char *name, bp_comm **out);

/* Collective: a copy of c (same ranks, path and hierarchy) with its own message
 * stream and counters, e.g. for a second thread. */
bp_status bp_comm_dup(bp_comm *c, const char *name, bp_comm **out);

/* Collective: the ranks of c on this rank's node ("<c>/local") and, on the
 * first rank of every node only, the group of those first ranks ("<c>/leaders";
 * NULL elsewhere). node_size 0 finds nodes by shared memory
 * (MPI_Comm_split_type); node_size k > 0 pretends that every k consecutive ranks
 * of c are a node, which lets one machine test hierarchical operation. */
bp_status bp_comm_split_node(bp_comm *c, int node_size, bp_comm **local, bp_comm **leaders);

/* End the whole job now (MPI_Abort) with the given exit code. */
bp_status bp_comm_abort(bp_comm *c, int code);

int bp_comm_rank(const bp_comm *c);
int bp_comm_size(const bp_comm *c);
const char *bp_comm_name(const bp_comm *c);

/* The last error of an operation on c ("" if none), valid until the next
 * failure on c. */
const char *bp_comm_errmsg(const bp_comm *c);
/* Turns the status rc of an operation on c into the caller's error: BP_OK stays
 * BP_OK; any other status is returned with c's last error message copied into err. */
bp_status bp_comm_fail(const bp_comm *c, bp_status rc, bp_err *err);

/* --- options ------------------------------------------------------------------ */

typedef enum bp_path {
    BP_PATH_OWN, /* our algorithms over point-to-point messages (default) */
    BP_PATH_MPI, /* MPI's collectives (MPI_Allreduce, ...) */
} bp_path;

bp_status bp_comm_set_path(bp_comm *c, bp_path path);

/* Collective over c. On: allreduce, allreduce_lp, peer_avg, ring_lp, async_avg
 * and powersgd on c reduce to one leader per node, run among the leaders and
 * broadcast back (node_size as in bp_comm_split_node). The decentralized
 * primitives then average between nodes, not ranks. */
bp_status bp_comm_set_hierarchical(bp_comm *c, bool on, int node_size);

/* How waits for c's messages on our own path pass the time: 0 (default) blocks
 * in MPI_Waitall, which spins in MPI's progress engine; seconds > 0 tests that
 * often and sleeps in between. For a communication thread that shares its core
 * with computation: spinning takes the core from the computation, and a thread
 * that sleeps is scheduled promptly when it wakes. Set it before communicating. */
bp_status bp_comm_set_poll(bp_comm *c, double seconds);

/* Moves this process's messages in flight on, once, without waiting: for a thread
 * that waits outside the library while requests of bp_isend / bp_irecv are
 * outstanding (an emulated device's wait, core/backend_emu.h). MPI may move a
 * message only while a rank is inside MPI: Open MPI's TCP transport sends a message
 * over its eager limit (64 KiB) by a request, a reply and fragments that each side's
 * calls push on, so a rank that sleeps elsewhere stalls its send. Returns whether
 * any such request is outstanding (none: nothing was done). Any thread may call it
 * (MPI_THREAD_MULTIPLE). */
bool bp_comm_progress(const bp_comm *c);

/* Network emulation for every group that shares c's world (see the top of this
 * file). Set it on every rank, before communicating. BP_EUSAGE names a bad field. */
bp_status bp_comm_set_net(bp_comm *c, const char *spec);

/* Watchdog timeout in seconds for every group that shares c's world; 0 is off. */
bp_status bp_comm_set_timeout(bp_comm *c, double seconds);

/* Record every operation on c (collectives, primitives, point-to-point messages and
 * their waits, with bytes, peer and the group's name, and the compression inside
 * them) on `trace` (src/core/trace.h), from whichever thread calls; NULL turns it
 * off. The trace must outlive c's operations. bp_comm_trace returns it, so that
 * code holding a group records its own work on the same trace. */
typedef struct bp_trace bp_trace;
bp_status bp_comm_set_trace(bp_comm *c, bp_trace *trace);
bp_trace *bp_comm_trace(const bp_comm *c);

/* Where buffers live (docs/ARCHITECTURE.md#adding-a-backend). Without this every buffer is host
 * memory, sent as it is. With it, a buffer that `owns` claims is device memory the
 * host may not touch: each operation copies it to host memory through to_host,
 * communicates, and copies the result back through to_device (staged; NCCL's
 * direct path is the CUDA build's). Groups made from c (split, dup) inherit it.
 * Asynchronous averaging reads and writes device memory through to_host and
 * to_device under its lock (bp_async_avg_lock). mem == NULL: host memory only. ctx is passed
 * first to every call (the owner of the memory: a device context, a backend).
 *
 * host_alloc and host_free (optional, both or neither) give the host memory the
 * device copies fastest from and to (pinned memory on CUDA: pageable memory goes
 * through the driver's bounce buffer at about half the bandwidth); host_alloc
 * returns NULL on failure. Since such memory is slow to allocate (milliseconds for
 * cudaMallocHost), each group keeps the host copies it made in a small pool and
 * reuses them for later operations; they are freed through host_free when the
 * group is destroyed or its memory is set again. Without them the copies are
 * ordinary aligned memory. Set the memory while no operation runs on c. */
typedef struct bp_comm_memory {
    void *ctx;
    bool (*owns)(void *ctx, const void *p);
    void (*to_host)(void *ctx, void *host_dst, const void *src, size_t bytes);
    void (*to_device)(void *ctx, void *dst, const void *host_src, size_t bytes);
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_free)(void *ctx, void *p);
} bp_comm_memory;
bp_status bp_comm_set_memory(bp_comm *c, const bp_comm_memory *mem);

/* --- network model ------------------------------------------------------------- */

typedef struct bp_net {
    bool on;
    double bw_bps; /* bits per second; 0 means infinite */
    double lat_s;  /* seconds */
    double eager;  /* bytes; larger messages wait for the receiver's clear-to-send; 0: none */
} bp_net;

bp_status bp_net_parse(const char *spec, bp_net *net, bp_err *err);

/* Seconds that one message of `bytes` takes on an idle emulated link. */
double bp_net_time(const bp_net *net, size_t bytes);

/* --- point-to-point ------------------------------------------------------------ */

bp_status bp_send(bp_comm *c, const float *x, size_t n, int peer, int tag);
bp_status bp_recv(bp_comm *c, float *x, size_t n, int peer, int tag);
/* Non-blocking: *req completes with bp_wait / bp_waitall, which free it. */
bp_status bp_isend(bp_comm *c, const float *x, size_t n, int peer, int tag, bp_request **req);
bp_status bp_irecv(bp_comm *c, float *x, size_t n, int peer, int tag, bp_request **req);
bp_status bp_wait(bp_request **req);
bp_status bp_waitall(bp_request **reqs, int count);

/* --- collectives ---------------------------------------------------------------- */

/* Part i of n elements split into `parts` nearly equal contiguous parts (the
 * first n % parts parts have one element more). */
void bp_chunk(size_t n, int parts, int i, size_t *off, size_t *len);

bp_status bp_barrier(bp_comm *c);
bp_status bp_bcast(bp_comm *c, float *x, size_t n, int root);
/* In place: afterwards chunk r (bp_chunk(n, size, r)) of x holds the sum over
 * ranks of that chunk; the rest of x is scratch. */
bp_status bp_reduce_scatter_sum(bp_comm *c, float *x, size_t n);
/* In place: rank r contributes chunk r of x; afterwards x is whole everywhere. */
bp_status bp_allgather(bp_comm *c, float *x, size_t n);
/* Block j (count floats) of send goes to rank j; block j of recv comes from it. */
bp_status bp_alltoall(bp_comm *c, const float *send, float *recv, size_t count);

/* --- Bagua's primitives (docs/algorithms.md#primitives) ----------------------- */

/* x = the sum of x over the group. Our own path runs a ring reduce-scatter and
 * allgather: 2 (p - 1) messages of n / p floats in a row, the bandwidth-optimal
 * pattern. Up to BP_ALLREDUCE_TREE_MAX_BYTES over more than 2 ranks (the per-step
 * agreement, a gradient norm), where each message's latency is what counts, it runs
 * a binomial reduce to rank 0 and a broadcast back instead: 2 ceil(log2 p) messages
 * in a row. Either way the sum is formed in one fixed order and every rank gets the
 * same bits. */
#define BP_ALLREDUCE_TREE_MAX_BYTES 1024
/* The ring's reduce-scatter sends each step's n / p floats as messages of at most
 * this many floats, two in flight, each added while still in cache. */
#define BP_RING_SEGMENT_FLOATS 65536
bp_status bp_allreduce_sum(bp_comm *c, float *x, size_t n);

/* C_FP_S: x = average of x over the group. */
bp_status bp_allreduce_avg(bp_comm *c, float *x, size_t n);

/* C_LP_S: the same with compressed traffic: each rank compresses chunk j of x for
 * rank j (all-to-all); rank j decompresses, averages and compresses chunk j again
 * (allgather); everyone decompresses. The codec must accept any length (such as
 * MinMaxUInt8). */
bp_status bp_allreduce_avg_lp(bp_comm *c, float *x, size_t n, bp_codec *codec);

/* PowerSGD across the group: P and Q averaged in between the codec's steps
 * (compress.h); x (rows x cols of the codec) becomes the low-rank average. A 1-D
 * codec shape falls back to bp_allreduce_avg. */
bp_status bp_allreduce_avg_powersgd(bp_comm *c, float *x, size_t n, bp_codec *powersgd);

/* The same for `count` matrices x[i] of n[i] floats at once: every P travels in one
 * allreduce, then every Q in another (two rounds of messages for the batch instead
 * of two per matrix: what a high-latency link needs). ps[i] NULL, or a 1-D codec
 * shape, averages x[i] in full within the first allreduce. */
bp_status bp_allreduce_avg_powersgd_batch(bp_comm *c, int count, float *const *x, const size_t *n,
                                          bp_codec *const *powersgd);

/* In the order of --peers' choices (shift_one|all), which store it directly. */
typedef enum bp_peers {
    BP_PEERS_SHIFT_ONE, /* average with one peer that changes every round */
    BP_PEERS_ALL,       /* average over the whole group (= allreduce) */
} bp_peers;

/* The shift_one peer of rank r in a group of even size n at round k, h = n / 2:
 * r < h ? (k + r) % ((n + 1) / 2) + h : (r - h - k) mod h (never negative). */
int bp_shift_one_peer(int rank, int size, uint64_t round);

/* D_FP_S: x = average of x with the peers of this round. shift_one needs an even
 * group size (BP_EUSAGE otherwise); a group of one leaves x as it is. */
bp_status bp_peer_avg(bp_comm *c, float *x, size_t n, bp_peers peers, uint64_t round);

/* D_LP_S: ring with compressed differences. The state keeps the replicas w (this
 * rank's), l and r (its left and right neighbour's), all equal to x0 of their
 * owner at the start (one exchange in bp_ring_lp_create, collective). Each step,
 * after the local update x: z = x + l/3 + r/3 - 5w/3; C(z) goes to both
 * neighbours; l += D(C(z_left)); r += D(C(z_right)); w += D(C(z)); x = w. C
 * compresses z in chunks of at most `chunk` values (0: one chunk), each on its
 * own, as Bagua compresses each bucket. On 2 ranks both neighbours are the one
 * peer, and l = r: C(z) goes to it once (Bagua's ring sends it twice) and is
 * decoded into both, the same bits. The codec is used by this state only (it may
 * be stateful). */
typedef struct bp_ring_lp bp_ring_lp;
/* The distinct neighbours a member of a ring of `size` sends C(z) to each step: 2,
 * or 1 where the left and the right neighbour are one rank (2 ranks or fewer). */
int bp_ring_lp_neighbours(int size);
bp_status bp_ring_lp_create(bp_comm *c, const float *x0, size_t n, size_t chunk, bp_codec *codec,
                            bp_ring_lp **out);
bp_status bp_ring_lp_step(bp_ring_lp *s, float *x);
/* The step in two halves, for a caller that overlaps the exchange with the next
 * step's forward and backward: bp_ring_lp_begin(s, x) is the part that needs no
 * neighbour (z, C(z), w += D(C(z)), x = w), bp_ring_lp_exchange(s, c) the rest
 * (C(z) to both neighbours, l and r updated), on c, the ring's group or a
 * duplicate of it that another thread uses; every begin is followed by one
 * exchange before the next begin or any look at the replicas. Together they give
 * bp_ring_lp_step's bits. Flat groups and host memory only (else BP_EUSAGE). */
bp_status bp_ring_lp_begin(bp_ring_lp *s, float *x);
bp_status bp_ring_lp_exchange(bp_ring_lp *s, bp_comm *c);
/* The replicas (n floats each); NULL on ranks that are not in the ring (not
 * node leaders when hierarchical). */
void bp_ring_lp_replicas(const bp_ring_lp *s, const float **w, const float **l, const float **r);
/* The same, writable: for a checkpoint to save them and a resume to restore them. */
void bp_ring_lp_state(bp_ring_lp *s, float **w, float **l, float **r);
void bp_ring_lp_destroy(bp_ring_lp *s);

/* C_FP_A: a background thread that every interval_ms takes a snapshot s = x,
 * averages it over the group (a = allreduce(s) / size) and, holding the lock,
 * adds a - s to x, which keeps the local progress made meanwhile. Collective over
 * c (it dups c for its own traffic; the counters are charged to c). Whoever
 * changes x while it runs holds bp_async_avg_lock. A rank that calls
 * bp_async_avg_stop has its thread ask, in its next round, for all threads to
 * end; every rank's thread then ends after that same round, so ranks that go on
 * see bp_async_avg_running become false. */
typedef struct bp_async_avg bp_async_avg;
bp_status bp_async_avg_start(bp_comm *c, float *x, size_t n, int interval_ms, bp_async_avg **out);
void bp_async_avg_lock(bp_async_avg *a);
void bp_async_avg_unlock(bp_async_avg *a);
bool bp_async_avg_running(bp_async_avg *a);
/* Rounds completed so far (the same on every rank once all threads ended). */
uint64_t bp_async_avg_rounds(bp_async_avg *a);
/* Asks the thread to stop, waits for this rank's thread to end and returns its status. */
bp_status bp_async_avg_stop(bp_async_avg *a);
/* Stops if needed and frees (collective, since it frees the dup'd group). */
void bp_async_avg_destroy(bp_async_avg *a);

/* --- counters -------------------------------------------------------------------- */

typedef enum bp_op {
    BP_OP_SEND,
    BP_OP_RECV,
    BP_OP_BARRIER,
    BP_OP_BCAST,
    BP_OP_REDUCE_SCATTER,
    BP_OP_ALLGATHER,
    BP_OP_ALLTOALL,
    BP_OP_ALLREDUCE,    /* C_FP_S (and allreduce_sum) */
    BP_OP_ALLREDUCE_LP, /* C_LP_S */
    BP_OP_PEER_AVG,     /* D_FP_S */
    BP_OP_RING_LP,      /* D_LP_S */
    BP_OP_ASYNC_AVG,    /* C_FP_A */
    BP_OP_POWERSGD,
    BP_OP_COUNT
} bp_op;

/* Traffic of this rank. Messages and bytes count what our own path sends and
 * receives (including hierarchical steps); for MPI's collectives, which hide
 * their messages, one message per call and the payload this rank contributes
 * and gets back. Blocked time is time spent waiting for communication. */
typedef struct bp_op_stats {
    uint64_t calls;
    uint64_t messages; /* sent */
    uint64_t bytes_sent;
    uint64_t bytes_recv;
    double blocked_s;
} bp_op_stats;

typedef struct bp_stats {
    bp_op_stats op[BP_OP_COUNT];
    bp_op_stats total;
} bp_stats;

/* Copy c's counters into *out; with reset, set them to zero. */
bp_status bp_comm_stats(bp_comm *c, bp_stats *out, bool reset);

/* A short name, e.g. "allreduce (C_FP_S)". */
const char *bp_op_name(bp_op op);

#ifdef __cplusplus
}
#endif
#endif
