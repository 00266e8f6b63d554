/*
 * Optional C accelerator for aiokafka_lite.wire.records: the per-record hot loops of
 * RecordBatch v2 (record decoding into Record objects, record encoding into a growable
 * buffer). Everything else (batch headers, CRC, compression) stays in Python, where it
 * runs once per batch. The pure-Python twin is _pyimpl.py; both must behave the same,
 * including error types and messages.
 *
 * Record objects are instances of the Python slots dataclass ``Record``; we allocate
 * them with tp_alloc and store straight into the slot offsets taken from the class's
 * member descriptors (checked at setup), which skips the Python-level __init__.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#define V2_HEADER_SIZE 61
#define MIN_RECORD_SIZE 7
#define HKEY_CACHE 4
#define HVAL_CACHE_MAX 64

static PyObject *CorruptRecordError = NULL;
static PyTypeObject *RecordType = NULL;
static PyTypeObject *LastFormType = NULL;
static Py_ssize_t off_offset, off_timestamp, off_key, off_value, off_headers;

/* ------------------------------------------------------------------ varints */

enum { VI_OK = 0, VI_TRUNCATED = -1, VI_TOO_LONG = -2, VI_OVERFLOW = -3 };

/* Zig-zag varint of at most 5 bytes whose raw value must fit 32 bits. */
static inline int
read_varint32(const uint8_t **pp, const uint8_t *end, int64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t raw = 0;
    int i;
    for (i = 0; i < 5; i++) {
        if (p >= end)
            return VI_TRUNCATED;
        uint8_t b = *p++;
        raw |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            if (raw >> 32)
                return VI_OVERFLOW;
            uint32_t r = (uint32_t)raw;
            *out = (int64_t)(int32_t)((r >> 1) ^ (uint32_t)(-(int32_t)(r & 1)));
            *pp = p;
            return VI_OK;
        }
    }
    return VI_TOO_LONG;
}

/* Zig-zag varint of at most 10 bytes whose raw value must fit 64 bits. */
static inline int
read_varint64(const uint8_t **pp, const uint8_t *end, int64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t raw = 0;
    int i;
    for (i = 0; i < 10; i++) {
        if (p >= end)
            return VI_TRUNCATED;
        uint8_t b = *p++;
        if (i == 9 && (b & 0x7F) > 1 && b < 0x80)
            return VI_OVERFLOW;
        raw |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = (int64_t)((raw >> 1) ^ (uint64_t)(-(int64_t)(raw & 1)));
            *pp = p;
            return VI_OK;
        }
    }
    return VI_TOO_LONG;
}

static void
varint_error(Py_ssize_t index, int rc, int is64)
{
    const char *what;
    if (rc == VI_TRUNCATED)
        what = "truncated varint";
    else if (rc == VI_OVERFLOW)
        what = is64 ? "varint overflows int64" : "varint overflows int32";
    else
        what = is64 ? "varint longer than 10 bytes" : "varint longer than 5 bytes";
    PyErr_Format(CorruptRecordError, "record %zd: %s", index, what);
}

static inline uint8_t *
write_varint(uint8_t *p, int64_t value)
{
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline int
varint_size(int64_t value)
{
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* ------------------------------------------------------------------ setup */

static int
slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *out)
{
    PyObject *descr = PyDict_GetItemString(type->tp_dict, name); /* borrowed */
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "Record.%s is not a slot", name);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    if (m->type != T_OBJECT_EX || m->offset <= 0 ||
        m->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
        PyErr_Format(PyExc_TypeError, "Record.%s has an unexpected slot layout", name);
        return -1;
    }
    *out = m->offset;
    return 0;
}

