/* Groups: creation from MPI communicators, split, dup, node groups, hierarchy,
 * options and teardown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bagpipe/comm_mpi.h"
#include "comm/internal.h"
#include "core/buf.h"

static bp_status world_new(bool owns_mpi, bp_world **out, bp_err *err) {
    bp_world *w = calloc(1, sizeof *w);
    int procs = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &procs);
    if (w) w->link_free = calloc((size_t)procs, sizeof *w->link_free);
    if (!w || !w->link_free) {
        free(w);
        return bp_fail(err, BP_ENOMEM, "cannot allocate the shared communication state");
    }
    w->procs = procs;
    w->owns_mpi = owns_mpi;
    pthread_mutex_init(&w->mu, NULL);
    bpc_cond_init_monotonic(&w->wake);
    *out = w;
    return BP_OK;
}

static void world_destroy(bp_world *w) {
    bpc_watch_stop(w);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->mu);
    free(w->link_free);
    free(w);
}

/* The world lives as long as one of its groups. */
static void world_release(bp_world *w) {
    pthread_mutex_lock(&w->mu);
    bool last = --w->refs == 0;
    pthread_mutex_unlock(&w->mu);
    if (last) world_destroy(w);
}

/* MPI_COMM_WORLD ranks of the members of mpi, for the emulated links. */
static bp_status proc_table(MPI_Comm mpi, int size, int **out, bp_err *err) {
    int *tab = malloc(2 * (size_t)size * sizeof *tab);
    if (!tab) return bp_fail(err, BP_ENOMEM, "cannot allocate a rank table of %d", size);
    MPI_Group mine, world;
    MPI_Comm_group(mpi, &mine);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    for (int i = 0; i < size; i++) tab[size + i] = i;
    int rc = MPI_Group_translate_ranks(mine, size, tab + size, world, tab);
    MPI_Group_free(&mine);
    MPI_Group_free(&world);
    *out = tab;
    return rc == MPI_SUCCESS ? BP_OK : bpc_mpi_error(rc, "MPI_Group_translate_ranks", err);
}

/* A group that takes ownership of mpi (already a communicator of its own). */
static bp_status group_new(MPI_Comm mpi, const char *name, bp_world *w, bp_comm **out,
                           bp_err *err) {
    bp_comm *c = calloc(1, sizeof *c);
    if (!c) {
        MPI_Comm_free(&mpi);
        return bp_fail(err, BP_ENOMEM, "cannot allocate group '%s'", name);
    }
    c->mpi = mpi;
    c->stamps = MPI_COMM_NULL;
    c->world = w;
    c->nodes = 1;
    snprintf(c->name, sizeof c->name, "%s", name);
    pthread_mutex_init(&c->mu, NULL);
    bpc_pool_init(c);
    pthread_mutex_lock(&w->mu);
    w->refs++;
    pthread_mutex_unlock(&w->mu);
    *out = c;
    MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN);
    MPI_Comm_rank(mpi, &c->rank);
    MPI_Comm_size(mpi, &c->size);
    int rc = MPI_Comm_dup(mpi, &c->stamps);
    if (rc != MPI_SUCCESS) return bpc_mpi_error(rc, "MPI_Comm_dup", err);
    return proc_table(mpi, c->size, &c->proc, err);
}

static void hier_free(bp_comm *c) {
    bp_comm_destroy(c->local);
    bp_comm_destroy(c->leaders);
    c->local = c->leaders = NULL;
    c->hier = false;
    c->nodes = 1;
}

bp_status bp_comm_destroy(bp_comm *c) {
    if (!c) return BP_OK;
    hier_free(c);
    if (c->stamps != MPI_COMM_NULL) MPI_Comm_free(&c->stamps);
    MPI_Comm_free(&c->mpi);
    bp_world *w = c->world;
    free(c->proc);
    bp_free(c->scratch);
    bpc_pool_destroy(c);
    pthread_mutex_destroy(&c->mu);
    free(c);
    world_release(w);
    return BP_OK;
}

