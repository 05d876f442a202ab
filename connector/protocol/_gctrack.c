/* connector.protocol._gctrack: objects the cyclic garbage collector does not traverse.
 *
 * Why (connector/protocol/untracked.py has the details and the rules): pymq makes
 * objects by the hundred thousand that cannot be part of a reference cycle (messages to
 * send, send_async's futures and results, a pull answer's messages), and instances of
 * Python classes are always tracked: the collector traversed every one of them in each
 * pass, ~40 % of a per-message send_async run and 10-30 % of a pull of message objects. CPython leaves
 * tuples and dicts of plain values out of its lists the same way (_PyTuple_MaybeUntrack,
 * _PyDict_MaybeUntrack).
 *
 * Public C API only. An untracked object is still reference counted and freed as usual;
 * the one thing lost is the collection of a reference cycle through it, which is why
 * callers untrack only objects that cannot be in one and track them again the moment
 * they could.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *str_answer, *str_i, *str_body;  /* interned slot names */

static PyObject *
gctrack_untrack(PyObject *module, PyObject *obj)
{
    (void)module;
    if (PyObject_IS_GC(obj) && PyObject_GC_IsTracked(obj)) {
        PyObject_GC_UnTrack(obj);
    }
    Py_RETURN_NONE;
}

static PyObject *
gctrack_track(PyObject *module, PyObject *obj)
{
    (void)module;
    if (PyObject_IS_GC(obj) && !PyObject_GC_IsTracked(obj)) {
        PyObject_GC_Track(obj);
    }
    Py_RETURN_NONE;
}

/* pulled_messages(cls, answer, bodies): for each body, an untracked cls object made by
 * cls.__new__ (not __init__) with its slots _answer, _i and body set as object.__setattr__
 * sets them (so a __setattr__ of cls that tracks its object again is not called). */
static PyObject *
gctrack_pulled_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3 || !PyType_Check(args[0]) || !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "pulled_messages(cls, answer, bodies: list)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *answer = args[1], *bodies = args[2];
    if (type->tp_new == NULL) {
        PyErr_SetString(PyExc_TypeError, "pulled_messages: the class cannot be instantiated");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(bodies);
    PyObject *empty = PyTuple_New(0);
    if (empty == NULL) {
        return NULL;
    }
    PyObject *out = PyList_New(n);  /* its items NULL until set: freed fine on failure */
    if (out == NULL) {
        Py_DECREF(empty);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = type->tp_new(type, empty, NULL);
        if (obj == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(out, i, obj);  /* the list owns it from here */
        PyObject *index = PyLong_FromSsize_t(i);
        if (index == NULL) {
            goto fail;
        }
        int bad = PyObject_GenericSetAttr(obj, str_answer, answer) < 0
                  || PyObject_GenericSetAttr(obj, str_i, index) < 0
                  || PyObject_GenericSetAttr(obj, str_body, PyList_GET_ITEM(bodies, i)) < 0;
        Py_DECREF(index);
        if (bad) {
            goto fail;
        }
        if (PyObject_IS_GC(obj) && PyObject_GC_IsTracked(obj)) {
            PyObject_GC_UnTrack(obj);
        }
    }
    Py_DECREF(empty);
    return out;
fail:
    Py_DECREF(empty);
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef gctrack_methods[] = {
    {"untrack", gctrack_untrack, METH_O,
     "untrack(obj): the cyclic collector no longer traverses obj (no-op if not tracked)."},
    {"track", gctrack_track, METH_O,
     "track(obj): the cyclic collector traverses obj again (no-op if tracked)."},
    {"pulled_messages", (PyCFunction)(void (*)(void))gctrack_pulled_messages, METH_FASTCALL,
     "pulled_messages(cls, answer, bodies): untracked cls objects, one a body, made without "
     "__init__: _answer=answer, _i=index, body=body."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef gctrack_module = {
    PyModuleDef_HEAD_INIT,
    "connector.protocol._gctrack",
    "Objects the cyclic garbage collector does not traverse.",
    -1,
    gctrack_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__gctrack(void)
{
    if (str_answer == NULL) {
        str_answer = PyUnicode_InternFromString("_answer");
        str_i = PyUnicode_InternFromString("_i");
        str_body = PyUnicode_InternFromString("body");
        if (str_answer == NULL || str_i == NULL || str_body == NULL) {
            return NULL;
        }
    }
    return PyModule_Create(&gctrack_module);
}