static PyObject *
setup(PyObject *self, PyObject *args)
{
    PyObject *record_type, *error;
    if (!PyArg_ParseTuple(args, "O!O:setup", &PyType_Type, &record_type, &error))
        return NULL;
    PyTypeObject *t = (PyTypeObject *)record_type;
    if (t->tp_itemsize != 0 || t->tp_dictoffset != 0) {
        PyErr_SetString(PyExc_TypeError, "Record must be a __slots__ class without __dict__");
        return NULL;
    }
    if (slot_offset(t, "offset", &off_offset) < 0 || slot_offset(t, "timestamp", &off_timestamp) < 0 ||
        slot_offset(t, "key", &off_key) < 0 || slot_offset(t, "value", &off_value) < 0 ||
        slot_offset(t, "headers", &off_headers) < 0)
        return NULL;
    Py_INCREF(record_type);
    Py_XSETREF(RecordType, t);
    Py_INCREF(error);
    Py_XSETREF(CorruptRecordError, error);
    Py_RETURN_NONE;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* ------------------------------------------------------------------ decode */

static PyObject *
decode_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (RecordType == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_crecords.setup() was not called");
        return NULL;
    }
    if (nargs != 7 && nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "decode_records() takes 7 or 12 arguments");
        return NULL;
    }
    /* The consumer's form (5 more arguments: cls, topic, partition, timestamp type, leader
       epoch): records are built as instances of ``cls``, a tuple subclass without slots
       (the consumer's NamedTuple Record), holding (topic, partition, offset, key, value,
       headers as a tuple, timestamp, timestamp type, leader epoch). What the consumer
       built from the 7-argument form in a Python loop, in one allocation per record. */
    PyTypeObject *form = NULL;
    if (nargs == 12) {
        form = (PyTypeObject *)args[7];
        if (form != LastFormType) {
            if (!PyType_Check(args[7]) || !PyType_IsSubtype(form, &PyTuple_Type) ||
                form->tp_basicsize != PyTuple_Type.tp_basicsize || form->tp_dictoffset != 0 ||
                form->tp_itemsize != PyTuple_Type.tp_itemsize) {
                PyErr_SetString(PyExc_TypeError,
                                "decode_records(): the record class must be a tuple subclass without slots");
                return NULL;
            }
            Py_INCREF(form); /* held, so the address compared above stays this class's */
            Py_XSETREF(LastFormType, form);
        }
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[2]);
    long long count_ll = PyLong_AsLongLong(args[3]);
    long long base_offset = PyLong_AsLongLong(args[4]);
    long long base_ts = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred())
        return NULL;
    int have_lat = args[6] != Py_None;
    long long lat = 0;
    if (have_lat) {
        lat = PyLong_AsLongLong(args[6]);
        if (lat == -1 && PyErr_Occurred())
            return NULL;
    }

    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL, *lat_obj = NULL;
    PyObject *hk_cache[HKEY_CACHE] = {NULL};
    const uint8_t *hk_ptr[HKEY_CACHE] = {NULL};
    int64_t hk_len[HKEY_CACHE] = {0};
    PyObject *hv_cache[HKEY_CACHE] = {NULL};
    PyObject *pair_cache[HKEY_CACHE] = {NULL};
    PyObject *last_ts = NULL; /* consecutive records often share a timestamp */
    int64_t last_ts_value = 0;
    if (start < 0 || stop < start || stop > view.len) {
        PyErr_SetString(PyExc_ValueError, "records region out of range");
        goto done;
    }
    if (count_ll < 0) {
        PyErr_Format(CorruptRecordError, "negative record count %lld", count_ll);
        goto done;
    }
    if (count_ll > (stop - start) / MIN_RECORD_SIZE) {
        PyErr_Format(CorruptRecordError, "record count %lld cannot fit in %zd bytes", count_ll,
                     stop - start);
        goto done;
    }
    Py_ssize_t count = (Py_ssize_t)count_ll;
    if (have_lat && (lat_obj = PyLong_FromLongLong(lat)) == NULL)
        goto done;

    const uint8_t *p = (const uint8_t *)view.buf + start;
    const uint8_t *end = (const uint8_t *)view.buf + stop;
    result = PyList_New(count);
    if (result == NULL)
        goto done;

    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, ts_delta, off_delta, klen, vlen, hcount;
        int rc;
        PyObject *key = NULL, *value = NULL, *headers = NULL, *o_off = NULL, *o_ts = NULL, *rec;

        if (p >= end) {
            PyErr_Format(CorruptRecordError, "record %zd: truncated record", i);
            goto fail;
        }
        if (*p < 0x80) {
            length = (int64_t)((*p >> 1) ^ -(*p & 1));
            p++;
        }
        else if ((rc = read_varint32(&p, end, &length)) != VI_OK) {
            varint_error(i, rc, 0);
            goto fail;
        }
        if (length < MIN_RECORD_SIZE - 1 || length > end - p) {
            PyErr_Format(CorruptRecordError,
                         "record %zd: invalid record length %lld with %zd bytes remaining", i,
                         (long long)length, (Py_ssize_t)(end - p));
            goto fail;
        }
        const uint8_t *rec_end = p + length;
        p++; /* attributes: unused */
        if (*p < 0x80) {
            ts_delta = (int64_t)((*p >> 1) ^ -(*p & 1));
            p++;
        }
        else if ((rc = read_varint64(&p, end, &ts_delta)) != VI_OK) {
            varint_error(i, rc, 1);
            goto fail;
        }
        if (p >= rec_end) {
            PyErr_Format(CorruptRecordError, "record %zd: truncated record", i);
            goto fail;
        }
        if (*p < 0x80) {
            off_delta = (int64_t)((*p >> 1) ^ -(*p & 1));
            p++;
        }
        else if ((rc = read_varint32(&p, end, &off_delta)) != VI_OK) {
            varint_error(i, rc, 0);
            goto fail;
        }
        /* key */
        if (p >= rec_end) {
            PyErr_Format(CorruptRecordError, "record %zd: truncated record", i);
            goto fail;
        }
        if (*p < 0x80) {
            klen = (int64_t)((*p >> 1) ^ -(*p & 1));
            p++;
        }
        else if ((rc = read_varint32(&p, end, &klen)) != VI_OK) {
            varint_error(i, rc, 0);
            goto fail;
        }
        if (klen < 0) {
            /* Any negative length is a null key, as Kafka's own reader has it. */
        }
        else if (klen > rec_end - p) {
            PyErr_Format(CorruptRecordError, "record %zd: key length %lld exceeds record", i,
                         (long long)klen);
            goto fail;
        }
        const uint8_t *kptr = p;
        if (klen > 0)
            p += klen;
        /* value */
        if (p >= rec_end) {
            PyErr_Format(CorruptRecordError, "record %zd: truncated record", i);
            goto fail;
        }
        if (*p < 0x80) {
            vlen = (int64_t)((*p >> 1) ^ -(*p & 1));
            p++;
        }
        else if ((rc = read_varint32(&p, end, &vlen)) != VI_OK) {
            varint_error(i, rc, 0);
            goto fail;
        }
        if (vlen < 0) {
            /* Any negative length is a null value (Kafka's reader). */
        }
        else if (vlen > rec_end - p) {
            PyErr_Format(CorruptRecordError, "record %zd: value length %lld exceeds record", i,
                         (long long)vlen);
            goto fail;
        }
        const uint8_t *vptr = p;
        if (vlen > 0)
            p += vlen;
        /* headers */
        if (p >= rec_end) {
            PyErr_Format(CorruptRecordError, "record %zd: truncated record", i);
            goto fail;
        }
        if (*p < 0x80) {
            hcount = (int64_t)((*p >> 1) ^ -(*p & 1));
            p++;
        }
        else if ((rc = read_varint32(&p, end, &hcount)) != VI_OK) {
            varint_error(i, rc, 0);
            goto fail;
        }
        if (hcount < 0 || hcount > (rec_end - p) / 2) {
            PyErr_Format(CorruptRecordError, "record %zd: invalid header count %lld", i,
                         (long long)hcount);
            goto fail;
        }
        headers = form != NULL ? PyTuple_New((Py_ssize_t)hcount) : PyList_New((Py_ssize_t)hcount);
        if (headers == NULL)
            goto fail;
        for (Py_ssize_t h = 0; h < (Py_ssize_t)hcount; h++) {
            int64_t hklen, hvlen;
            if ((rc = read_varint32(&p, end, &hklen)) != VI_OK) {
                varint_error(i, rc, 0);
                goto fail;
            }
            if (hklen < 0 || hklen > rec_end - p) {
                PyErr_Format(CorruptRecordError, "record %zd: invalid header key length %lld", i,
                             (long long)hklen);
                goto fail;
            }
            /* Header keys repeat across records: reuse the str decoded for the same
               bytes at the same header position in an earlier record. */
            PyObject *hk;
            if (h < HKEY_CACHE && hk_cache[h] != NULL && hk_len[h] == hklen &&
                memcmp(hk_ptr[h], p, (size_t)hklen) == 0) {
                hk = Py_NewRef(hk_cache[h]);
            }
            else {
                hk = PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)hklen, "surrogateescape");
                if (hk == NULL)
                    goto fail;
                if (h < HKEY_CACHE) {
                    Py_XSETREF(hk_cache[h], Py_NewRef(hk));
                    hk_ptr[h] = p;
                    hk_len[h] = hklen;
                }
            }
            p += hklen;
            if ((rc = read_varint32(&p, end, &hvlen)) != VI_OK) {
                Py_DECREF(hk);
                varint_error(i, rc, 0);
                goto fail;
            }
            PyObject *hv;
            if (hvlen < 0) {
                hv = Py_NewRef(Py_None); /* any negative length: null (Kafka's reader) */
            }
            else {
                if (hvlen > rec_end - p) {
                    Py_DECREF(hk);
                    PyErr_Format(CorruptRecordError,
                                 "record %zd: header value length %lld exceeds record", i,
                                 (long long)hvlen);
                    goto fail;
                }
                /* Short header values (content types, schema ids) also tend to repeat;
                   bytes are immutable, so sharing one object is invisible to users. */
                if (h < HKEY_CACHE && hvlen <= HVAL_CACHE_MAX && hv_cache[h] != NULL &&
                    PyBytes_GET_SIZE(hv_cache[h]) == hvlen &&
                    memcmp(PyBytes_AS_STRING(hv_cache[h]), p, (size_t)hvlen) == 0) {
                    hv = Py_NewRef(hv_cache[h]);
                }
                else {
                    hv = PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)hvlen);
                    if (hv == NULL) {
                        Py_DECREF(hk);
                        goto fail;
                    }
                    if (h < HKEY_CACHE && hvlen <= HVAL_CACHE_MAX)
                        Py_XSETREF(hv_cache[h], Py_NewRef(hv));
                }
                p += hvlen;
            }
            PyObject *pair;
            if (h < HKEY_CACHE && pair_cache[h] != NULL && PyTuple_GET_ITEM(pair_cache[h], 0) == hk &&
                PyTuple_GET_ITEM(pair_cache[h], 1) == hv) {
                /* Same (cached) key and value objects as the previous record: share the
                   immutable pair too. */
                Py_DECREF(hk);
                Py_DECREF(hv);
                pair = Py_NewRef(pair_cache[h]);
            }
            else {
                pair = PyTuple_New(2);
                if (pair == NULL) {
                    Py_DECREF(hk);
                    Py_DECREF(hv);
                    goto fail;
                }
                PyTuple_SET_ITEM(pair, 0, hk);
                PyTuple_SET_ITEM(pair, 1, hv);
                /* (str, bytes|None) can never be part of a cycle; CPython would untrack
                   it at the next collection anyway, doing it now saves the GC that work. */
                PyObject_GC_UnTrack(pair);
                if (h < HKEY_CACHE)
                    Py_XSETREF(pair_cache[h], Py_NewRef(pair));
            }
            if (form != NULL)
                PyTuple_SET_ITEM(headers, h, pair);
            else
                PyList_SET_ITEM(headers, h, pair);
        }
        if (form != NULL && hcount > 0)
            PyObject_GC_UnTrack(headers); /* holds only untracked (str, bytes|None) pairs */
        if (p != rec_end) {
            Py_ssize_t diff = (Py_ssize_t)(p - rec_end);
            PyErr_Format(CorruptRecordError, "record %zd: record length mismatch (%s%zd bytes)", i,
                         diff >= 0 ? "+" : "", diff);
            goto fail;
        }
        if (klen >= 0) {
            if ((key = PyBytes_FromStringAndSize((const char *)kptr, (Py_ssize_t)klen)) == NULL)
                goto fail;
        }
        else
            key = Py_NewRef(Py_None);
        if (vlen >= 0) {
            if ((value = PyBytes_FromStringAndSize((const char *)vptr, (Py_ssize_t)vlen)) == NULL)
                goto fail;
        }
        else
            value = Py_NewRef(Py_None);
        o_off = PyLong_FromLongLong((long long)((uint64_t)base_offset + (uint64_t)off_delta));
        if (o_off == NULL)
            goto fail;
        if (have_lat)
            o_ts = Py_NewRef(lat_obj);
        else {
            int64_t ts = (int64_t)((uint64_t)base_ts + (uint64_t)ts_delta);
            if (last_ts != NULL && ts == last_ts_value)
                o_ts = Py_NewRef(last_ts);
            else {
                if ((o_ts = PyLong_FromLongLong((long long)ts)) == NULL)
                    goto fail;
                Py_XSETREF(last_ts, Py_NewRef(o_ts));
                last_ts_value = ts;
            }
        }
        if (form != NULL) {
            rec = form->tp_alloc(form, 9);
            if (rec == NULL)
                goto fail;
            PyObject **item = ((PyTupleObject *)rec)->ob_item;
            item[0] = Py_NewRef(args[8]);
            item[1] = Py_NewRef(args[9]);
            item[2] = o_off;
            item[3] = key;
            item[4] = value;
            item[5] = headers;
            item[6] = o_ts;
            item[7] = Py_NewRef(args[10]);
            item[8] = Py_NewRef(args[11]);
            /* Nothing it references can reference it back (str, ints, bytes or None,
               untracked header tuples, the timestamp type), so it can never be part of a
               cycle: spare the collector from scanning every buffered record. */
            PyObject_GC_UnTrack(rec);
            PyList_SET_ITEM(result, i, rec);
            continue;
        }
        rec = RecordType->tp_alloc(RecordType, 0);
        if (rec == NULL)
            goto fail;
        SLOT(rec, off_offset) = o_off;
        SLOT(rec, off_timestamp) = o_ts;
        SLOT(rec, off_key) = key;
        SLOT(rec, off_value) = value;
        SLOT(rec, off_headers) = headers;
        PyList_SET_ITEM(result, i, rec);
        continue;
    fail:
        Py_XDECREF(key);
        Py_XDECREF(value);
        Py_XDECREF(headers);
        Py_XDECREF(o_off);
        Py_XDECREF(o_ts);
        Py_CLEAR(result);
        goto done;
    }
    if (p != end) {
        PyErr_Format(CorruptRecordError, "%zd bytes left after %zd records", (Py_ssize_t)(end - p), count);
        Py_CLEAR(result);
    }