static bp_status wrap(MPI_Comm mpi, const char *name, bool owns_mpi, bp_comm **out, bp_err *err) {
    *out = NULL;
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level != MPI_THREAD_MULTIPLE)
        return bp_fail(err, BP_ECOMM,
                       "MPI runs at thread level %d; bagpipe needs MPI_THREAD_MULTIPLE", level);
    MPI_Comm dup;
    int rc = MPI_Comm_dup(mpi, &dup);
    if (rc != MPI_SUCCESS) return bpc_mpi_error(rc, "MPI_Comm_dup", err);
    bp_world *w = NULL;
    rc = world_new(owns_mpi, &w, err);
    if (rc != BP_OK) {
        MPI_Comm_free(&dup);
        return rc;
    }
    rc = group_new(dup, name, w, out, err);
    if (rc != BP_OK && *out) {
        bp_comm_destroy(*out); /* and the world with it */
        *out = NULL;
    } else if (rc != BP_OK) {
        world_destroy(w);
    }
    return rc;
}

bp_status bp_comm_wrap(MPI_Comm mpi, const char *name, bp_comm **out, bp_err *err) {
    return wrap(mpi, name ? name : "world", false, out, err);
}

MPI_Comm bp_comm_mpi(const bp_comm *c) { return c->mpi; }

int bp_comm_mpi_wait(const bp_comm *c, int n, MPI_Request *req) { return bpc_mpi_wait(c, n, req); }

bp_status bp_comm_init(int *argc, char ***argv, bp_comm **world, bp_err *err) {
    *world = NULL;
    int started = 0, provided = MPI_THREAD_SINGLE;
    MPI_Initialized(&started);
    if (!started) {
        int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) return bpc_mpi_error(rc, "MPI_Init_thread", err);
    }
    int rc = wrap(MPI_COMM_WORLD, "world", !started, world, err);
    if (rc != BP_OK && !started) MPI_Finalize();
    return rc;
}

bp_status bp_comm_finalize(bp_comm *world) {
    if (!world) return BP_OK;
    bp_world *w = world->world;
    pthread_mutex_lock(&w->mu);
    int others = w->refs - 1 - (world->local != NULL) - (world->leaders != NULL);
    pthread_mutex_unlock(&w->mu);
    if (others > 0) {
        bp_err err;
        bp_fail(&err, BP_EUSAGE,
                "finalize: %d groups of this world are still open; free them first", others);
        return bpc_comm_record(world, BP_EUSAGE, &err);
    }
    bool owns = w->owns_mpi;
    bp_comm_destroy(world);
    return owns && MPI_Finalize() != MPI_SUCCESS ? BP_ECOMM : BP_OK;
}

/* Wrap the communicator that an MPI call made for c (or report its failure). */
static bp_status derive(bp_comm *c, const char *call, MPI_Comm made, int mpi_rc, const char *name,
                        bp_comm **out) {
    *out = NULL;
    bp_err err;
    if (mpi_rc != MPI_SUCCESS) return bpc_comm_record(c, bpc_mpi_error(mpi_rc, call, &err), &err);
    if (made == MPI_COMM_NULL) return BP_OK;
    bp_status rc = group_new(made, name, c->world, out, &err);
    if (rc == BP_OK) {
        (*out)->path = c->path;
        (*out)->poll_s = c->poll_s;
        (*out)->mem = c->mem; /* the callbacks; its staging pool is its own */
        return BP_OK;
    }
    bp_comm_destroy(*out);
    *out = NULL;
    return bpc_comm_record(c, rc, &err);
}

typedef enum how { BY_COLOR, BY_SHARED_MEMORY, DUP } how;

/* A new group from c, the MPI call run as a watched operation (it is collective
 * and hangs if a rank does not join). A negative color joins no group. */
static bp_status make(bp_comm *c, how h, int color, int key, const char *name, bp_comm **out) {
    static const char *calls[] = {"MPI_Comm_split", "MPI_Comm_split_type", "MPI_Comm_dup"};
    op_ctx op;
    bpc_op_begin_named(&op, c, calls[h]);
    MPI_Comm made = MPI_COMM_NULL;
    int rc = h == BY_COLOR ? MPI_Comm_split(c->mpi, color < 0 ? MPI_UNDEFINED : color, key, &made)
             : h == BY_SHARED_MEMORY
                 ? MPI_Comm_split_type(c->mpi, MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, &made)
                 : MPI_Comm_dup(c->mpi, &made);
    bpc_op_end(&op, BP_OK);
    return derive(c, calls[h], made, rc, name, out);
}

