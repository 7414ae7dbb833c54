/* The inside of the communication library, shared by the files of src/comm.
 *
 * Every public call runs as one operation (op_ctx): bpc_op_begin registers it with the
 * watchdog and starts its counters, the work below charges messages, bytes and
 * blocked time to it, and bpc_op_end adds them to the group's counters once and
 * turns a failure into the group's error line (rank, group, operation, cause).
 * Internal functions take the op and the group whose MPI communicator carries the
 * traffic, which may differ from the op's group (node-local and leader groups of a
 * hierarchical primitive, the dup'd group of the async thread): traffic is always
 * charged to the group the user called. Internal functions never call public ones,
 * so nothing is counted or watched twice. Functions shared between the files
 * of src/comm are named bpc_ so that they meet no other layer's names. */
#ifndef BP_COMM_INTERNAL_H
#define BP_COMM_INTERNAL_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bagpipe/comm.h"
#include "core/trace.h"

#define BP_GROUP_NAME_MAX 64

/* Tags of our own collectives: above the user's range on the same communicator. */
enum {
    TAG_BARRIER = BP_TAG_MAX + 1,
    TAG_BCAST,
    TAG_REDUCE,
    TAG_REDUCE_SCATTER,
    TAG_ALLGATHER,
    TAG_ALLTOALL,
    TAG_PEER,
    TAG_TO_LEFT,  /* ring_lp: a message to the sender's left neighbour */
    TAG_TO_RIGHT, /* ... and to its right neighbour */
};

typedef struct op_ctx {
    bp_comm *c;       /* the group called: charged and named in messages */
    bp_op kind;       /* counters to charge; BP_OP_COUNT for group management */
    const char *name; /* operation name in messages */
    size_t n;         /* floats, for messages */
    bp_op_stats acc;  /* added to c's counters by bpc_op_end */
    bp_err err;
    double deadline; /* watchdog; 0 when not watched */
    /* MPI_COMM_WORLD rank whose message this operation waits for (-1: none), so the
     * watchdog can name the rank that is gone or stuck. Read by the watchdog thread. */
    atomic_int waiting_for;
    struct op_ctx *prev, *next;
    /* tracing (c->trace set): start time, the event's name when it differs from
     * `name` (NULL: none; "" records no event), the peer of point-to-point */
    double t0;
    const char *trace_name;
    int peer;
} op_ctx;

/* State shared by all groups that come from one bp_comm_init or bp_comm_wrap. */
typedef struct bp_world {
    /* Point-to-point requests posted (bp_isend, bp_irecv) and not yet waited for,
     * by every thread: bp_comm_progress has work only while there are any. */
    atomic_int requests;
    pthread_mutex_t mu; /* guards everything below */
    int refs;           /* groups alive */
    bool owns_mpi;      /* bp_comm_init started MPI */
    /* network emulation */
    bp_net net;
    double *link_free; /* by MPI_COMM_WORLD rank of the receiver: when our link is idle */
    int procs;
    /* watchdog */
    double timeout;
    op_ctx *ops; /* operations in flight, while timeout > 0 */
    bool watching, stop_watching;
    pthread_t watcher;
    pthread_cond_t wake;
} bp_world;

/* A host block that stages device buffers (memory.c): n floats at p. */
typedef struct bpc_block {
    float *p;
    size_t n;
} bpc_block;

/* Free blocks a group keeps for its next stagings; more are freed when returned. */
#define BPC_POOL_KEEP 8

struct bp_comm {
    MPI_Comm mpi;    /* our messages, the user's (tags apart) and MPI's collectives */
    MPI_Comm stamps; /* emulation: the arrival time of each message, same tag */
    int rank, size;
    int *proc; /* MPI_COMM_WORLD rank of each member: the emulated links */
    char name[BP_GROUP_NAME_MAX];
    bp_path path;
    double poll_s; /* bp_comm_set_poll: 0 = MPI_Waitall */
    bp_world *world;
    /* hierarchy (bp_comm_set_hierarchical) */
    bool hier;
    int node_size;
    int nodes;        /* number of nodes, known on every rank */
    bp_comm *local;   /* ranks of this node */
    bp_comm *leaders; /* first rank of every node; NULL on the others */
    /* one growable scratch buffer, for one internal function at a time */
    void *scratch;
    size_t scratch_bytes;
    pthread_mutex_t mu; /* guards stats and err */
    bp_stats stats;
    bp_err err;
    bp_trace *trace;          /* bp_comm_set_trace; NULL: off */
    bp_comm_memory mem;       /* bp_comm_set_memory; owns == NULL: host memory only */
    const char *trace_group;  /* the name, owned by the trace */
    /* Free staging blocks of this group (memory.c), reused because pinned memory is
     * slow to allocate. Several stagings may be live at once, from several threads,
     * so the pool has a lock of its own (not mu: it is held only over the list,
     * never around another lock or a callback, so no order between locks arises). */
    pthread_mutex_t pool_mu;
    bpc_block pool[BPC_POOL_KEEP];
    int pool_count;
};