done:
    for (int c = 0; c < HKEY_CACHE; c++) {
        Py_XDECREF(hk_cache[c]);
        Py_XDECREF(hv_cache[c]);
        Py_XDECREF(pair_cache[c]);
    }
    Py_XDECREF(last_ts);
    Py_XDECREF(lat_obj);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ scan */

/* Reads one varint field of a record, raising CorruptRecordError on failure, with the
   same one-byte fast path and messages as decode_records. */
#define SCAN_VARINT(reader, is64, out)                                                      \
    do {                                                                                    \
        if (*p < 0x80) {                                                                    \
            (out) = (int64_t)((*p >> 1) ^ -(*p & 1));                                       \
            p++;                                                                            \
        }                                                                                   \
        else if ((rc = reader(&p, end, &(out))) != VI_OK) {                                 \
            varint_error(i, rc, (is64));                                                    \
            goto fail;                                                                      \
        }                                                                                   \
    } while (0)

#define SCAN_NOT_AT(limit)                                                                  \
    do {                                                                                    \
        if (p >= (limit)) {                                                                 \
            PyErr_Format(CorruptRecordError, "record %zd: truncated record", i);            \
            goto fail;                                                                      \
        }                                                                                   \
    } while (0)

/* Walks the records region like decode_records (same checks, same errors) without
   building any object: (min timestamp delta, max timestamp delta, indexes of records
   without a key, whether every offset delta equals the record's index). A broker
   validating a produced batch needs exactly this. */
