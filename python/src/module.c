/* bagpipe._C: the module, the world group and the exception type.
 *
 * init() starts MPI through bp_comm_init (MPI_Init_thread with
 * MPI_THREAD_MULTIPLE) unless the program already did, and finalize() (which the
 * package registers with atexit) stops the communication threads and shuts MPI
 * down. The world is module state: MPI allows one per process. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>

#include "bpy.h"

PyObject *bpy_error;
int bpy_groups;
static bp_comm *world;

bp_comm *bpy_world(void) {
    if (!world) bpy_raise("bagpipe is not initialized: call bagpipe.init() first");
    return world;
}

PyObject *bpy_raise(const char *msg) {
    PyErr_SetString(bpy_error, msg);
    return NULL;
}

PyObject *bpy_raise_comm(const bp_comm *c, int rc) {
    const char *msg = bp_comm_errmsg(c);
    if (!msg[0]) return PyErr_Format(bpy_error, "%s", bp_status_name(rc));
    return bpy_raise(msg);
}

static bool float_format(const char *f) {
    return f && (!strcmp(f, "f") || !strcmp(f, "<f") || !strcmp(f, "=f"));
}

int bpy_floats(PyObject *obj, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->itemsize != sizeof(float) || !float_format(view->format)) {
        PyErr_Format(PyExc_TypeError, "bagpipe needs float32 data, not format '%s'",
                     view->format ? view->format : "B");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* Open MPI loads its components with dlopen and they resolve symbols of libmpi,
 * which Python loaded privately with this module: make libmpi's symbols global
 * first, as mpi4py does. */
