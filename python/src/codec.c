/* bagpipe._C.Codec: the codecs of compress.h as Python objects, for the hooks
 * (PowerSGD's state per matrix) and for tests that check bytes against the C
 * codec. */
#include "bpy.h"

bp_codec *bpy_codec_of(PyObject *obj) {
    if (!PyObject_TypeCheck(obj, &bpy_codec_type)) {
        PyErr_SetString(PyExc_TypeError, "expected a bagpipe._C.Codec");
        return NULL;
    }
    return ((bpy_codec *)obj)->codec;
}

static PyObject *wrap(bp_codec *codec) {
    bpy_codec *o = PyObject_New(bpy_codec, &bpy_codec_type);
    if (!o) {
        bp_codec_destroy(codec);
        return NULL;
    }
    o->codec = codec;
    return (PyObject *)o;
}

static PyObject *py_minmax_u8(PyObject *cls, PyObject *args) {
    (void)cls, (void)args;
    bp_codec *c;
    bp_err err = {0};
    if (bp_codec_minmax_u8_create(&c, &err)) return bpy_raise(err.msg);
    return wrap(c);
}

static PyObject *py_powersgd(PyObject *cls, PyObject *args) {
    (void)cls;
    Py_ssize_t rows, cols;
    int rank;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "nniK", &rows, &cols, &rank, &seed)) return NULL;
    if (rows < 1 || cols < 1 || rank < 1)
        return bpy_raise("powersgd: rows, cols and rank must be at least 1");
    bp_codec *c;
    bp_err err = {0};
    if (bp_codec_powersgd_create((size_t)rows, (size_t)cols, rank, seed, &c, &err))
        return bpy_raise(err.msg);
    return wrap(c);
}

static void codec_dealloc(PyObject *self) {
    bp_codec_destroy(((bpy_codec *)self)->codec);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *py_encode(PyObject *self, PyObject *obj) {
    bp_codec *c = ((bpy_codec *)self)->codec;
    Py_buffer v;
    if (bpy_floats(obj, &v) < 0) return NULL;
    size_t n = bpy_count(&v);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bp_codec_encoded_size(c, n));
    bp_err err = {0};
    int rc = out ? bp_codec_encode(c, bpy_data(&v), n, PyBytes_AS_STRING(out), &err) : BP_OK;
    PyBuffer_Release(&v);
    if (rc) {
        Py_DECREF(out);
        return bpy_raise(err.msg);
    }
    return out;
}

static PyObject *py_decode(PyObject *self, PyObject *args) {
    bp_codec *c = ((bpy_codec *)self)->codec;
    Py_buffer in, v;
    PyObject *obj;
    if (!PyArg_ParseTuple(args, "y*O", &in, &obj)) return NULL;
    if (bpy_floats(obj, &v) < 0) {
        PyBuffer_Release(&in);
        return NULL;
    }
    size_t n = bpy_count(&v);
    bp_err err = {0};
    int rc = BP_OK;
    if ((size_t)in.len != bp_codec_encoded_size(c, n))
        rc = bp_fail(&err, BP_EUSAGE, "decode: %zd bytes do not encode %zu floats", in.len, n);
    if (!rc) rc = bp_codec_decode(c, in.buf, n, bpy_data(&v), &err);
    PyBuffer_Release(&in);
    PyBuffer_Release(&v);
    return rc ? bpy_raise(err.msg) : Py_NewRef(Py_None);
}

static PyObject *py_encoded_size(PyObject *self, PyObject *arg) {
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n < 0) return PyErr_Occurred() ? NULL : bpy_raise("encoded_size: n must be >= 0");
    return PyLong_FromSize_t(bp_codec_encoded_size(((bpy_codec *)self)->codec, (size_t)n));
}

/* PowerSGD's state (error feedback E and the warm-started Q), for a checkpoint:
 * copy_state(e, q, out) copies it out (out true) or in; sizes from state_sizes. */
static bool powersgd_state(bpy_codec *o, float **e, size_t *en, float **q, size_t *qn) {
    return !strcmp(bp_codec_name(o->codec), "powersgd") &&
           bp_powersgd_state(o->codec, e, en, q, qn);
}

static PyObject *py_state_sizes(PyObject *self, void *closure) {
    (void)closure;
    float *e, *q;
    size_t en = 0, qn = 0;
    if (!powersgd_state((bpy_codec *)self, &e, &en, &q, &qn)) Py_RETURN_NONE;
    return Py_BuildValue("nn", (Py_ssize_t)en, (Py_ssize_t)qn);
}

static PyObject *py_copy_state(PyObject *self, PyObject *args) {
    PyObject *obj[2];
    int out;
    if (!PyArg_ParseTuple(args, "OOp", &obj[0], &obj[1], &out)) return NULL;
    float *state[2];
    size_t n[2];
    if (!powersgd_state((bpy_codec *)self, &state[0], &n[0], &state[1], &n[1]))
        return bpy_raise("copy_state: this codec keeps no state");
    for (int i = 0; i < 2; i++) {
        Py_buffer v;
        if (bpy_floats(obj[i], &v) < 0) return NULL;
        size_t got = bpy_count(&v);
        if (got == n[i]) {
            if (out) memcpy(bpy_data(&v), state[i], got * sizeof(float));
            else memcpy(state[i], bpy_data(&v), got * sizeof(float));
        }
        PyBuffer_Release(&v);
        if (got != n[i])
            return PyErr_Format(bpy_error, "copy_state: %s has %zu floats, the codec's %zu",
                                i ? "Q" : "the error", got, n[i]);
    }
    Py_RETURN_NONE;
}

static PyObject *py_name(PyObject *self, void *closure) {
    (void)closure;
    return PyUnicode_FromString(bp_codec_name(((bpy_codec *)self)->codec));
}

static PyObject *py_compresses(PyObject *self, void *closure) {
    (void)closure;
    bp_codec *c = ((bpy_codec *)self)->codec;
    return PyBool_FromLong(!strcmp(bp_codec_name(c), "powersgd") && bp_powersgd_compresses(c));
}

static PyMethodDef codec_methods[] = {
    {"minmax_u8", py_minmax_u8, METH_NOARGS | METH_STATIC, "A MinMaxUInt8 codec (ByteGrad)."},
    {"powersgd", py_powersgd, METH_VARARGS | METH_STATIC,
     "powersgd(rows, cols, rank, seed): a PowerSGD codec for one matrix."},
    {"encode", py_encode, METH_O, "encode(buf) -> bytes"},
    {"decode", py_decode, METH_VARARGS, "decode(bytes, out): the floats into out."},
    {"encoded_size", py_encoded_size, METH_O, "Bytes that encoding n floats gives."},
    {"copy_state", py_copy_state, METH_VARARGS,
     "copy_state(error, q, out): PowerSGD's state copied out (out true) or in."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef codec_getset[] = {
    {"name", py_name, NULL, "minmax_u8 or powersgd", NULL},
    {"state_sizes", py_state_sizes, NULL, "(error, Q) floats of PowerSGD's state, or None", NULL},
    {"compresses", py_compresses, NULL, "PowerSGD on a 2-D shape", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject bpy_codec_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bagpipe._C.Codec",
    .tp_basicsize = sizeof(bpy_codec),
    .tp_dealloc = codec_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A codec of bagpipe's compress library (made by minmax_u8() or powersgd()).",
    .tp_methods = codec_methods,
    .tp_getset = codec_getset,
};