static PyObject *
scan_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (CorruptRecordError == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_crecords.setup() was not called");
        return NULL;
    }
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "scan_records() takes 4 arguments");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[2]);
    long long count_ll = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL, *keyless = NULL;
    int64_t min_ts = 0, max_ts = 0;
    int sequential = 1;
    Py_ssize_t i = 0;
    int rc;
    if (start < 0 || stop < start || stop > view.len) {
        PyErr_SetString(PyExc_ValueError, "records region out of range");
        goto done;
    }
    if (count_ll < 0) {
        PyErr_Format(CorruptRecordError, "negative record count %lld", count_ll);
        goto done;
    }
    if (count_ll > (stop - start) / MIN_RECORD_SIZE) {
        PyErr_Format(CorruptRecordError, "record count %lld cannot fit in %zd bytes", count_ll,
                     stop - start);
        goto done;
    }
    if ((keyless = PyList_New(0)) == NULL)
        goto done;
    Py_ssize_t count = (Py_ssize_t)count_ll;
    const uint8_t *p = (const uint8_t *)view.buf + start;
    const uint8_t *end = (const uint8_t *)view.buf + stop;
    for (i = 0; i < count; i++) {
        int64_t length, ts_delta, off_delta, klen, vlen, hcount;
        SCAN_NOT_AT(end);
        SCAN_VARINT(read_varint32, 0, length);
        if (length < MIN_RECORD_SIZE - 1 || length > end - p) {
            PyErr_Format(CorruptRecordError,
                         "record %zd: invalid record length %lld with %zd bytes remaining", i,
                         (long long)length, (Py_ssize_t)(end - p));
            goto fail;
        }
        const uint8_t *rec_end = p + length;
        p++; /* attributes: unused */
        SCAN_VARINT(read_varint64, 1, ts_delta);
        SCAN_NOT_AT(rec_end);
        SCAN_VARINT(read_varint32, 0, off_delta);
        SCAN_NOT_AT(rec_end);
        SCAN_VARINT(read_varint32, 0, klen);
        if (klen < 0) { /* any negative length: a null key */
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(keyless, index) < 0) {
                Py_XDECREF(index);
                goto fail;
            }
            Py_DECREF(index);
        }
        else if (klen > rec_end - p) {
            PyErr_Format(CorruptRecordError, "record %zd: key length %lld exceeds record", i,
                         (long long)klen);
            goto fail;
        }
        else
            p += klen;
        SCAN_NOT_AT(rec_end);
        SCAN_VARINT(read_varint32, 0, vlen);
        if (vlen < 0) {
            /* Any negative length is a null value (Kafka's reader). */
        }
        else if (vlen > rec_end - p) {
            PyErr_Format(CorruptRecordError, "record %zd: value length %lld exceeds record", i,
                         (long long)vlen);
            goto fail;
        }
        else
            p += vlen;
        SCAN_NOT_AT(rec_end);
        SCAN_VARINT(read_varint32, 0, hcount);
        if (hcount < 0 || hcount > (rec_end - p) / 2) {
            PyErr_Format(CorruptRecordError, "record %zd: invalid header count %lld", i,
                         (long long)hcount);
            goto fail;
        }
        for (int64_t h = 0; h < hcount; h++) {
            int64_t hklen, hvlen;
            if ((rc = read_varint32(&p, end, &hklen)) != VI_OK) {
                varint_error(i, rc, 0);
                goto fail;
            }
            if (hklen < 0 || hklen > rec_end - p) {
                PyErr_Format(CorruptRecordError, "record %zd: invalid header key length %lld", i,
                             (long long)hklen);
                goto fail;
            }
            p += hklen;
            if ((rc = read_varint32(&p, end, &hvlen)) != VI_OK) {
                varint_error(i, rc, 0);
                goto fail;
            }
            if (hvlen < 0) {
                /* a null header value */
            }
            else if (hvlen > rec_end - p) {
                PyErr_Format(CorruptRecordError, "record %zd: header value length %lld exceeds record",
                             i, (long long)hvlen);
                goto fail;
            }
            else
                p += hvlen;
        }
        if (p != rec_end) {
            Py_ssize_t diff = (Py_ssize_t)(p - rec_end);
            PyErr_Format(CorruptRecordError, "record %zd: record length mismatch (%s%zd bytes)", i,
                         diff >= 0 ? "+" : "", diff);
            goto fail;
        }
        if (i == 0 || ts_delta < min_ts)
            min_ts = ts_delta;
        if (i == 0 || ts_delta > max_ts)
            max_ts = ts_delta;
        if (off_delta != i)
            sequential = 0;
    }
    if (p != end) {
        PyErr_Format(CorruptRecordError, "%zd bytes left after %zd records", (Py_ssize_t)(end - p), count);
        goto done;
    }
    result = Py_BuildValue("LLOO", (long long)min_ts, (long long)max_ts, keyless,
                           sequential ? Py_True : Py_False);
    goto done;
