/* bagpipe._C.Fanout: messages from one root rank to every other rank, which the
 * root does not wait for when it sends them: send() posts one message to each
 * other rank and returns, recv() on the others posts the matching receive, and
 * wait() completes whatever this rank posted, the GIL released. Messages of one
 * tag arrive in the order they were sent. The Fanout has a group of its own (a
 * dup of the world), so that its messages meet no other traffic; a posted message
 * keeps its buffer (and the tensor under it) alive until wait() completes it.
 * BagpipeModule sends the module's buffers with it (weights.py, BufferSync). */
#include <stdlib.h>

#include "bpy.h"

typedef struct bpy_fanout {
    PyObject_HEAD
    bp_comm *comm;
    int root;
    bp_request **reqs; /* posted, not yet completed */
    int count, cap;
    Py_buffer *views; /* one per send() or recv() posted */
    int nviews, vcap;
    struct bpy_fanout *next_live; /* those alive, for bpy_fanouts_stop */
} bpy_fanout;

static bpy_fanout *live_fanouts;

/* Complete every posted message; the first failure's status. */
static int fanout_wait(bpy_fanout *f) {
    int rc = 0;
    if (f->count) {
        Py_BEGIN_ALLOW_THREADS
        rc = bp_waitall(f->reqs, f->count);
        Py_END_ALLOW_THREADS
    }
    f->count = 0;
    for (int i = 0; i < f->nviews; i++) PyBuffer_Release(&f->views[i]);
    f->nviews = 0;
    return rc;
}

static void fanout_close(bpy_fanout *f) {
    fanout_wait(f);
    if (f->comm) {
        bp_comm_destroy(f->comm);
        f->comm = NULL;
        bpy_groups--;
    }
    for (bpy_fanout **p = &live_fanouts; *p; p = &(*p)->next_live)
        if (*p == f) {
            *p = f->next_live;
            break;
        }
}

void bpy_fanouts_stop(void) {
    while (live_fanouts) fanout_close(live_fanouts);
}

static int fanout_init(PyObject *self, PyObject *args, PyObject *kw) {
    bpy_fanout *f = (bpy_fanout *)self;
    static char *names[] = {"root", "name", NULL};
    const char *name = "bagpipe-fanout";
    int root = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|is", names, &root, &name)) return -1;
    if (f->comm) return bpy_raise("Fanout: already initialized"), -1;
    bp_comm *world = bpy_world();
    if (!world) return -1;
    if (root < 0 || root >= bp_comm_size(world)) {
        PyErr_Format(bpy_error, "Fanout: root %d is not a rank of %d", root, bp_comm_size(world));
        return -1;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bp_comm_dup(world, name, &f->comm);
    Py_END_ALLOW_THREADS
    if (rc) return bpy_raise_comm(world, rc), -1;
    bpy_groups++;
    f->root = root;
    f->next_live = live_fanouts, live_fanouts = f;
    return 0;
}

static void fanout_dealloc(PyObject *self) {
    bpy_fanout *f = (bpy_fanout *)self;
    fanout_close(f);
    free(f->reqs);
    free(f->views);
    Py_TYPE(self)->tp_free(self);
}

/* Room for `more` requests and one view; 0, or -1 with MemoryError set. */
static int reserve(bpy_fanout *f, int more) {
    if (f->count + more > f->cap) {
        int cap = 2 * (f->count + more);
        bp_request **r = realloc(f->reqs, (size_t)cap * sizeof *r);
        if (!r) return PyErr_NoMemory(), -1;
        f->reqs = r, f->cap = cap;
    }
    if (f->nviews + 1 > f->vcap) {
        int cap = 2 * (f->nviews + 1);
        Py_buffer *v = realloc(f->views, (size_t)cap * sizeof *v);
        if (!v) return PyErr_NoMemory(), -1;
        f->views = v, f->vcap = cap;
    }
    return 0;
}

/* Post buf's floats to every other rank (root) or from the root (the others). */
static PyObject *post(PyObject *self, PyObject *args, bool sending) {
    bpy_fanout *f = (bpy_fanout *)self;
    PyObject *obj;
    int tag;
    if (!PyArg_ParseTuple(args, "Oi", &obj, &tag)) return NULL;
    if (!f->comm) return bpy_raise("Fanout: closed");
    int me = bp_comm_rank(f->comm), size = bp_comm_size(f->comm);
    if (sending != (me == f->root))
        return PyErr_Format(bpy_error, "Fanout: rank %d %s, but the root is rank %d", me,
                            sending ? "cannot send" : "cannot receive", f->root);
    if (reserve(f, sending ? size - 1 : 1) < 0) return NULL;
    Py_buffer *v = &f->views[f->nviews];
    if (bpy_floats(obj, v) < 0) return NULL;
    f->nviews++;
    float *x = bpy_data(v);
    size_t n = bpy_count(v);
    int rc = 0;
    for (int r = 0; r < size && !rc; r++) {
        if (sending && r != me) rc = bp_isend(f->comm, x, n, r, tag, &f->reqs[f->count]);
        else if (!sending && r == f->root) rc = bp_irecv(f->comm, x, n, r, tag, &f->reqs[f->count]);
        else continue;
        if (!rc) f->count++;
    }
    return rc ? bpy_raise_comm(f->comm, rc) : Py_NewRef(Py_None);
}

static PyObject *py_send(PyObject *self, PyObject *args) { return post(self, args, true); }

static PyObject *py_recv(PyObject *self, PyObject *args) { return post(self, args, false); }

static PyObject *py_wait(PyObject *self, PyObject *args) {
    (void)args;
    bpy_fanout *f = (bpy_fanout *)self;
    int rc = fanout_wait(f);
    return rc ? bpy_raise_comm(f->comm, rc) : Py_NewRef(Py_None);
}

static PyObject *py_close(PyObject *self, PyObject *args) {
    (void)args;
    fanout_close((bpy_fanout *)self);
    Py_RETURN_NONE;
}

static PyMethodDef fanout_methods[] = {
    {"send", py_send, METH_VARARGS, "send(buf, tag): post buf to every other rank (the root)."},
    {"recv", py_recv, METH_VARARGS, "recv(buf, tag): post the receive of the root's buf."},
    {"wait", py_wait, METH_NOARGS, "Complete what this rank posted; raise the first error."},
    {"close", py_close, METH_NOARGS, "Complete what was posted and free the group."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject bpy_fanout_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bagpipe._C.Fanout",
    .tp_basicsize = sizeof(bpy_fanout),
    .tp_dealloc = fanout_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Fanout(root=0, name='bagpipe-fanout'): the root's messages to every other rank.",
    .tp_methods = fanout_methods,
    .tp_init = fanout_init,
    .tp_new = PyType_GenericNew,
};
