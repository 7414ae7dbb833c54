/* The rules of the C algorithms that bagpipe.torch runs on a model's tensors, the
 * same code as the runtime's (the cpu backend's kernels and parallel/dp/), so that
 * the Python path gives the CLI's bits:
 *   easgd_average(w, center, diff, alpha)  easgd's elastic averaging (collective);
 *   qadam_update(p, g, m, v, ...)           QAdam's update of one tensor;
 *   momentum(g, m, beta1)                   QAdam's momentum m = b1 m + (1 - b1) g. */
#include <string.h>

#include "bpy.h"
#include "core/backend.h"
#include "parallel/dp/easgd.h"

void bpy_release(Py_buffer *v, int n) {
    for (int i = 0; i < n; i++) PyBuffer_Release(&v[i]); /* one of obj NULL: nothing */
}

int bpy_views(const char *what, PyObject **objs, Py_buffer *v, int n, int optional) {
    memset(v, 0, (size_t)n * sizeof *v);
    for (int i = 0; i < n; i++) {
        if (objs[i] == Py_None && i >= n - optional) continue;
        if (bpy_floats(objs[i], &v[i]) < 0) {
            bpy_release(v, i);
            return -1;
        }
        if (bpy_count(&v[i]) != bpy_count(&v[0])) {
            PyErr_Format(bpy_error, "%s: argument %d has %zu floats, the first %zu", what, i + 1,
                         bpy_count(&v[i]), bpy_count(&v[0]));
            bpy_release(v, i + 1);
            return -1;
        }
    }
    return 0;
}

static PyObject *py_easgd_average(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj[3];
    double alpha;
    if (!PyArg_ParseTuple(args, "OOOd", &obj[0], &obj[1], &obj[2], &alpha)) return NULL;
    bp_comm *w = bpy_world();
    Py_buffer v[3];
    if (!w || bpy_views("easgd_average", obj, v, 3, 0) < 0) return NULL;
    bp_err err = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bp_dp_easgd_average(bp_backend_cpu(), w, bpy_data(&v[0]), bpy_data(&v[1]),
                             bpy_data(&v[2]), bpy_count(&v[0]), alpha, &err);
    Py_END_ALLOW_THREADS
    bpy_release(v, 3);
    return rc ? bpy_raise(err.msg) : Py_NewRef(Py_None);
}

static PyObject *py_qadam_update(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"p", "g", "m", "v", "lr", "beta1", "beta2", "eps", "weight_decay",
                            "t", "moments", NULL};
    PyObject *obj[4];
    bp_update_args a = {.kind = BP_UPDATE_QADAM};
    long long t;
    int moments;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOdddddLp", names, &obj[0], &obj[1], &obj[2],
                                     &obj[3], &a.lr, &a.beta1, &a.beta2, &a.eps,
                                     &a.weight_decay, &t, &moments))
        return NULL;
    if (t < 1) return bpy_raise("qadam_update: t counts this step, from 1");
    a.t = t, a.moments = moments;
    Py_buffer v[4];
    if (bpy_views("qadam_update", obj, v, 4, 0) < 0) return NULL;
    bp_backend_cpu()->update(bp_backend_cpu(), &a, bpy_data(&v[0]), bpy_data(&v[1]),
                             bpy_data(&v[2]), bpy_data(&v[3]), 0, bpy_count(&v[0]));
    bpy_release(v, 4);
    Py_RETURN_NONE;
}

static PyObject *py_momentum(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj[2];
    bp_update_args a = {.kind = BP_UPDATE_MOMENTUM};
    if (!PyArg_ParseTuple(args, "OOd", &obj[0], &obj[1], &a.beta1)) return NULL;
    Py_buffer v[2];
    if (bpy_views("momentum", obj, v, 2, 0) < 0) return NULL;
    bp_backend_cpu()->update(bp_backend_cpu(), &a, NULL, bpy_data(&v[0]), bpy_data(&v[1]), NULL, 0,
                             bpy_count(&v[0]));
    bpy_release(v, 2);
    Py_RETURN_NONE;
}

PyMethodDef bpy_rules_methods[] = {
    {"easgd_average", py_easgd_average, METH_VARARGS,
     "easgd_average(w, center, diff, alpha): easgd's elastic averaging (collective)."},
    {"qadam_update", (PyCFunction)(void (*)(void))py_qadam_update, METH_VARARGS | METH_KEYWORDS,
     "qadam_update(p, g, m, v, lr, beta1, beta2, eps, weight_decay, t, moments): QAdam's "
     "update of one tensor (t counts this step; moments: the warm-up's)."},
    {"momentum", py_momentum, METH_VARARGS,
     "momentum(g, m, beta1): m = beta1 m + (1 - beta1) g (QAdam's, compressed after it)."},
    {NULL, NULL, 0, NULL},
};