fail:
    Py_CLEAR(result);
done:
    Py_XDECREF(keyless);
    PyBuffer_Release(&view);
    return result;
}

#undef SCAN_VARINT
#undef SCAN_NOT_AT

/* ------------------------------------------------------------------ writer */

typedef struct {
    PyObject_HEAD
    uint8_t *buf;
    Py_ssize_t len;
    Py_ssize_t cap;
    Py_ssize_t count;
    int64_t first_ts;
    int64_t max_ts;
    Py_ssize_t max_batch_size;
    Py_ssize_t exports; /* live buffer views: the storage must not move meanwhile */
    /* The list add() appends each record's timestamp to (the producer batch's), or NULL.
       Not visited by the collector: it holds ints only, so it can be in no cycle. */
    PyObject *timestamps;
} WriterObject;

static int
writer_reserve(WriterObject *self, Py_ssize_t extra)
{
    if (extra > PY_SSIZE_T_MAX - self->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = self->len + extra;
    if (need <= self->cap)
        return 0;
    if (self->exports > 0) {
        PyErr_SetString(PyExc_BufferError, "cannot append while the records buffer is exported");
        return -1;
    }
    Py_ssize_t cap = self->cap ? self->cap : 1024;
    while (cap < need) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    uint8_t *nb = PyMem_Realloc(self->buf, (size_t)cap);
    if (nb == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->buf = nb;
    self->cap = cap;
    return 0;
}

static void
writer_dealloc(WriterObject *self)
{
    PyMem_Free(self->buf);
    self->buf = NULL;
    Py_CLEAR(self->timestamps);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
writer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    WriterObject *self = (WriterObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->first_ts = -1;
    self->max_ts = -1;
    return (PyObject *)self;
}

static PyObject *
writer_core_init(WriterObject *self, PyObject *arg)
{
    Py_ssize_t max_size = PyLong_AsSsize_t(arg);
    if (max_size == -1 && PyErr_Occurred())
        return NULL;
    if (self->exports > 0) {
        PyErr_SetString(PyExc_BufferError, "cannot reset while the records buffer is exported");
        return NULL;
    }
    self->max_batch_size = max_size;
    Py_CLEAR(self->timestamps); /* as the pure-Python writer's reset: add() needs a new list */
    self->len = 0;
    self->count = 0;
    self->first_ts = -1;
    self->max_ts = -1;
    Py_RETURN_NONE;
}

/* A field payload: either None (-1) or a contiguous buffer. bytes take a fast path. */
typedef struct {
    const char *ptr;
    Py_ssize_t len; /* -1 for None */
    Py_buffer view;
    int has_view;
    PyObject *owned; /* temporary object to release (e.g. encoded header key) */
} Field;

static int
field_get(PyObject *obj, Field *f, const char *what)
{
    f->has_view = 0;
    f->owned = NULL;
    if (obj == Py_None) {
        f->ptr = NULL;
        f->len = -1;
        return 0;
    }
    if (PyBytes_CheckExact(obj)) {
        f->ptr = PyBytes_AS_STRING(obj);
        f->len = PyBytes_GET_SIZE(obj);
    }
    else {
        if (PyObject_GetBuffer(obj, &f->view, PyBUF_SIMPLE) < 0)
            return -1;
        f->has_view = 1;
        f->ptr = f->view.buf;
        f->len = f->view.len;
    }
    if (f->len > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s of %zd bytes is too large", what, f->len);
        return -1;
    }
    return 0;
}

static int
field_get_key(PyObject *obj, Field *f)
{
    if (PyUnicode_Check(obj)) {
        f->has_view = 0;
        f->owned = NULL;
        f->ptr = PyUnicode_AsUTF8AndSize(obj, &f->len);
        if (f->ptr == NULL) {
            /* Lone surrogates (e.g. from a surrogateescape-decoded key): encode them back. */
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
                return -1;
            PyErr_Clear();
            f->owned = PyUnicode_AsEncodedString(obj, "utf-8", "surrogateescape");
            if (f->owned == NULL)
                return -1;
            f->ptr = PyBytes_AS_STRING(f->owned);
            f->len = PyBytes_GET_SIZE(f->owned);
        }
        if (f->len > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "header key of %zd bytes is too large", f->len);
            return -1;
        }
        return 0;
    }
    if (obj == Py_None || !PyObject_CheckBuffer(obj)) {
        PyErr_Format(PyExc_TypeError, "header key must be str or bytes, not %.100s", Py_TYPE(obj)->tp_name);
        f->has_view = 0;
        f->owned = NULL;
        return -1;
    }
    return field_get(obj, f, "header key");
}

static void
field_release(Field *f)
{
    if (f->has_view) {
        PyBuffer_Release(&f->view);
        f->has_view = 0;
    }
    Py_CLEAR(f->owned);
}

static inline void
put_field(WriterObject *self, Py_ssize_t *pos, const Field *f)
{
    uint8_t *p = write_varint(self->buf + *pos, (int64_t)f->len);
    if (f->len > 0) {
        memcpy(p, f->ptr, (size_t)f->len);
        p += f->len;
    }
    *pos = p - self->buf;
}

static const char *const append_kwlist[] = {"timestamp", "key", "value", "headers", NULL};

static PyObject *writer_do_append(WriterObject *self, PyObject *const *argv);

static PyObject *
writer_append(WriterObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *argv[4] = {NULL, NULL, NULL, NULL};
    if (nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "append() takes at most 4 arguments");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        argv[i] = args[i];
    if (kwnames != NULL) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t k = 0; k < nk; k++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, k);
            int j;
            for (j = 0; j < 4; j++)
                if (PyUnicode_CompareWithASCIIString(name, append_kwlist[j]) == 0)
                    break;
            if (j == 4 || argv[j] != NULL) {
                PyErr_Format(PyExc_TypeError, "append() got an unexpected or repeated argument '%U'", name);
                return NULL;
            }
            argv[j] = args[nargs + k];
        }
    }
    if (argv[0] == NULL || argv[1] == NULL || argv[2] == NULL) {
        PyErr_SetString(PyExc_TypeError, "append() requires timestamp, key and value");
        return NULL;
    }
    return writer_do_append(self, argv);
}

