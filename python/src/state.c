/* The state of two weight algorithms as Python objects, over a model's parameters
 * flattened into one float32 buffer (which each object keeps alive):
 *   Ring:  lp-decentralized's ring of compressed differences (bp_ring_lp, D_LP_S);
 *   Async: async's background averaging thread (bp_async_avg, C_FP_A).
 * Both are collective over the world at creation. */
#include "bpy.h"

typedef struct bpy_ring {
    PyObject_HEAD
    bp_ring_lp *ring;
    bp_codec *codec;
    size_t n;
} bpy_ring;

static int ring_init(PyObject *self, PyObject *args, PyObject *kw) {
    bpy_ring *r = (bpy_ring *)self;
    static char *names[] = {"x0", "chunk", NULL};
    PyObject *obj;
    Py_ssize_t chunk = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|n", names, &obj, &chunk)) return -1;
    bp_comm *w = bpy_world();
    if (!w || r->ring) return r->ring ? (bpy_raise("Ring: already initialized"), -1) : -1;
    if (chunk < 0) return bpy_raise("Ring: chunk must be >= 0 (0: one chunk)"), -1;
    bp_err err = {0};
    if (bp_codec_minmax_u8_create(&r->codec, &err)) return bpy_raise(err.msg), -1;
    Py_buffer v;
    if (bpy_floats(obj, &v) < 0) return -1;
    int rc;
    r->n = bpy_count(&v);
    Py_BEGIN_ALLOW_THREADS
    rc = bp_ring_lp_create(w, bpy_data(&v), r->n, (size_t)chunk, r->codec, &r->ring);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v);
    return rc ? (bpy_raise_comm(w, rc), -1) : 0;
}

/* step(x), or begin(x) when a Worker runs the exchange (ring_exchange). */
static PyObject *ring_run(PyObject *self, PyObject *obj, bool whole) {
    bpy_ring *r = (bpy_ring *)self;
    bp_comm *w = bpy_world();
    if (!w) return NULL;
    if (!r->ring) return bpy_raise("Ring: not initialized");
    Py_buffer v;
    if (bpy_floats(obj, &v) < 0) return NULL;
    if (bpy_count(&v) != r->n) {
        PyBuffer_Release(&v);
        return PyErr_Format(bpy_error, "Ring.%s: %zu floats, the ring holds %zu",
                            whole ? "step" : "begin", bpy_count(&v), r->n);
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = whole ? bp_ring_lp_step(r->ring, bpy_data(&v)) : bp_ring_lp_begin(r->ring, bpy_data(&v));
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v);
    return rc ? bpy_raise_comm(w, rc) : Py_NewRef(Py_None);
}

static PyObject *ring_step(PyObject *self, PyObject *obj) { return ring_run(self, obj, true); }
static PyObject *ring_begin(PyObject *self, PyObject *obj) { return ring_run(self, obj, false); }

bp_ring_lp *bpy_ring_of(PyObject *obj) {
    if (!PyObject_TypeCheck(obj, &bpy_ring_type)) {
        PyErr_SetString(PyExc_TypeError, "expected a bagpipe._C.Ring");
        return NULL;
    }
    bp_ring_lp *ring = ((bpy_ring *)obj)->ring;
    return ring ? ring : (bpy_raise("Ring: not initialized"), NULL);
}

/* get(w, l, r) copies the replicas out; set(w, l, r) copies them in (a resume,
 * or new weights that every rank loaded). */
static PyObject *ring_copy(PyObject *self, PyObject *args, bool out) {
    bpy_ring *r = (bpy_ring *)self;
    if (!r->ring) return bpy_raise("Ring: not initialized");
    float *state[3];
    bp_ring_lp_state(r->ring, &state[0], &state[1], &state[2]);
    if (!state[0]) return bpy_raise("Ring: this rank keeps no replicas");
    PyObject *obj[3];
    if (!PyArg_ParseTuple(args, "OOO", &obj[0], &obj[1], &obj[2])) return NULL;
    for (int i = 0; i < 3; i++) {
        Py_buffer v;
        if (bpy_floats(obj[i], &v) < 0) return NULL;
        size_t n = bpy_count(&v);
        if (n == r->n) {
            if (out) memcpy(bpy_data(&v), state[i], n * sizeof(float));
            else memcpy(state[i], bpy_data(&v), n * sizeof(float));
        }
        PyBuffer_Release(&v);
        if (n != r->n)
            return PyErr_Format(bpy_error, "Ring: replica %d has %zu floats, the ring holds %zu",
                                i, n, r->n);
    }
    Py_RETURN_NONE;
}

static PyObject *ring_get(PyObject *self, PyObject *args) { return ring_copy(self, args, true); }
static PyObject *ring_set(PyObject *self, PyObject *args) { return ring_copy(self, args, false); }

