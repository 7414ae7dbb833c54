/* bagpipe._C.Worker: a communication thread with its own group (a dup of the world)
 * that runs submitted jobs strictly in the order they came, the same on every
 * rank, and calls each job's `done` from that thread, with the GIL, once the job
 * ran: done(None), or done(message) with the group's one-line error. DDP's hooks
 * submit a bucket and return a future that `done` completes, so backward goes on
 * while the bucket travels. A job keeps its buffer (and so the tensor under it)
 * alive until done has been called.
 *
 * A ring exchange (lp-decentralized) has no `done`: its completion is counted under
 * the worker's lock and settle() waits for it with the GIL released, so that the
 * thread never takes the GIL (taking it would cost the training thread, which holds
 * it through forward and backward, up to a switch interval of 5 ms per step). Its
 * job waits on the `ran` list until settle() or stop() frees it with the GIL. */
#include <pthread.h>
#include <stdlib.h>

#include "bpy.h"

typedef enum job_kind {
    JOB_ALLREDUCE,
    JOB_BYTEGRAD,
    JOB_POWERSGD,
    JOB_PEER_AVG,
    JOB_RING
} job_kind;

typedef struct job {
    struct job *next;
    job_kind kind;
    Py_buffer buf;
    PyObject *done;
    /* powersgd: `count` parts of buf, part i at off[i] of len[i] floats, compressed
     * by codecs[i] (NULL: averaged in full); `keep` holds the codec objects */
    int count;
    size_t *off, *len;
    bp_codec **codecs;
    float **x;
    PyObject *keep;
    bool orth_q;
    /* peer_avg */
    bp_peers peers;
    uint64_t round;
    bp_ring_lp *ring; /* ring_exchange; `keep` holds its Ring; no `done` */
} job;

typedef struct bpy_worker {
    PyObject_HEAD
    bp_comm *comm;
    bp_codec *minmax;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *head, *tail;
    bool started, quit;
    pthread_cond_t settled;        /* signalled when a job without done has run */
    unsigned long long owed, paid; /* jobs without done submitted, run */
    job *ran;                      /* those run, for settle() to free with the GIL */
    bp_err failed;                 /* the first of their errors (code 0: none) */
    struct bpy_worker *next_live; /* the workers alive, for bpy_workers_stop */
} bpy_worker;

static bpy_worker *live;

static void job_free(job *j) {
    PyBuffer_Release(&j->buf);
    Py_XDECREF(j->done);
    Py_XDECREF(j->keep);
    free(j->off);
    free(j);
}

static int run_powersgd(bpy_worker *w, job *j, bp_err *err) {
    for (int i = 0; i < j->count; i++) {
        j->x[i] = bpy_data(&j->buf) + j->off[i];
        if (j->orth_q && j->codecs[i] && bp_powersgd_compresses(j->codecs[i])) {
            int rc = bp_powersgd_orthogonalize_q(j->codecs[i], err);
            if (rc) return rc;
        }
    }
    int rc = bp_allreduce_avg_powersgd_batch(w->comm, j->count, j->x, j->len, j->codecs);
    return bp_comm_fail(w->comm, rc, err);
}

static int run_job(bpy_worker *w, job *j, bp_err *err) {
    float *x = bpy_data(&j->buf);
    size_t n = bpy_count(&j->buf);
    switch (j->kind) {
    case JOB_ALLREDUCE: return bp_comm_fail(w->comm, bp_allreduce_avg(w->comm, x, n), err);
    case JOB_BYTEGRAD:
        return bp_comm_fail(w->comm, bp_allreduce_avg_lp(w->comm, x, n, w->minmax), err);
    case JOB_PEER_AVG:
        return bp_comm_fail(w->comm, bp_peer_avg(w->comm, x, n, j->peers, j->round), err);
    case JOB_POWERSGD: return run_powersgd(w, j, err);
    case JOB_RING: return bp_comm_fail(w->comm, bp_ring_lp_exchange(j->ring, w->comm), err);
    }
    return bp_fail(err, BP_EINTERNAL, "unknown job kind %d", (int)j->kind);
}

static void call_done(job *j, int rc, const bp_err *err) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *arg = rc ? PyUnicode_FromString(err->msg) : Py_NewRef(Py_None);
    PyObject *r = arg ? PyObject_CallOneArg(j->done, arg) : NULL;
    if (!r) PyErr_WriteUnraisable(j->done);
    Py_XDECREF(r);
    Py_XDECREF(arg);
    job_free(j);
    PyGILState_Release(g);
}

static void *worker_main(void *arg) {
    bpy_worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->head && !w->quit) pthread_cond_wait(&w->cv, &w->mu);
        job *j = w->head;
        if (j) {
            w->head = j->next;
            if (!w->head) w->tail = NULL;
        }
        pthread_mutex_unlock(&w->mu);
        if (!j) break; /* quit, and every job ran */
        bp_err err = {0};
        int rc = run_job(w, j, &err);
        if (j->done) {
            call_done(j, rc, &err);
            continue;
        }
        pthread_mutex_lock(&w->mu);
        if (rc && !w->failed.code) w->failed = err, w->failed.code = rc;
        j->next = w->ran, w->ran = j;
        w->paid++;
        pthread_cond_broadcast(&w->settled);
        pthread_mutex_unlock(&w->mu);
    }
    return NULL;
}