/* Append one record: Py_True, Py_False when it would push the batch past its limit, NULL
   on error. argv: timestamp, key, value, headers (NULL for none). */
static PyObject *
writer_do_append(WriterObject *self, PyObject *const *argv)
{
    long long ts = PyLong_AsLongLong(argv[0]);
    if (ts == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "timestamp %R does not fit in int64", argv[0]);
        }
        return NULL;
    }
    int64_t first = self->count == 0 ? (int64_t)ts : self->first_ts;
    int64_t delta;
    if (__builtin_sub_overflow((int64_t)ts, first, &delta)) {
        PyErr_Format(PyExc_OverflowError, "timestamp delta %lld - %lld does not fit in int64", ts,
                     (long long)first);
        return NULL;
    }
    if (self->count >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many records in one batch");
        return NULL;
    }

    Field key = {NULL, -1, {0}, 0, NULL}, value = {NULL, -1, {0}, 0, NULL};
    Field hstack[8];
    Field *hf = hstack;
    Py_ssize_t nh = 0, got = 0;
    PyObject *hseq = NULL;
    PyObject *result = NULL;

    if (field_get(argv[1], &key, "key") < 0)
        goto done;
    if (field_get(argv[2], &value, "value") < 0)
        goto done;

    if (argv[3] != NULL) {
        hseq = PySequence_Fast(argv[3], "headers must be iterable");
        if (hseq == NULL)
            goto done;
        nh = PySequence_Fast_GET_SIZE(hseq);
        if (nh > 4) { /* hstack holds 4 (key, value) pairs */
            hf = PyMem_New(Field, (size_t)nh * 2);
            if (hf == NULL) {
                PyErr_NoMemory();
                goto done;
            }
        }
    }
    /* Body size: attributes + ts delta + offset delta + key + value + headers. */
    Py_ssize_t body = 1 + varint_size(delta) + varint_size((int64_t)self->count);
    body += key.len < 0 ? 1 : varint_size(key.len) + key.len;
    body += value.len < 0 ? 1 : varint_size(value.len) + value.len;
    body += varint_size(nh);
    for (Py_ssize_t h = 0; h < nh; h++) {
        PyObject *item = PySequence_Fast_GET_ITEM(hseq, h);
        PyObject *hk, *hv;
        if (PyTuple_CheckExact(item) && PyTuple_GET_SIZE(item) == 2) {
            hk = PyTuple_GET_ITEM(item, 0);
            hv = PyTuple_GET_ITEM(item, 1);
            Py_INCREF(hk);
            Py_INCREF(hv);
        }
        else {
            PyObject *pair = PySequence_Fast(item, "header must be a (key, value) pair");
            if (pair == NULL)
                goto done;
            if (PySequence_Fast_GET_SIZE(pair) != 2) {
                Py_DECREF(pair);
                PyErr_SetString(PyExc_ValueError, "header must be a (key, value) pair");
                goto done;
            }
            hk = Py_NewRef(PySequence_Fast_GET_ITEM(pair, 0));
            hv = Py_NewRef(PySequence_Fast_GET_ITEM(pair, 1));
            Py_DECREF(pair);
        }
        int rc = field_get_key(hk, &hf[2 * h]);
        Py_DECREF(hk);
        if (rc < 0) {
            field_release(&hf[2 * h]);
            Py_DECREF(hv);
            goto done;
        }
        rc = field_get(hv, &hf[2 * h + 1], "header value");
        Py_DECREF(hv);
        if (rc < 0) {
            field_release(&hf[2 * h]);
            field_release(&hf[2 * h + 1]);
            goto done;
        }
        got = h + 1;
        body += varint_size(hf[2 * h].len) + hf[2 * h].len;
        body += hf[2 * h + 1].len < 0 ? 1 : varint_size(hf[2 * h + 1].len) + hf[2 * h + 1].len;
    }
    if (body > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "record of %zd bytes is too large", body);
        goto done;
    }
    Py_ssize_t total = varint_size(body) + body;
    if (self->count > 0 && V2_HEADER_SIZE + self->len + total > self->max_batch_size) {
        result = Py_NewRef(Py_False);
        goto done;
    }
    if (writer_reserve(self, total) < 0)
        goto done;
    Py_ssize_t pos = self->len;
    uint8_t *p = write_varint(self->buf + pos, body);
    *p++ = 0; /* attributes */
    p = write_varint(p, delta);
    p = write_varint(p, (int64_t)self->count);
    pos = p - self->buf;
    put_field(self, &pos, &key);
    put_field(self, &pos, &value);
    p = write_varint(self->buf + pos, nh);
    pos = p - self->buf;
    for (Py_ssize_t h = 0; h < nh; h++) {
        put_field(self, &pos, &hf[2 * h]);
        put_field(self, &pos, &hf[2 * h + 1]);
    }
    self->len = pos;
    if (self->count == 0) {
        self->first_ts = ts;
        self->max_ts = ts;
    }
    else if (ts > self->max_ts)
        self->max_ts = ts;
    self->count++;
    result = Py_NewRef(Py_True);