bp_status bp_comm_split(bp_comm *c, int color, int key, const char *name, bp_comm **out) {
    char fallback[BP_GROUP_NAME_MAX + 16];
    snprintf(fallback, sizeof fallback, "%s/%d", c->name, color);
    return make(c, BY_COLOR, color, key, name ? name : fallback, out);
}

bp_status bp_comm_split_node(bp_comm *c, int node_size, bp_comm **local, bp_comm **leaders) {
    char name[BP_GROUP_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s/local", c->name);
    *leaders = NULL;
    bp_status rc = node_size > 0 ? make(c, BY_COLOR, c->rank / node_size, c->rank, name, local)
                                 : make(c, BY_SHARED_MEMORY, 0, c->rank, name, local);
    if (rc != BP_OK) return rc;
    snprintf(name, sizeof name, "%s/leaders", c->name);
    rc = make(c, BY_COLOR, (*local)->rank == 0 ? 0 : -1, c->rank, name, leaders);
    if (rc != BP_OK) {
        bp_comm_destroy(*local);
        *local = NULL;
    }
    return rc;
}

bp_status bp_comm_set_hierarchical(bp_comm *c, bool on, int node_size) {
    hier_free(c);
    if (!on) return BP_OK;
    int rc = bp_comm_split_node(c, node_size, &c->local, &c->leaders);
    if (rc != BP_OK) return rc;
    /* Every rank learns the number of nodes, so that checks on it (shift_one needs
     * an even number) fail on all ranks alike, before any message. */
    int nodes = c->leaders ? c->leaders->size : 0;
    MPI_Request r;
    rc = MPI_Ibcast(&nodes, 1, MPI_INT, 0, c->local->mpi, &r);
    if (rc == MPI_SUCCESS) rc = bpc_mpi_wait(c->local, 1, &r);
    if (rc != MPI_SUCCESS) {
        bp_err err;
        hier_free(c);
        return bpc_comm_record(c, bpc_mpi_error(rc, "MPI_Bcast", &err), &err);
    }
    c->hier = true;
    c->node_size = node_size;
    c->nodes = nodes;
    return BP_OK;
}

bp_status bp_comm_dup(bp_comm *c, const char *name, bp_comm **out) {
    bp_status rc = make(c, DUP, 0, 0, name ? name : c->name, out);
    if (rc == BP_OK && c->hier) rc = bp_comm_set_hierarchical(*out, true, c->node_size);
    if (rc != BP_OK) {
        bp_comm_destroy(*out);
        *out = NULL;
    }
    return rc;
}

bp_status bp_comm_abort(bp_comm *c, int code) {
    int rc = MPI_Abort(c->mpi, code);
    bp_err err;
    return bpc_comm_record(c, bpc_mpi_error(rc, "MPI_Abort", &err), &err);
}

int bp_comm_rank(const bp_comm *c) { return c->rank; }
int bp_comm_size(const bp_comm *c) { return c->size; }
const char *bp_comm_name(const bp_comm *c) { return c->name; }

bp_status bp_comm_set_path(bp_comm *c, bp_path path) {
    if (path != BP_PATH_OWN && path != BP_PATH_MPI) {
        bp_err err;
        bp_fail(&err, BP_EUSAGE, "unknown path %d", (int)path);
        return bpc_comm_record(c, BP_EUSAGE, &err);
    }
    c->path = path;
    if (c->local) c->local->path = path;
    if (c->leaders) c->leaders->path = path;
    return BP_OK;
}

bp_status bp_comm_set_poll(bp_comm *c, double seconds) {
    if (!(seconds >= 0 && seconds <= 1)) {
        bp_err err;
        bp_fail(&err, BP_EUSAGE, "poll interval %g s: expected 0 to 1 s", seconds);
        return bpc_comm_record(c, BP_EUSAGE, &err);
    }
    c->poll_s = seconds;
    return BP_OK;
}

bp_status bp_comm_set_trace(bp_comm *c, bp_trace *trace) {
    c->trace = trace;
    c->trace_group = trace ? bp_trace_intern(trace, c->name) : NULL;
    return BP_OK;
}

bp_trace *bp_comm_trace(const bp_comm *c) { return c->trace; }

bp_status bp_comm_set_timeout(bp_comm *c, double seconds) {
    bp_err err;
    bp_status rc = bpc_watch_set_timeout(c->world, seconds, &err);
    return rc == BP_OK ? rc : bpc_comm_record(c, rc, &err);
}