static void stop(bpy_worker *w) {
    if (w->started) {
        pthread_mutex_lock(&w->mu);
        w->quit = true;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
        /* The thread may be waiting for the GIL to call a job's done. */
        Py_BEGIN_ALLOW_THREADS
        pthread_join(w->thread, NULL);
        Py_END_ALLOW_THREADS
        w->started = false;
    }
    for (job *j = w->ran, *next; j; j = next) next = j->next, job_free(j);
    w->ran = NULL;
    if (w->comm) {
        bp_comm_destroy(w->comm);
        w->comm = NULL;
        bpy_groups--;
    }
    for (bpy_worker **p = &live; *p; p = &(*p)->next_live)
        if (*p == w) {
            *p = w->next_live;
            break;
        }
}

void bpy_workers_stop(void) {
    while (live) stop(live);
}

static int worker_init(PyObject *self, PyObject *args, PyObject *kw) {
    bpy_worker *w = (bpy_worker *)self;
    static char *names[] = {"name", "poll", NULL};
    const char *name = "bagpipe-comm";
    double poll = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|sd", names, &name, &poll)) return -1;
    if (w->comm) {
        bpy_raise("Worker: already initialized");
        return -1;
    }
    bp_comm *world = bpy_world();
    if (!world) return -1;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bp_comm_dup(world, name, &w->comm);
    Py_END_ALLOW_THREADS
    if (rc) {
        bpy_raise_comm(world, rc);
        return -1;
    }
    bpy_groups++;
    w->next_live = live, live = w;
    bp_err err = {0};
    if (poll > 0 && (rc = bp_comm_set_poll(w->comm, poll))) {
        bpy_raise_comm(w->comm, rc);
        return -1;
    }
    if (bp_codec_minmax_u8_create(&w->minmax, &err)) {
        bpy_raise(err.msg);
        return -1;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    pthread_cond_init(&w->settled, NULL);
    if (pthread_create(&w->thread, NULL, worker_main, w)) {
        bpy_raise("Worker: cannot start the communication thread");
        return -1;
    }
    w->started = true;
    return 0;
}

static void worker_dealloc(PyObject *self) {
    bpy_worker *w = (bpy_worker *)self;
    stop(w);
    bp_codec_destroy(w->minmax);
    Py_TYPE(self)->tp_free(self);
}

/* A new job of `kind` over obj's buffer, or NULL with an exception set. */
static job *job_new(bpy_worker *w, job_kind kind, PyObject *obj, PyObject *done) {
    if (!w->started) {
        bpy_raise("Worker: stopped (bagpipe.finalize ran)");
        return NULL;
    }
    if (!PyCallable_Check(done)) {
        PyErr_SetString(PyExc_TypeError, "done must be callable");
        return NULL;
    }
    job *j = calloc(1, sizeof *j);
    if (!j) return (job *)PyErr_NoMemory();
    if (bpy_floats(obj, &j->buf) < 0) {
        free(j);
        return NULL;
    }
    j->kind = kind;
    j->done = Py_NewRef(done);
    return j;
}

static PyObject *enqueue(bpy_worker *w, job *j) {
    pthread_mutex_lock(&w->mu);
    if (w->tail) w->tail->next = j;
    else w->head = j;
    w->tail = j;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    Py_RETURN_NONE;
}

static PyObject *submit_simple(PyObject *self, PyObject *args, job_kind kind) {
    PyObject *obj, *done;
    if (!PyArg_ParseTuple(args, "OO", &obj, &done)) return NULL;
    job *j = job_new((bpy_worker *)self, kind, obj, done);
    return j ? enqueue((bpy_worker *)self, j) : NULL;
}

static PyObject *py_allreduce(PyObject *self, PyObject *args) {
    return submit_simple(self, args, JOB_ALLREDUCE);
}

static PyObject *py_bytegrad(PyObject *self, PyObject *args) {
    return submit_simple(self, args, JOB_BYTEGRAD);
}

static PyObject *py_peer_avg(PyObject *self, PyObject *args) {
    PyObject *obj, *done;
    const char *peers;
    unsigned long long round;
    if (!PyArg_ParseTuple(args, "OOsK", &obj, &done, &peers, &round)) return NULL;
    bp_peers p;
    if (bpy_peers(peers, &p) < 0) return NULL;
    job *j = job_new((bpy_worker *)self, JOB_PEER_AVG, obj, done);
    if (!j) return NULL;
    j->peers = p, j->round = round;
    return enqueue((bpy_worker *)self, j);
}

/* The exchange after ring.begin(x), on this thread's group (bp_ring_lp_exchange);
 * settle() waits for it. */
static PyObject *py_ring_exchange(PyObject *self, PyObject *ring) {
    bpy_worker *w = (bpy_worker *)self;
    bp_ring_lp *r = bpy_ring_of(ring);
    if (!r) return NULL;
    if (!w->started) return bpy_raise("Worker: stopped (bagpipe.finalize ran)");
    job *j = calloc(1, sizeof *j);
    if (!j) return PyErr_NoMemory();
    j->kind = JOB_RING, j->ring = r, j->keep = Py_NewRef(ring);
    pthread_mutex_lock(&w->mu);
    w->owed++;
    pthread_mutex_unlock(&w->mu);
    return enqueue(w, j);
}

/* Wait until every ring exchange submitted has run; raise the first one's error. */
static PyObject *py_settle(PyObject *self, PyObject *args) {
    (void)args;
    bpy_worker *w = (bpy_worker *)self;
    job *ran = NULL;
    bp_err failed = {0};
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&w->mu);
    while (w->paid < w->owed && w->started) pthread_cond_wait(&w->settled, &w->mu);
    ran = w->ran, w->ran = NULL;
    failed = w->failed, w->failed.code = 0;
    pthread_mutex_unlock(&w->mu);
    Py_END_ALLOW_THREADS
    for (job *next; ran; ran = next) next = ran->next, job_free(ran);
    return failed.code ? bpy_raise(failed.msg) : Py_NewRef(Py_None);
}

