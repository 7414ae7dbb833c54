/* Blocking operations of the world group on float32 buffers, for the weight
 * algorithms (which communicate between steps) and for tests. Each releases the
 * GIL while it communicates. */
#include "bpy.h"

/* Run op on the world over the buffer `obj`, the GIL released. */
typedef int (*buf_op)(bp_comm *c, float *x, size_t n, void *arg);

static PyObject *run_on_buffer(PyObject *obj, buf_op op, void *arg) {
    bp_comm *w = bpy_world();
    if (!w) return NULL;
    Py_buffer v;
    if (bpy_floats(obj, &v) < 0) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = op(w, bpy_data(&v), bpy_count(&v), arg);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v);
    return rc ? bpy_raise_comm(w, rc) : Py_NewRef(Py_None);
}

static int op_avg(bp_comm *c, float *x, size_t n, void *arg) {
    (void)arg;
    return bp_allreduce_avg(c, x, n);
}
static int op_sum(bp_comm *c, float *x, size_t n, void *arg) {
    (void)arg;
    return bp_allreduce_sum(c, x, n);
}
static int op_lp(bp_comm *c, float *x, size_t n, void *arg) {
    return bp_allreduce_avg_lp(c, x, n, arg);
}
static int op_bcast(bp_comm *c, float *x, size_t n, void *arg) {
    return bp_bcast(c, x, n, *(int *)arg);
}

typedef struct peer_arg {
    bp_peers peers;
    uint64_t round;
} peer_arg;
static int op_peer(bp_comm *c, float *x, size_t n, void *arg) {
    peer_arg *p = arg;
    return bp_peer_avg(c, x, n, p->peers, p->round);
}

static PyObject *py_allreduce_avg(PyObject *self, PyObject *obj) {
    (void)self;
    return run_on_buffer(obj, op_avg, NULL);
}

static PyObject *py_allreduce_sum(PyObject *self, PyObject *obj) {
    (void)self;
    return run_on_buffer(obj, op_sum, NULL);
}

static PyObject *py_allreduce_avg_lp(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *codec;
    if (!PyArg_ParseTuple(args, "OO!", &obj, &bpy_codec_type, &codec)) return NULL;
    return run_on_buffer(obj, op_lp, ((bpy_codec *)codec)->codec);
}

static PyObject *py_bcast(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    int root;
    if (!PyArg_ParseTuple(args, "Oi", &obj, &root)) return NULL;
    bp_comm *w = bpy_world();
    if (!w) return NULL;
    if (root < 0 || root >= bp_comm_size(w))
        return PyErr_Format(bpy_error, "bcast: root %d is not a rank of %d", root,
                            bp_comm_size(w));
    return run_on_buffer(obj, op_bcast, &root);
}

/* Names of bp_peers as the options spell them. */
int bpy_peers(const char *name, bp_peers *out) {
    if (!strcmp(name, "all")) *out = BP_PEERS_ALL;
    else if (!strcmp(name, "shift_one")) *out = BP_PEERS_SHIFT_ONE;
    else {
        PyErr_Format(bpy_error, "peers: '%s' is not one of all, shift_one", name);
        return -1;
    }
    return 0;
}

static PyObject *py_peer_avg(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    const char *peers;
    unsigned long long round;
    if (!PyArg_ParseTuple(args, "OsK", &obj, &peers, &round)) return NULL;
    peer_arg p = {.round = round};
    if (bpy_peers(peers, &p.peers) < 0) return NULL;
    return run_on_buffer(obj, op_peer, &p);
}

static PyObject *py_barrier(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    bp_comm *w = bpy_world();
    if (!w) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bp_barrier(w);
    Py_END_ALLOW_THREADS
    return rc ? bpy_raise_comm(w, rc) : Py_NewRef(Py_None);
}

static PyObject *py_shift_one_peer(PyObject *self, PyObject *args) {
    (void)self;
    int rank, size;
    unsigned long long round;
    if (!PyArg_ParseTuple(args, "iiK", &rank, &size, &round)) return NULL;
    if (size < 2 || size % 2 || rank < 0 || rank >= size)
        return bpy_raise("shift_one_peer: needs an even size >= 2 and a rank below it");
    return PyLong_FromLong(bp_shift_one_peer(rank, size, round));
}

static PyObject *py_chunk(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t n;
    int parts, i;
    if (!PyArg_ParseTuple(args, "nii", &n, &parts, &i)) return NULL;
    if (n < 0 || parts < 1 || i < 0 || i >= parts)
        return bpy_raise("chunk: needs n >= 0 and 0 <= i < parts");
    size_t off, len;
    bp_chunk((size_t)n, parts, i, &off, &len);
    return Py_BuildValue("nn", (Py_ssize_t)off, (Py_ssize_t)len);
}

PyMethodDef bpy_ops_methods[] = {
    {"barrier", py_barrier, METH_NOARGS, "Wait for every rank."},
    {"bcast", py_bcast, METH_VARARGS, "bcast(buf, root): root's floats to every rank."},
    {"allreduce_avg", py_allreduce_avg, METH_O, "Average buf over the ranks (C_FP_S)."},
    {"allreduce_sum", py_allreduce_sum, METH_O, "Sum buf over the ranks."},
    {"allreduce_avg_lp", py_allreduce_avg_lp, METH_VARARGS,
     "allreduce_avg_lp(buf, codec): the average with compressed traffic (C_LP_S)."},
    {"peer_avg", py_peer_avg, METH_VARARGS,
     "peer_avg(buf, peers, round): average with this round's peers (D_FP_S)."},
    {"shift_one_peer", py_shift_one_peer, METH_VARARGS,
     "shift_one_peer(rank, size, round): the peer of rank at that round."},
    {"chunk", py_chunk, METH_VARARGS, "chunk(n, parts, i): (offset, length) of part i."},
    {NULL, NULL, 0, NULL},
};