static void ring_dealloc(PyObject *self) {
    bpy_ring *r = (bpy_ring *)self;
    bp_ring_lp_destroy(r->ring);
    bp_codec_destroy(r->codec);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef ring_methods[] = {
    {"step", ring_step, METH_O, "step(x): one exchange after the local step; x becomes w."},
    {"begin", ring_begin, METH_O,
     "begin(x): step's part that needs no neighbour (x becomes w); a Worker's "
     "ring_exchange must follow before the next begin, get or set."},
    {"get", ring_get, METH_VARARGS, "get(w, l, r): copy this rank's replica and its neighbours' out."},
    {"set", ring_set, METH_VARARGS, "set(w, l, r): replace them (no communication)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject bpy_ring_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bagpipe._C.Ring",
    .tp_basicsize = sizeof(bpy_ring),
    .tp_dealloc = ring_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Ring(x0, chunk=0): lp-decentralized's replicas, starting from x0 (collective).",
    .tp_methods = ring_methods,
    .tp_init = ring_init,
    .tp_new = PyType_GenericNew,
};

/* --- async ------------------------------------------------------------------------- */

typedef struct bpy_async {
    PyObject_HEAD
    bp_async_avg *a;
    Py_buffer x; /* the weights the thread averages */
    bool have_x;
    bool locked; /* by this object: a second lock() would wait for itself forever */
    struct bpy_async *next_live;
} bpy_async;

static bpy_async *live_asyncs;

static void async_close(bpy_async *s) {
    if (s->a) {
        Py_BEGIN_ALLOW_THREADS
        bp_async_avg_destroy(s->a);
        Py_END_ALLOW_THREADS
        s->a = NULL;
        bpy_groups--;
    }
    if (s->have_x) PyBuffer_Release(&s->x);
    s->have_x = false;
    for (bpy_async **p = &live_asyncs; *p; p = &(*p)->next_live)
        if (*p == s) {
            *p = s->next_live;
            break;
        }
}

void bpy_asyncs_stop(void) {
    while (live_asyncs) async_close(live_asyncs);
}

static int async_init(PyObject *self, PyObject *args, PyObject *kw) {
    bpy_async *s = (bpy_async *)self;
    static char *names[] = {"x", "interval_ms", NULL};
    PyObject *obj;
    int ms = 20;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i", names, &obj, &ms)) return -1;
    bp_comm *w = bpy_world();
    if (!w) return -1;
    if (s->a) return bpy_raise("Async: already started"), -1;
    if (ms < 1) return bpy_raise("Async: interval_ms must be at least 1"), -1;
    if (bpy_floats(obj, &s->x) < 0) return -1;
    s->have_x = true;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bp_async_avg_start(w, bpy_data(&s->x), bpy_count(&s->x), ms, &s->a);
    Py_END_ALLOW_THREADS
    if (rc) return bpy_raise_comm(w, rc), -1;
    bpy_groups++;
    s->next_live = live_asyncs, live_asyncs = s;
    return 0;
}

static PyObject *async_lock(PyObject *self, PyObject *args) {
    (void)args;
    bpy_async *s = (bpy_async *)self;
    if (!s->a) return bpy_raise("Async: not running");
    if (s->locked) return bpy_raise("Async.lock: already locked (unlock() first)");
    Py_BEGIN_ALLOW_THREADS
    bp_async_avg_lock(s->a);
    Py_END_ALLOW_THREADS
    s->locked = true;
    Py_RETURN_NONE;
}

static PyObject *async_unlock(PyObject *self, PyObject *args) {
    (void)args;
    bpy_async *s = (bpy_async *)self;
    if (!s->a) return bpy_raise("Async: not running");
    if (!s->locked) return bpy_raise("Async.unlock: not locked");
    s->locked = false;
    bp_async_avg_unlock(s->a);
    Py_RETURN_NONE;
}

static PyObject *async_stop(PyObject *self, PyObject *args) {
    (void)args;
    bpy_async *s = (bpy_async *)self;
    if (!s->a) Py_RETURN_NONE;
    /* The thread's last round needs the weights. */
    if (s->locked) {
        s->locked = false;
        bp_async_avg_unlock(s->a);
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bp_async_avg_stop(s->a);
    Py_END_ALLOW_THREADS
    PyObject *rounds = PyLong_FromUnsignedLongLong(bp_async_avg_rounds(s->a));
    async_close(s);
    if (rc) {
        Py_XDECREF(rounds);
        return PyErr_Format(bpy_error, "async averaging stopped with: %s", bp_status_name(rc));
    }
    return rounds;
}

static PyObject *async_rounds(PyObject *self, void *closure) {
    (void)closure;
    bpy_async *s = (bpy_async *)self;
    return PyLong_FromUnsignedLongLong(s->a ? bp_async_avg_rounds(s->a) : 0);
}

static void async_dealloc(PyObject *self) {
    async_close((bpy_async *)self);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef async_methods[] = {
    {"lock", async_lock, METH_NOARGS, "Keep the thread from writing the weights."},
    {"unlock", async_unlock, METH_NOARGS, "Let it write them again."},
    {"stop", async_stop, METH_NOARGS,
     "End the thread in a round every rank agrees on (collective); the rounds done."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef async_getset[] = {
    {"rounds", async_rounds, NULL, "averaging rounds completed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject bpy_async_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bagpipe._C.Async",
    .tp_basicsize = sizeof(bpy_async),
    .tp_dealloc = async_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Async(x, interval_ms=20): average x over the ranks in the background (collective).",
    .tp_methods = async_methods,
    .tp_getset = async_getset,
    .tp_init = async_init,
    .tp_new = PyType_GenericNew,
};