done:
    for (Py_ssize_t h = 0; h < got; h++) {
        field_release(&hf[2 * h]);
        field_release(&hf[2 * h + 1]);
    }
    if (hf != hstack)
        PyMem_Free(hf);
    Py_XDECREF(hseq);
    field_release(&key);
    field_release(&value);
    return result;
}

/* The producer's per-record path: append, note the timestamp in the tracked list, and
   return the record's index in the batch, or -1 when the batch is full. One C call in
   place of append() plus the list append and len() in Python. */
static PyObject *
writer_add(WriterObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "add() takes exactly 4 arguments (timestamp, key, value, headers)");
        return NULL;
    }
    if (self->timestamps == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "add() needs track_timestamps(list) first");
        return NULL;
    }
    PyObject *done = writer_do_append(self, args);
    if (done == NULL)
        return NULL;
    if (done == Py_False) {
        Py_DECREF(done);
        return PyLong_FromLong(-1);
    }
    Py_DECREF(done);
    if (PyList_Append(self->timestamps, args[0]) < 0)
        return NULL;
    return PyLong_FromSsize_t(self->count - 1);
}

static PyObject *
writer_track_timestamps(WriterObject *self, PyObject *list)
{
    if (!PyList_CheckExact(list)) {
        PyErr_SetString(PyExc_TypeError, "track_timestamps() takes a list");
        return NULL;
    }
    Py_XSETREF(self->timestamps, Py_NewRef(list));
    Py_RETURN_NONE;
}

static PyObject *
writer_records_bytes(WriterObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyBytes_FromStringAndSize((const char *)self->buf, self->len);
}

static PyObject *
writer_records_view(WriterObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyMemoryView_FromObject((PyObject *)self);
}

static int
writer_getbuffer(WriterObject *self, Py_buffer *view, int flags)
{
    static char empty[1] = {0};
    if (PyBuffer_FillInfo(view, (PyObject *)self, self->buf ? (void *)self->buf : (void *)empty,
                          self->len, 1, flags) < 0)
        return -1;
    self->exports++;
    return 0;
}

static void
writer_releasebuffer(WriterObject *self, Py_buffer *view)
{
    self->exports--;
}

static PyBufferProcs writer_as_buffer = {
    (getbufferproc)writer_getbuffer,
    (releasebufferproc)writer_releasebuffer,
};

static PyObject *
writer_get_count(WriterObject *self, void *c)
{
    return PyLong_FromSsize_t(self->count);
}

static PyObject *
writer_get_first_ts(WriterObject *self, void *c)
{
    return PyLong_FromLongLong(self->first_ts);
}

static PyObject *
writer_get_max_ts(WriterObject *self, void *c)
{
    return PyLong_FromLongLong(self->max_ts);
}

static PyObject *
writer_get_size(WriterObject *self, void *c)
{
    return PyLong_FromSsize_t(self->len);
}

static PyObject *
writer_get_max_batch_size(WriterObject *self, void *c)
{
    return PyLong_FromSsize_t(self->max_batch_size);
}

