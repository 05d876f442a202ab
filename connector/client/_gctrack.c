/* connector.client._gctrack: take an object out of the cyclic garbage collector's
 * lists, or put it back.
 *
 * Why: `send_async` makes two objects a message that the caller keeps (the future, and
 * the result once read). Instances of Python classes are always tracked, and CPython's
 * collector traverses every tracked object in each full pass; with 200,000 futures and
 * results alive those passes took ~40 % of a per-message `send_async` run (the same run
 * with `gc.disable()`: 170-190k msgs/s instead of 100-110k). CPython leaves out tuples
 * and dicts that hold only plain values the same way (_PyTuple_MaybeUntrack,
 * _PyDict_MaybeUntrack); `connector.client.untracked` says when it is safe for ours.
 *
 * Both functions are public C API (PyObject_GC_UnTrack, PyObject_GC_Track,
 * PyObject_GC_IsTracked). An untracked object is still reference counted and freed as
 * usual; the only thing lost is the collection of a reference cycle through it, which is
 * why callers untrack only objects that cannot be in one and track them again the
 * moment they could.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

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

static PyMethodDef gctrack_methods[] = {
    {"untrack", gctrack_untrack, METH_O,
     "untrack(obj): the cyclic collector no longer traverses obj (no-op if not tracked)."},
    {"track", gctrack_track, METH_O,
     "track(obj): the cyclic collector traverses obj again (no-op if tracked)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef gctrack_module = {
    PyModuleDef_HEAD_INIT,
    "connector.client._gctrack",
    "Take objects out of the cyclic garbage collector's lists, or put them back.",
    0,
    gctrack_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__gctrack(void)
{
    return PyModuleDef_Init(&gctrack_module);
}
