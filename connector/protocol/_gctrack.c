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
 * Public C API only (pulled_messages reads its class's slot offsets from their member
 * descriptors, as CPython's own slot access does). An untracked object is still reference counted and freed as usual;
 * the one thing lost is the collection of a reference cycle through it, which is why
 * callers untrack only objects that cannot be in one and track them again the moment
 * they could.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* T_OBJECT_EX, READONLY: the slots pulled_messages sets */

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

/* The offset in cls's objects of its __slots__ member ``name`` (an object slot that may be
 * set), -1 with a TypeError (or the AttributeError of a missing name) otherwise. */
static Py_ssize_t
slot_offset(PyTypeObject *type, PyObject *name)
{
    PyObject *descr = PyObject_GetAttr((PyObject *)type, name);
    if (descr == NULL) {
        return -1;
    }
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type == T_OBJECT_EX && !(member->flags & READONLY)) {
            offset = member->offset;
        }
    }
    Py_DECREF(descr);
    if (offset < 0) {
        PyErr_Format(PyExc_TypeError, "pulled_messages: %U is not a slot of %s", name,
                     type->tp_name);
    }
    return offset;
}

/* Store ``value`` (a new reference, stolen) in obj's slot at ``offset``. */
static inline void
set_slot(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject **slot = (PyObject **)((char *)obj + offset);
    Py_XSETREF(*slot, value);
}

/* pulled_messages(cls, answer, data, starts, ends, inflated): for each record i, an
 * untracked cls object made by cls.__new__ (not __init__), its slots set directly (so a
 * __setattr__ of cls that tracks its object again is not called): _answer = answer,
 * _i = i, body = inflated[i] if i is a key of the dict inflated, else data[starts[i]:
 * ends[i]]. Checks: cls a type whose _answer, _i and body are object slots, data bytes,
 * starts and ends lists of as many ints, each slice within data. */
static PyObject *
gctrack_pulled_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6 || !PyType_Check(args[0]) || !PyBytes_Check(args[2]) || !PyList_Check(args[3])
        || !PyList_Check(args[4]) || !PyDict_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "pulled_messages(cls, answer, data: bytes, starts: list, ends: list, "
                        "inflated: dict)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *answer = args[1], *data = args[2], *starts = args[3], *ends = args[4];
    PyObject *inflated = args[5];
    Py_ssize_t n = PyList_GET_SIZE(starts);
    if (PyList_GET_SIZE(ends) != n) {
        PyErr_SetString(PyExc_ValueError, "pulled_messages: starts and ends differ in length");
        return NULL;
    }
    if (type->tp_new == NULL) {
        PyErr_SetString(PyExc_TypeError, "pulled_messages: the class cannot be instantiated");
        return NULL;
    }
    Py_ssize_t at_answer = slot_offset(type, str_answer);
    Py_ssize_t at_i = at_answer < 0 ? -1 : slot_offset(type, str_i);
    Py_ssize_t at_body = at_i < 0 ? -1 : slot_offset(type, str_body);
    if (at_body < 0) {
        return NULL;
    }
    const char *buf = PyBytes_AS_STRING(data);
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    int any_inflated = PyDict_GET_SIZE(inflated) > 0;
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
        Py_ssize_t start = PyLong_AsSsize_t(PyList_GET_ITEM(starts, i));
        Py_ssize_t end = PyLong_AsSsize_t(PyList_GET_ITEM(ends, i));
        if ((start == -1 || end == -1) && PyErr_Occurred()) {
            goto fail;
        }
        if (start < 0 || end < start || end > size) {
            PyErr_Format(PyExc_ValueError, "pulled_messages: record %zd's body [%zd:%zd] is "
                         "outside the %zd bytes", i, start, end, size);
            goto fail;
        }
        PyObject *index = PyLong_FromSsize_t(i);
        if (index == NULL) {
            goto fail;
        }
        PyObject *body = NULL;
        if (any_inflated) {
            body = PyDict_GetItemWithError(inflated, index);  /* borrowed */
            if (body == NULL && PyErr_Occurred()) {
                Py_DECREF(index);
                goto fail;
            }
            Py_XINCREF(body);
        }
        if (body == NULL) {
            body = PyBytes_FromStringAndSize(buf + start, end - start);
            if (body == NULL) {
                Py_DECREF(index);
                goto fail;
            }
        }
        PyObject *obj = type->tp_new(type, empty, NULL);
        if (obj == NULL) {
            Py_DECREF(index);
            Py_DECREF(body);
            goto fail;
        }
        PyList_SET_ITEM(out, i, obj);  /* the list owns it from here */
        Py_INCREF(answer);
        set_slot(obj, at_answer, answer);
        set_slot(obj, at_i, index);
        set_slot(obj, at_body, body);
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
     "pulled_messages(cls, answer, data, starts, ends, inflated): untracked cls objects, one "
     "a record, made without __init__: _answer=answer, _i=index, body=inflated.get(index) "
     "or data[starts[index]:ends[index]]."},
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