static PyMethodDef writer_methods[] = {
    {"_core_init", (PyCFunction)writer_core_init, METH_O, "Reset the writer with a batch size limit."},
    {"append", (PyCFunction)(void (*)(void))writer_append, METH_FASTCALL | METH_KEYWORDS,
     "append(timestamp, key, value, headers=()) -> bool"},
    {"add", (PyCFunction)(void (*)(void))writer_add, METH_FASTCALL,
     "add(timestamp, key, value, headers) -> int: append, note the timestamp in the tracked list, "
     "return the record's index (-1: batch full)"},
    {"track_timestamps", (PyCFunction)writer_track_timestamps, METH_O,
     "The list add() appends each record's timestamp to."},
    {"records_bytes", (PyCFunction)writer_records_bytes, METH_NOARGS, "The encoded records region."},
    {"records_view", (PyCFunction)writer_records_view, METH_NOARGS,
     "Read-only zero-copy view of the records region (blocks appends that would grow it)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef writer_getset[] = {
    {"record_count", (getter)writer_get_count, NULL, "Number of records appended so far.", NULL},
    {"first_timestamp", (getter)writer_get_first_ts, NULL, "Timestamp of the first record.", NULL},
    {"max_timestamp", (getter)writer_get_max_ts, NULL, "Largest record timestamp.", NULL},
    {"records_size", (getter)writer_get_size, NULL, "Encoded size of the records region.", NULL},
    {"max_batch_size", (getter)writer_get_max_batch_size, NULL, "Size limit used by append().", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "aiokafka_lite.wire.records._crecords.RecordsWriter",
    .tp_basicsize = sizeof(WriterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Incremental encoder of a v2 batch's records region.",
    .tp_new = writer_new,
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_methods = writer_methods,
    .tp_getset = writer_getset,
    .tp_as_buffer = &writer_as_buffer,
};

/* ------------------------------------------------------------------ module */

/* MurmurHash2 (32-bit, seed 0x9747b28c) as the Java client's Utils.murmur2 computes it,
 * as an unsigned value. The default partitioner hashes every keyed record with it, so it
 * belongs with the other per-record hot loops. */
static uint32_t
murmur2_hash(const unsigned char *data, Py_ssize_t length)
{
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t words = length >> 2;
    for (Py_ssize_t i = 0; i < words; i++) {
        const unsigned char *p = data + 4 * i;
        uint32_t k = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *tail = data + (length & ~(Py_ssize_t)3);
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* murmur2_u32(data) -> int: the hash of any buffer, unsigned. */
static PyObject *
murmur2_u32(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t h = murmur2_hash((const unsigned char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong((unsigned long)h);
}

/* group_by_key_partition(keys, count) -> (order, ends): the default partitioner's
 * partition of each key ((murmur2 & 0x7fffffff) % count), as a stable grouping: ``order``
 * lists the indexes of ``keys`` partition by partition (input order within one), and
 * partition p's indexes are order[ends[p-1]:ends[p]]. A bulk append then fills each
 * partition's batch in one run instead of hopping between partitions record by record.
 * ``keys`` is a list of bytes (anything else is a TypeError: the caller checks first). */
static PyObject *
group_by_key_partition(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "group_by_key_partition(keys: list[bytes], count: int)");
        return NULL;
    }
    PyObject *keys = args[0];
    long count = PyLong_AsLong(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    if (count <= 0) {
        PyErr_SetString(PyExc_ValueError, "partition count must be positive");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys);
    uint32_t *parts = PyMem_Malloc(sizeof(uint32_t) * (n ? n : 1));
    Py_ssize_t *next = PyMem_Calloc((size_t)count, sizeof(Py_ssize_t));
    PyObject *order = NULL, *ends = NULL, *out = NULL;
    if (parts == NULL || next == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        if (!PyBytes_Check(key)) {
            PyErr_Format(PyExc_TypeError, "key %zd is %.100s, not bytes", i, Py_TYPE(key)->tp_name);
            goto done;
        }
        uint32_t h = murmur2_hash((const unsigned char *)PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key));
        parts[i] = (h & 0x7fffffffu) % (uint32_t)count;
        next[parts[i]]++;
    }
    ends = PyList_New(count);
    order = PyList_New(n);
    if (ends == NULL || order == NULL)
        goto done;
    Py_ssize_t total = 0;
    for (long p = 0; p < count; p++) {
        Py_ssize_t size = next[p];
        next[p] = total; /* now the next free slot of partition p */
        total += size;
        PyObject *end = PyLong_FromSsize_t(total);
        if (end == NULL)
            goto done;
        PyList_SET_ITEM(ends, p, end);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *index = PyLong_FromSsize_t(i);
        if (index == NULL)
            goto done;
        PyList_SET_ITEM(order, next[parts[i]]++, index);
    }
    out = PyTuple_Pack(2, order, ends);
done:
    PyMem_Free(parts);
    PyMem_Free(next);
    Py_XDECREF(order);
    Py_XDECREF(ends);
    return out;
}

static PyMethodDef module_methods[] = {
    {"murmur2_u32", murmur2_u32, METH_O, "murmur2_u32(data) -> Java's murmur2 hash, unsigned"},
    {"group_by_key_partition", (PyCFunction)(void (*)(void))group_by_key_partition, METH_FASTCALL,
     "group_by_key_partition(keys, count) -> (order, ends): indexes grouped by default partition"},
    {"setup", setup, METH_VARARGS, "setup(Record, CorruptRecordError)"},
    {"decode_records", (PyCFunction)(void (*)(void))decode_records, METH_FASTCALL,
     "decode_records(data, start, end, count, base_offset, base_timestamp, log_append_time)"},
    {"scan_records", (PyCFunction)(void (*)(void))scan_records, METH_FASTCALL,
     "scan_records(data, start, end, count) -> (min ts delta, max ts delta, keyless indexes, sequential)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef crecords_module = {
    PyModuleDef_HEAD_INIT, "_crecords", "C accelerator for aiokafka_lite.wire.records.", -1,
    module_methods,
};

PyMODINIT_FUNC
PyInit__crecords(void)
{
    if (PyType_Ready(&WriterType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&crecords_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&WriterType);
    if (PyModule_AddObject(m, "RecordsWriter", (PyObject *)&WriterType) < 0) {
        Py_DECREF(&WriterType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