/* --- device memory (memory.c) ------------------------------------------------------ */

/* A device buffer seen as host memory for one operation. */
typedef struct bpc_staged {
    float *dev;      /* the caller's buffer; NULL: nothing staged */
    size_t n;
    bpc_block block; /* its host copy in the first n floats; back to c's pool after */
} bpc_staged;
/* When *x is device memory of c, replaces *x by a host copy of its n floats (a block
 * of c's pool, or a new one), filled from the device when `in` is set; s records
 * what bpc_unstage undoes. Several may be live at once, from several threads. */
bp_status bpc_stage(bp_comm *c, float **x, size_t n, bool in, bpc_staged *s);
/* Writes the staged copy back to the device when `out` is set and rc is BP_OK, gives
 * the block back to c's pool and returns rc, so that an operation can end with
 * `return bpc_unstage(...)`. */
bp_status bpc_unstage(bp_comm *c, bpc_staged *s, bool out, bp_status rc);
/* The pool of a new group, and its end: every free block goes back through c's
 * host_free (bpc_pool_drain also at bp_comm_set_memory, before the callbacks change). */
void bpc_pool_init(bp_comm *c);
void bpc_pool_drain(bp_comm *c);
void bpc_pool_destroy(bp_comm *c);
/* Whether x is device memory of c. */
bool bpc_on_device(const bp_comm *c, const void *x);

/* --- operations (ops.c) ---------------------------------------------------------- */

void bpc_op_begin(op_ctx *op, bp_comm *c, bp_op kind, size_t n);
/* A management operation (split, dup...): watched and named, not counted. */
void bpc_op_begin_named(op_ctx *op, bp_comm *c, const char *name);
bp_status bpc_op_end(op_ctx *op, bp_status rc);
bp_status bpc_op_fail(op_ctx *op, bp_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* BP_ECOMM in err with MPI's text for error code mpi_rc of `call`. */
bp_status bpc_mpi_error(int mpi_rc, const char *call, bp_err *err);
/* bpc_mpi_error into the op's error. */
bp_status bpc_op_mpi_fail(op_ctx *op, int mpi_rc, const char *call);
/* Charge one call of an MPI collective that ran from t0 until now. */
void bpc_op_mpi_done(op_ctx *op, double t0, size_t sent, size_t recv);
/* Store err as c's last error (for calls that are not operations); returns rc. */
bp_status bpc_comm_record(bp_comm *c, bp_status rc, const bp_err *err);
/* A buffer of at least `bytes` owned by g, valid until the next scratch call on g. */
bp_status bpc_op_scratch(op_ctx *op, bp_comm *g, size_t bytes, void **out);

/* --- timed waits (wait.c) ---------------------------------------------------------- */

void bpc_cond_init_monotonic(pthread_cond_t *cv);
/* Wait on cv (mu held) until signalled or until the monotonic time `until`;
 * false when the time ran out. */
bool bpc_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double until);

/* --- watchdog (watchdog.c) ------------------------------------------------------- */

void bpc_watch_add(bp_world *w, op_ctx *op);
void bpc_watch_remove(bp_world *w, op_ctx *op);
bp_status bpc_watch_set_timeout(bp_world *w, double seconds, bp_err *err);
void bpc_watch_stop(bp_world *w);

/* --- transport with emulation (transport.c) -------------------------------------- */

/* The small message that travels beside a message, on the group's stamp
 * communicator with the same tag: beside every message of a collective (so that the
 * receiver learns what the sender called before it posts a receive: Open MPI writes
 * a longer message past a shorter receive buffer instead of truncating it), and,
 * with emulation on, beside every message. A collective's message of at most
 * TX_INLINE_MAX bytes travels inside its stamp message instead, after the stamp:
 * one message, as cheap as the data alone where latency is what counts. */
typedef struct tx_stamp {
    double arrive;   /* emulation: when the message arrives on the emulated link; else 0 */
    uint64_t n;      /* the sender's operation: its count (op_ctx.n) */
    uint64_t bytes;  /* ... and this message's size */
    int32_t kind;    /* ... and its kind (bp_op) */
    int32_t inlined; /* the message follows the stamp in the same MPI message */
} tx_stamp;

enum { TX_INLINE_MAX = 4096 };

typedef struct tx_req {
    MPI_Request req[2]; /* data, stamp (with an inline message) */
    int proc;           /* MPI_COMM_WORLD rank of the peer */
    tx_stamp stamp;     /* sent, or received */
    double sent;        /* sender: when the emulated link has serialized it */
    size_t bytes;
    bool recv;
    /* A receive of a collective: its data is posted once the stamp has come and
     * agrees (bpc_tx_wait). */
    bool deferred;
    void *buf;
    bp_comm *g;
    int peer, tag;
    /* A collective's stamp message with room for an inline message (malloc'd;
     * freed by bpc_tx_wait once complete). */
    unsigned char *box;
} tx_req;

