/* DiLoCo's outer step (parallel/dp/diloco.c) on a PyTorch model's flat tensors,
 * the runtime's code, so that bagpipe.torch's diloco and streaming-diloco give
 * the CLI's bits:
 *   diloco_average(w, global, delta, error, error_rs, spans, compress, topk, exchange)
 *       delta = global - w on the fragment's spans, averaged over the world
 *       (collective); error and error_rs: the error feedback (None without a codec,
 *       error_rs None but with reduce-scatter);
 *   diloco_outer_step(w, global, momentum, delta, spans, lr, mu, mix)
 *       the outer Nesterov step from the average and the merge of w.
 * Every array holds the model's n floats; spans is a sequence of (offset, numel). */
#include <stdlib.h>
#include <string.h>

#include "bpy.h"
#include "parallel/dp/diloco.h"

/* spans as a fragment within n floats (free its spans), or NULL with an exception. */
static bp_diloco_span *spans_of(PyObject *obj, size_t n, int *count) {
    PyObject *seq = PySequence_Fast(obj, "diloco: spans must be a sequence of (offset, numel)");
    if (!seq) return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    bp_diloco_span *out = calloc((size_t)k + 1, sizeof *out);
    for (Py_ssize_t i = 0; out && i < k; i++) {
        unsigned long long off, len;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "KK", &off, &len)) {
            free(out), out = NULL;
        } else if (off > n || len > n - off) {
            PyErr_Format(bpy_error, "diloco: span %zd (%llu, %llu) is outside the %zu weights",
                         i, off, len, n);
            free(out), out = NULL;
        } else {
            out[i] = (bp_diloco_span){(size_t)off, (size_t)len};
        }
    }
    if (!out && !PyErr_Occurred()) PyErr_NoMemory();
    *count = (int)k;
    Py_DECREF(seq);
    return out;
}

/* The index of name in the option's choices ("a|b|c"), or -1 with an exception. */
static int choice(const char *what, const char *choices, const char *name) {
    size_t len = strlen(name);
    int i = 0;
    for (const char *at = choices; at; at = strchr(at, '|'), at = at ? at + 1 : NULL, i++)
        if (strncmp(at, name, len) == 0 && (at[len] == '|' || at[len] == 0)) return i;
    PyErr_Format(bpy_error, "diloco: %s '%s' is not one of %s", what, name, choices);
    return -1;
}

static PyObject *py_average(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj[5], *spans;
    const char *compress, *exchange;
    bp_diloco_settings set = {0};
    if (!PyArg_ParseTuple(args, "OOOOOOsds", &obj[0], &obj[1], &obj[2], &obj[3], &obj[4], &spans,
                          &compress, &set.topk, &exchange))
        return NULL;
    int c = choice("compress", "none|minmax8|minmax4|topk2|minmax2", compress);
    int x = c < 0 ? -1 : choice("exchange", "allgather|reduce-scatter", exchange);
    bp_comm *world = x < 0 ? NULL : bpy_world();
    Py_buffer v[5];
    if (!world || bpy_views("diloco_average", obj, v, 5, 2) < 0) return NULL;
    set.compress = (bp_outer_compress)c, set.exchange = (bp_outer_exchange)x;
    diloco s = {.be = bp_backend_cpu(), .global = bpy_data(&v[1]), .delta = bpy_data(&v[2]),
                .exchange = set.exchange,
                .error = v[3].obj ? bpy_data(&v[3]) : NULL,
                .error_rs = v[4].obj ? bpy_data(&v[4]) : NULL};
    int count = 0;
    bp_diloco_span *sp = spans_of(spans, bpy_count(&v[0]), &count);
    bp_diloco_frag fr = {sp, count};
    bp_err err = {0};
    bp_status rc = sp ? bp_diloco_codec_create(&set, &s.codec, &err) : BP_OK;
    const char *missing = !s.codec ? NULL
                          : !s.error ? "a codec needs error"
                          : set.exchange == BP_OUTER_REDUCE_SCATTER && !s.error_rs
                              ? "reduce-scatter needs error_rs" : NULL;
    size_t largest = 0;
    for (int t = 0; t < count; t++) largest = sp[t].numel > largest ? sp[t].numel : largest;
    if (sp && rc == BP_OK && !missing) {
        s.wire = malloc((bp_diloco_wire_floats(&s, fr, bp_comm_size(world)) + 1) * sizeof(float));
        s.stage = malloc((3 * largest + 1) * sizeof(float));
        s.largest = largest;
        if (!s.wire || !s.stage) rc = bp_fail(&err, BP_ENOMEM, "diloco: out of memory");
        else {
            Py_BEGIN_ALLOW_THREADS
            bp_diloco_pseudo_gradient(&s, fr, bpy_data(&v[0]));
            rc = bp_diloco_average(&s, world, fr, &err);
            Py_END_ALLOW_THREADS
        }
    }
    free(s.wire), free(s.stage), free(sp);
    bp_codec_destroy(s.codec);
    bpy_release(v, 5);
    if (!sp) return NULL;
    if (missing) return PyErr_Format(bpy_error, "diloco_average: %s", missing);
    return rc ? bpy_raise(err.msg) : Py_NewRef(Py_None);
}

static PyObject *py_outer_step(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj[4], *spans;
    double lr, mu, mix;
    if (!PyArg_ParseTuple(args, "OOOOOddd", &obj[0], &obj[1], &obj[2], &obj[3], &spans, &lr, &mu,
                          &mix))
        return NULL;
    Py_buffer v[4];
    if (bpy_views("diloco_outer_step", obj, v, 4, 0) < 0) return NULL;
    int count = 0;
    bp_diloco_span *sp = spans_of(spans, bpy_count(&v[0]), &count);
    if (sp) {
        diloco s = {.be = bp_backend_cpu(), .global = bpy_data(&v[1]), .momentum = bpy_data(&v[2]),
                    .delta = bpy_data(&v[3])};
        bp_diloco_outer_step(&s, (bp_diloco_frag){sp, count}, bpy_data(&v[0]), (float)lr, (float)mu,
                             (float)mix);
    }
    free(sp);
    bpy_release(v, 4);
    return sp ? Py_NewRef(Py_None) : NULL;
}

PyMethodDef bpy_diloco_methods[] = {
    {"diloco_average", py_average, METH_VARARGS,
     "diloco_average(w, global, delta, error, error_rs, spans, compress, topk, exchange): the "
     "fragment's pseudo-gradient global - w into delta, averaged over the ranks (collective)."},
    {"diloco_outer_step", py_outer_step, METH_VARARGS,
     "diloco_outer_step(w, global, momentum, delta, spans, lr, mu, mix): the outer Nesterov "
     "step from the average in delta; w = mix w + (1 - mix) global."},
    {NULL, NULL, 0, NULL},
};
