/* The inside of bagpipe's Python extension (bagpipe._C), shared by its files.
 *
 * module.c holds the process's world group (MPI is one per process, so the module
 * keeps it) and the exception type; ops.c the blocking collectives on buffers;
 * worker.c the communication thread that runs DDP's buckets and completes their
 * futures; codec.c and state.c the codecs and the state of the weight algorithms;
 * registry.c the registry of the data-parallel algorithms (parallel/dp/registry.h)
 * and rules.c and diloco.c their rules, as the runtime runs them, on tensors.
 * Every blocking call releases the GIL, so that Python threads (and the
 * communication thread, which takes the GIL only to call back) go on meanwhile. */
#ifndef BAGPIPE_PYTHON_BPY_H
#define BAGPIPE_PYTHON_BPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "bagpipe/comm.h"
#include "bagpipe/compress.h"

/* bagpipe.Error, a RuntimeError whose message is the library's one-line message. */
extern PyObject *bpy_error;

/* The world group, or NULL with bagpipe.Error set when bagpipe.init() has not run. */
bp_comm *bpy_world(void);

/* Raise bagpipe.Error(msg); returns NULL for `return bpy_raise(...)`. */
PyObject *bpy_raise(const char *msg);
/* Raise the failure rc of an operation on c with c's message. */
PyObject *bpy_raise_comm(const bp_comm *c, int rc);

/* A writable, C-contiguous float32 buffer of obj (such as a tensor's .numpy()); 0,
 * or -1 with TypeError set. Release it with PyBuffer_Release. */
int bpy_floats(PyObject *obj, Py_buffer *view);
static inline float *bpy_data(const Py_buffer *v) { return (float *)v->buf; }
static inline size_t bpy_count(const Py_buffer *v) { return (size_t)v->len / sizeof(float); }

/* Float32 views of objs[0..n), each of the first's length, the last `optional` of
 * them left empty (obj NULL) where None; 0, or -1 with an exception set and nothing
 * held (rules.c). bpy_release releases n of them, empty ones too. */
int bpy_views(const char *what, PyObject **objs, Py_buffer *v, int n, int optional);
void bpy_release(Py_buffer *v, int n);

/* A codec as a Python object (codec.c). */
typedef struct bpy_codec {
    PyObject_HEAD
    bp_codec *codec;
} bpy_codec;
extern PyTypeObject bpy_codec_type;
/* The codec of obj, or NULL with TypeError set. */
bp_codec *bpy_codec_of(PyObject *obj);
/* The ring of a bagpipe._C.Ring, or NULL with an exception set. */
bp_ring_lp *bpy_ring_of(PyObject *obj);

extern PyTypeObject bpy_worker_type; /* worker.c */
extern PyTypeObject bpy_ring_type;   /* state.c: lp-decentralized's ring */
extern PyTypeObject bpy_async_type;  /* state.c: async's averaging thread */

/* Stop every communication thread (before MPI is finalized): worker.c. */
void bpy_workers_stop(void);
/* Stop and free every async averaging thread (state.c), before finalize. */
void bpy_asyncs_stop(void);
/* Groups derived from the world that are alive (they must go before finalize). */
extern int bpy_groups;

extern PyMethodDef bpy_ops_methods[];      /* ops.c */
extern PyMethodDef bpy_registry_methods[]; /* registry.c: the algorithms */
extern PyMethodDef bpy_rules_methods[];    /* rules.c: their rules on tensors */
extern PyMethodDef bpy_diloco_methods[];   /* diloco.c: DiLoCo's outer step */
/* "all" or "shift_one"; 0, or -1 with bagpipe.Error set. */
int bpy_peers(const char *name, bp_peers *out);

#endif