bp_status bpc_tx_isend(op_ctx *op, bp_comm *g, const void *buf, size_t bytes, int peer, int tag,
                       tx_req *r);
bp_status bpc_tx_irecv(op_ctx *op, bp_comm *g, void *buf, size_t bytes, int peer, int tag,
                       tx_req *r);
/* Complete k requests, then wait for the emulated link times. Receives of a
 * collective are matched only here, after their stamps: a batch posts its sends
 * before it waits, and receives from one peer with one tag are waited for in the
 * order they were posted. A stamp that disagrees with the receiver's operation
 * (kind, count or message size) fails the operation with a line naming both. */
bp_status bpc_tx_wait(op_ctx *op, tx_req *r, int k);
/* MPI_Waitall of req[0..n), testing and sleeping g's poll interval between tests
 * when it has one (bp_comm_set_poll), so that a waiting rank leaves its core to
 * others; an MPI return code. */
int bpc_mpi_wait(const bp_comm *g, int n, MPI_Request *req);
bp_status bpc_tx_sendrecv(op_ctx *op, bp_comm *g, const void *sbuf, size_t sbytes, int dst,
                          void *rbuf, size_t rbytes, int src, int tag);
/* Whether our own algorithms must run (emulation on, or the own path chosen). */
bool bpc_tx_own_path(const bp_comm *g);
bool bpc_net_on(bp_world *w);
/* The next free time and arrival of `bytes` on our link to MPI_COMM_WORLD rank
 * `proc`; false when emulation is off. */
bool bpc_net_reserve(bp_world *w, int proc, size_t bytes, double *sent, double *arrive);
/* When a received message of `bytes` from `proc`, stamped `arrive`, is complete
 * once the rendezvous (eager=) is accounted for. */
double bpc_net_rendezvous(bp_world *w, int proc, size_t bytes, double arrive);

/* --- collectives (coll.c) ---------------------------------------------------------- */

/* Blocks of a buffer for allgather and all-to-all, in bytes: explicit arrays, or
 * (off == NULL) the bp_chunk split of `total` elements of `elem` bytes. */
typedef struct blocks {
    const size_t *off, *len;
    size_t total, elem;
} blocks;

bp_status bpc_x_barrier(op_ctx *op, bp_comm *g);
bp_status bpc_x_bcast(op_ctx *op, bp_comm *g, void *buf, size_t bytes, int root);
/* Sum to root; x on other ranks is scratch afterwards. Uses g's scratch. */
bp_status bpc_x_reduce_sum(op_ctx *op, bp_comm *g, float *x, size_t n, int root);
/* Uses g's scratch. */
bp_status bpc_x_reduce_scatter(op_ctx *op, bp_comm *g, float *x, size_t n);
bp_status bpc_x_allgather(op_ctx *op, bp_comm *g, void *base, const blocks *b);
bp_status bpc_x_alltoall(op_ctx *op, bp_comm *g, const void *send, const blocks *sb, void *recv,
                         const blocks *rb);

/* --- primitives (prim.c) ------------------------------------------------------------ */

/* A primitive among a flat group g (the group itself, or the node leaders). */
typedef bp_status (*prim_fn)(op_ctx *op, bp_comm *g, float *x, size_t n, void *arg);

/* What a node leader holds before the step among leaders: the node's sum, its
 * mean, or its sum times leaders / ranks (so that an average over the leaders is
 * the average over all ranks). */
typedef enum node_scale { NODE_SUM, NODE_MEAN, NODE_SHARE } node_scale;

/* fn on c, or hierarchically when c is (reduce to leaders, fn among them, broadcast). */
bp_status bpc_run_prim(op_ctx *op, bp_comm *c, float *x, size_t n, node_scale scale, prim_fn fn,
                       void *arg);
/* A whole public operation: bpc_op_begin, bpc_run_prim, bpc_op_end. */
bp_status bpc_run_op(bp_comm *c, bp_op kind, float *x, size_t n, node_scale scale, prim_fn fn,
                     void *arg);
bp_status bpc_flat_allreduce_sum(op_ctx *op, bp_comm *g, float *x, size_t n, void *arg);
bp_status bpc_flat_allreduce_avg(op_ctx *op, bp_comm *g, float *x, size_t n, void *arg);

/* --- vector helpers (vec.c) ---------------------------------------------------------- */

void bpc_vec_add(float *restrict y, const float *restrict x, size_t n);
/* y *= s. Averages multiply by 1/p rather than divide by p: a division costs
 * several times a product, enough to show in an allreduce of a megabyte, and
 * the result differs by at most an ulp (none when p is a power of 2). */
void bpc_vec_scale(float *y, float s, size_t n);
/* D_LP_S's z = x + l/3 + r/3 - 5w/3, term by term as written (the same bits as
 * the scalar loop), in blocks that the compiler vectorizes. */
void bpc_vec_ring_z(float *restrict z, const float *restrict x, const float *restrict l,
                    const float *restrict r, const float *restrict w, size_t n);

#endif