static void mpi_symbols_global(void) {
    Dl_info info;
    if (dladdr((void *)MPI_Init_thread, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

static PyObject *py_init(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    if (world) Py_RETURN_NONE;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        return bpy_raise("bagpipe: init after finalize: MPI cannot start twice in one process");
    mpi_symbols_global();
    bp_err err = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bp_comm_init(NULL, NULL, &world, &err);
    Py_END_ALLOW_THREADS
    if (rc != BP_OK) return bpy_raise(err.msg);
    Py_RETURN_NONE;
}

static PyObject *py_finalize(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    if (!world) Py_RETURN_NONE;
    bpy_workers_stop();
    bpy_asyncs_stop();
    if (bpy_groups > 0)
        return PyErr_Format(bpy_error,
                            "finalize: %d bagpipe objects still hold groups; delete them first",
                            bpy_groups);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bp_comm_finalize(world);
    Py_END_ALLOW_THREADS
    if (rc != BP_OK) return bpy_raise_comm(world, rc);
    world = NULL;
    Py_RETURN_NONE;
}

static PyObject *py_initialized(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    return PyBool_FromLong(world != NULL);
}

static PyObject *py_rank(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    bp_comm *w = bpy_world();
    return w ? PyLong_FromLong(bp_comm_rank(w)) : NULL;
}

static PyObject *py_size(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    bp_comm *w = bpy_world();
    return w ? PyLong_FromLong(bp_comm_size(w)) : NULL;
}

/* One number of seconds, at least 0, given to `set` on the world. */
static PyObject *set_world_seconds(PyObject *args, bp_status (*set)(bp_comm *, double),
                                   const char *what, const char *zero) {
    double s;
    if (!PyArg_ParseTuple(args, "d", &s)) return NULL;
    bp_comm *w = bpy_world();
    if (!w) return NULL;
    if (!(s >= 0))
        return PyErr_Format(bpy_error, "%s: must be a number of seconds >= 0 (0 %s)", what, zero);
    int rc = set(w, s);
    return rc ? bpy_raise_comm(w, rc) : Py_NewRef(Py_None);
}

static PyObject *py_set_timeout(PyObject *self, PyObject *args) {
    (void)self;
    return set_world_seconds(args, bp_comm_set_timeout, "timeout", "is off");
}

static PyObject *py_set_poll(PyObject *self, PyObject *args) {
    (void)self;
    return set_world_seconds(args, bp_comm_set_poll, "poll", "blocks in MPI");
}

static PyObject *py_set_net(PyObject *self, PyObject *args) {
    (void)self;
    const char *spec;
    if (!PyArg_ParseTuple(args, "s", &spec)) return NULL;
    bp_comm *w = bpy_world();
    if (!w) return NULL;
    int rc = bp_comm_set_net(w, spec);
    return rc ? bpy_raise_comm(w, rc) : Py_NewRef(Py_None);
}

static PyObject *py_set_path(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    bp_comm *w = bpy_world();
    if (!w) return NULL;
    bool mpi = !strcmp(path, "mpi");
    if (!mpi && strcmp(path, "own"))
        return PyErr_Format(bpy_error, "path: '%s' is not one of own, mpi", path);
    int rc = bp_comm_set_path(w, mpi ? BP_PATH_MPI : BP_PATH_OWN);
    return rc ? bpy_raise_comm(w, rc) : Py_NewRef(Py_None);
}

/* End the job now with `code` on every rank (after an error that leaves the
 * groups in an unknown state), as the CLI does. */
static PyObject *py_abort(PyObject *self, PyObject *args) {
    (void)self;
    int code = 1;
    if (!PyArg_ParseTuple(args, "|i", &code)) return NULL;
    bp_comm *w = bpy_world();
    if (!w) return NULL;
    fflush(NULL);
    bp_comm_abort(w, code);
    Py_RETURN_NONE;
}

static PyMethodDef world_methods[] = {
    {"init", py_init, METH_NOARGS, "Start MPI (MPI_THREAD_MULTIPLE) and the world group."},
    {"finalize", py_finalize, METH_NOARGS, "Stop the communication threads, shut MPI down."},
    {"initialized", py_initialized, METH_NOARGS, "Whether init() ran."},
    {"rank", py_rank, METH_NOARGS, "This process's rank in the world."},
    {"size", py_size, METH_NOARGS, "The number of ranks."},
    {"set_timeout", py_set_timeout, METH_VARARGS, "Watchdog timeout in seconds (0: off)."},
    {"set_poll", py_set_poll, METH_VARARGS,
     "Waits test every s seconds and sleep between (0: block in MPI, which spins); "
     "Workers made after it poll alike."},
    {"set_net", py_set_net, METH_VARARGS, "Network emulation spec (comm.h), '' or 'off'."},
    {"set_path", py_set_path, METH_VARARGS, "'own' (our algorithms) or 'mpi' (MPI's)."},
    {"abort", py_abort, METH_VARARGS, "End the whole job with the exit code."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "bagpipe._C", "bagpipe's communication library for Python.", -1,
    NULL, NULL, NULL, NULL, NULL,
};

static int add_type(PyObject *m, PyTypeObject *t, const char *name) {
    if (PyType_Ready(t) < 0) return -1;
    return PyModule_AddObjectRef(m, name, (PyObject *)t);
}

PyMODINIT_FUNC PyInit__C(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    bpy_error = PyErr_NewException("bagpipe.Error", PyExc_RuntimeError, NULL);
    if (!bpy_error || PyModule_AddObjectRef(m, "Error", bpy_error) < 0 ||
        PyModule_AddFunctions(m, world_methods) < 0 ||
        PyModule_AddFunctions(m, bpy_ops_methods) < 0 ||
        PyModule_AddFunctions(m, bpy_registry_methods) < 0 ||
        PyModule_AddFunctions(m, bpy_rules_methods) < 0 ||
        PyModule_AddFunctions(m, bpy_diloco_methods) < 0 ||
        add_type(m, &bpy_codec_type, "Codec") < 0 || add_type(m, &bpy_worker_type, "Worker") < 0 ||
        add_type(m, &bpy_ring_type, "Ring") < 0 || add_type(m, &bpy_async_type, "Async") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