/* parts: a sequence of (offset, length, codec or None) within the buffer. */
static int powersgd_parts(job *j, PyObject *parts) {
    PyObject *seq = PySequence_Fast(parts, "parts must be a sequence of (offset, length, codec)");
    if (!seq) return -1;
    j->keep = seq;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    size_t total = bpy_count(&j->buf);
    void *mem = calloc((size_t)count + 1, 2 * sizeof(size_t) + sizeof(bp_codec *) + sizeof(float *));
    if (!mem) return PyErr_NoMemory(), -1;
    j->off = mem, j->len = j->off + count + 1;
    j->codecs = (bp_codec **)(j->len + count + 1), j->x = (float **)(j->codecs + count + 1);
    j->count = (int)count;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t off, len;
        PyObject *codec;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "nnO", &off, &len, &codec)) return -1;
        if (off < 0 || len < 0 || (size_t)(off + len) > total) {
            PyErr_Format(bpy_error, "powersgd: part %zd (%zd + %zd) lies outside the %zu floats",
                         i, off, len, total);
            return -1;
        }
        j->off[i] = (size_t)off, j->len[i] = (size_t)len;
        if (codec != Py_None && !(j->codecs[i] = bpy_codec_of(codec))) return -1;
    }
    return 0;
}

static PyObject *py_powersgd(PyObject *self, PyObject *args) {
    PyObject *obj, *done, *parts;
    int orth_q = 1;
    if (!PyArg_ParseTuple(args, "OOO|p", &obj, &done, &parts, &orth_q)) return NULL;
    job *j = job_new((bpy_worker *)self, JOB_POWERSGD, obj, done);
    if (!j) return NULL;
    j->orth_q = orth_q;
    if (powersgd_parts(j, parts) < 0) {
        job_free(j);
        return NULL;
    }
    return enqueue((bpy_worker *)self, j);
}

static PyObject *py_stop(PyObject *self, PyObject *args) {
    (void)args;
    stop((bpy_worker *)self);
    Py_RETURN_NONE;
}

static PyMethodDef worker_methods[] = {
    {"allreduce", py_allreduce, METH_VARARGS, "allreduce(buf, done): average buf (C_FP_S)."},
    {"bytegrad", py_bytegrad, METH_VARARGS,
     "bytegrad(buf, done): average buf with MinMaxUInt8 traffic (C_LP_S)."},
    {"powersgd", py_powersgd, METH_VARARGS,
     "powersgd(buf, done, parts, orth_q=True): PowerSGD's average of the parts of buf."},
    {"peer_avg", py_peer_avg, METH_VARARGS,
     "peer_avg(buf, done, peers, round): average with this round's peers (D_FP_S)."},
    {"ring_exchange", py_ring_exchange, METH_O,
     "ring_exchange(ring): the exchange after ring.begin(x) (D_LP_S); settle() waits for it."},
    {"settle", py_settle, METH_NOARGS,
     "Wait for the ring exchanges submitted; raise the first one's error."},
    {"stop", py_stop, METH_NOARGS, "Run what was submitted, end the thread, free the group."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject bpy_worker_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bagpipe._C.Worker",
    .tp_basicsize = sizeof(bpy_worker),
    .tp_dealloc = worker_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Worker(name='bagpipe-comm', poll=0): a communication thread with its own group.",
    .tp_methods = worker_methods,
    .tp_init = worker_init,
    .tp_new = PyType_GenericNew,
};
