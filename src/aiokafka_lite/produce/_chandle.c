/*
 * Optional C accelerator for the producer's per-record handle (RecordFuture in batch.py).
 *
 * Why: a producer loop that enqueues records and waits for all of them at the end keeps
 * one handle per record alive until then. A handle is an instance of a Python __slots__
 * class, which the garbage collector tracks, so every young collection scanned all the
 * live handles and the full collections walked hundreds of thousands of them (measured:
 * -41% CPU per record for enqueue + wait_all with the collector off).
 *
 * A fresh handle cannot be part of a reference cycle: it references its batch, an int
 * and immutable flags, and the batch references a handle only once done-callbacks are
 * registered on it (batch._watchers). So new() hands out handles the collector does not
 * track, and track() puts a handle back under the collector's care the moment it gets
 * its first done-callback (the one way it can join a cycle). Untracking is something
 * CPython does itself for tuples and dicts that hold only atomic values; deallocation
 * of an untracked instance is the ordinary one.
 *
 * The pure-Python twin is in _handles.py (handles stay tracked there).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

static PyTypeObject *HandleType = NULL;
static Py_ssize_t off_batch, off_index, off_callbacks, off_cancelled, off_cancel_message,
    off_blocking;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static int
slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *out)
{
    PyObject *descr = PyDict_GetItemString(type->tp_dict, name); /* borrowed */
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, name);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    if (m->type != T_OBJECT_EX || m->offset <= 0 ||
        m->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
        PyErr_Format(PyExc_TypeError, "%s.%s has an unexpected slot layout", type->tp_name, name);
        return -1;
    }
    *out = m->offset;
    return 0;
}

static PyObject *
setup(PyObject *self, PyObject *arg)
{
    if (!PyType_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "setup() takes the handle class");
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)arg;
    if (t->tp_itemsize != 0 || t->tp_dictoffset != 0 || !PyType_IS_GC(t)) {
        PyErr_SetString(PyExc_TypeError, "the handle class must be a __slots__ class without __dict__");
        return NULL;
    }
    if (slot_offset(t, "_batch", &off_batch) < 0 || slot_offset(t, "_index", &off_index) < 0 ||
        slot_offset(t, "_callbacks", &off_callbacks) < 0 ||
        slot_offset(t, "_cancelled", &off_cancelled) < 0 ||
        slot_offset(t, "_cancel_message", &off_cancel_message) < 0 ||
        slot_offset(t, "_asyncio_future_blocking", &off_blocking) < 0)
        return NULL;
    Py_INCREF(t);
    Py_XSETREF(HandleType, t);
    Py_RETURN_NONE;
}

/* new(cls, batch, index): a pending handle of record ``index`` of ``batch``, untracked.
   ``cls`` is the set-up class or a subclass that adds no slots (the compat layer's). */
static PyObject *
new_handle(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "new() takes 3 arguments (cls, batch, index)");
        return NULL;
    }
    if (HandleType == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_chandle.setup() was not called");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    if ((PyObject *)cls != (PyObject *)HandleType &&
        (!PyType_Check(args[0]) || !PyType_IsSubtype(cls, HandleType) ||
         cls->tp_basicsize != HandleType->tp_basicsize || cls->tp_dictoffset != 0)) {
        PyErr_Format(PyExc_TypeError, "new() needs %s or a subclass without slots of its own",
                     HandleType->tp_name);
        return NULL;
    }
    PyObject *h = cls->tp_alloc(cls, 0);
    if (h == NULL)
        return NULL;
    SLOT(h, off_batch) = Py_NewRef(args[1]);
    SLOT(h, off_index) = Py_NewRef(args[2]);
    SLOT(h, off_callbacks) = Py_NewRef(Py_None);
    SLOT(h, off_cancelled) = Py_NewRef(Py_False);
    SLOT(h, off_cancel_message) = Py_NewRef(Py_None);
    SLOT(h, off_blocking) = Py_NewRef(Py_False);
    PyObject_GC_UnTrack(h);
    return h;
}

/* track(handle): let the collector see the handle again (it is about to reference
   callbacks, and its batch to reference it). Idempotent. */
static PyObject *
track(PyObject *self, PyObject *h)
{
    if (!PyObject_IS_GC(h)) {
        PyErr_SetString(PyExc_TypeError, "track() takes a handle");
        return NULL;
    }
    if (!PyObject_GC_IsTracked(h))
        PyObject_GC_Track(h);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"setup", setup, METH_O, "setup(RecordFuture): check and remember the handle class's slot layout"},
    {"new", (PyCFunction)(void (*)(void))new_handle, METH_FASTCALL,
     "new(cls, batch, index) -> a pending handle the garbage collector does not track"},
    {"track", track, METH_O, "track(handle): put the handle under the garbage collector's care"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef chandle_module = {
    PyModuleDef_HEAD_INIT, "_chandle", "Untracked producer record handles.", -1, module_methods,
};

PyMODINIT_FUNC
PyInit__chandle(void)
{
    return PyModule_Create(&chandle_module);
}
