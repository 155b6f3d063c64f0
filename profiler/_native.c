/* The profiler's compiled kernels (the project's one C module; optional in setup.py, each
 * with a numpy twin that runs when it is not built and that its tests compare it with,
 * tests/profiler/test_native.py):
 *
 * - scan: `aipusim.profiler.scan.classify_lines`;
 * - exclusive: `aipusim.profiler.exclusive.exclusive_cycles`' painting;
 * - match: `aipusim.profiler.critical`'s token search (`_match`).
 *
 * scan. The compiled twin of `aipusim.profiler.scan.classify_lines`: one pass over a chunk of
 * trace text in C (the numpy scan costs about 0.9 CPU-s of a 1M-line trace, this about a
 * tenth of it). The rules are the scan module's, byte for byte: a line is canonical for a
 * tag when it is laid out exactly as `format_line` writes it (padded ``[TAG]``, every
 * ``key=value`` of the tag in schema order one space apart, integers as ``-?`` and 1-18
 * ASCII digits, strings as bytes 33-127 other than ``=``, possibly empty). Strings come
 * dictionary-encoded per chunk, distinct values in order of first appearance (as Arrow's
 * ``dictionary_encode`` gives them), so no Arrow compute kernel is needed afterwards.
 *
 * scan(buf, schema) -> (ends, kinds, columns)
 *   buf: a bytes-like object of whole lines (bytes after the last newline are not a line);
 *   schema: per tag (in `LEVELS` order) a tuple (label, prefix, fields), label the
 *     ``[TAG]`` bytes, prefix the padded 5-byte prefix, fields a tuple of (key, is_int) with
 *     key the ``name=`` bytes;
 *   ends: bytearray of int64, the newline position of every line;
 *   kinds: bytearray of int8 per line: the tag's index when canonical, 16 + index for a
 *     line of the tag in another layout, -1 for any other line;
 *   columns: {tag index: [column, ...]} for tags with canonical lines, each column a
 *     bytearray of int64 or a tuple (codes int32, dictionary offsets int32, dictionary
 *     bytes) of bytearrays.
 * The scan itself runs without the GIL, so chunks are scanned on several threads at once.
 *
 * Tests: tests/profiler/test_native.py compares it with the numpy scan.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TAGS 16
#define MAX_FIELDS 32
#define MAX_DIGITS 18
#define PREFIX_BYTES 5
#define NONCANONICAL 16
#define OTHER (-1)

typedef struct {
    char *data;
    size_t len, cap;
    int failed;
} Buf;

static int buf_reserve(Buf *b, size_t more) {
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data) {
        b->failed = 1;
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

/* memcmp for the few bytes of a key or a tag: inline, no library call per field */
static inline int same_bytes(const char *a, const char *b, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static inline void buf_put(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n)) return;
    memcpy(b->data + b->len, src, n);
    b->len += n;
}

/* Distinct strings of one column in order of first appearance, with an open-addressing
 * hash table of their codes. */
typedef struct {
    Buf codes;   /* int32 per row */
    Buf offsets; /* int32 per distinct value, plus one */
    Buf chars;
    int32_t *table;
    size_t slots, used;
    int32_t last; /* the code of the row before */
} Dict;

static int32_t dict_lookup(Dict *d, const char *s, size_t n);

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static int dict_grow(Dict *d) {
    size_t slots = d->slots ? d->slots * 2 : 64;
    int32_t *table = malloc(slots * sizeof(int32_t));
    if (!table) return -1;
    memset(table, 0xff, slots * sizeof(int32_t));
    const int32_t *off = (const int32_t *)d->offsets.data;
    for (size_t c = 0; c < d->used; c++) {
        uint64_t h = hash_bytes(d->chars.data + off[c], (size_t)(off[c + 1] - off[c]));
        size_t i = h & (slots - 1);
        while (table[i] >= 0) i = (i + 1) & (slots - 1);
        table[i] = (int32_t)c;
    }
    free(d->table);
    d->table = table;
    d->slots = slots;
    return 0;
}

static int32_t dict_code(Dict *d, const char *s, size_t n) {
    if (d->used) { /* the same value as the row before: most rows */
        const int32_t *off = (const int32_t *)d->offsets.data;
        int32_t c = d->last;
        if ((size_t)(off[c + 1] - off[c]) == n && same_bytes(d->chars.data + off[c], s, (Py_ssize_t)n))
            return c;
    }
    int32_t c = dict_lookup(d, s, n);
    d->last = c;
    return c;
}

static int32_t dict_lookup(Dict *d, const char *s, size_t n) {
    if (!d->offsets.len) {
        int32_t zero = 0;
        buf_put(&d->offsets, &zero, sizeof zero);
    }
    if ((d->used + 1) * 2 > d->slots && dict_grow(d)) {
        d->codes.failed = 1;
        return 0;
    }
    uint64_t h = hash_bytes(s, n);
    size_t i = h & (d->slots - 1);
    const int32_t *off;
    for (;;) {
        int32_t c = d->table[i];
        if (c < 0) break;
        off = (const int32_t *)d->offsets.data;
        if ((size_t)(off[c + 1] - off[c]) == n && memcmp(d->chars.data + off[c], s, n) == 0)
            return c;
        i = (i + 1) & (d->slots - 1);
    }
    int32_t c = (int32_t)d->used++;
    d->table[i] = c;
    buf_put(&d->chars, s, n);
    int32_t end = (int32_t)d->chars.len;
    buf_put(&d->offsets, &end, sizeof end);
    return c;
}

typedef struct {
    const char *label;
    Py_ssize_t label_len;
    const char *prefix; /* PREFIX_BYTES */
    int nfields;
    const char *key[MAX_FIELDS];
    Py_ssize_t key_len[MAX_FIELDS];
    int is_int[MAX_FIELDS];
    /* output */
    Py_ssize_t rows;
    Buf ints[MAX_FIELDS];
    Dict strs[MAX_FIELDS];
} TagSpec;

/* The line [p, end) of tag `t` as a canonical row: appended, 1; else nothing, 0. One
 * pass: each field's key is compared, then its value read up to the next space (the last
 * field up to the line's end), integers as -?\d{1,18}, strings as bytes 33-127 but '='. */
static int canonical(TagSpec *t, const char *p, const char *end) {
    if (end - p < PREFIX_BYTES || !same_bytes(p, t->prefix, PREFIX_BYTES)) return 0;
    const char *begin[MAX_FIELDS], *stop[MAX_FIELDS];
    int64_t value[MAX_FIELDS];
    const char *q = p + PREFIX_BYTES;
    for (int k = 0; k < t->nfields; k++) {
        if (end - q < t->key_len[k] || !same_bytes(q, t->key[k], t->key_len[k])) return 0;
        q += t->key_len[k];
        begin[k] = q;
        if (t->is_int[k]) {
            int neg = q < end && *q == '-';
            q += neg;
            const char *digits = q;
            int64_t v = 0;
            while (q < end && (unsigned)((unsigned char)*q - '0') <= 9) {
                if (q - digits == MAX_DIGITS) return 0; /* 19 digits or more */
                v = v * 10 + (*q++ - '0');
            }
            if (q == digits) return 0;
            value[k] = neg ? -v : v;
        } else {
            while (q < end) {
                unsigned char c = (unsigned char)*q;
                if (c <= 32 || c >= 128 || c == '=') break;
                q++;
            }
        }
        stop[k] = q;
        /* the value must end at the next field's space, the last at the line's end */
        if (k < t->nfields - 1) {
            if (q >= end || *q != ' ') return 0;
            q++;
        } else if (q != end) {
            return 0;
        }
    }
    for (int k = 0; k < t->nfields; k++) {
        if (t->is_int[k]) {
            buf_put(&t->ints[k], &value[k], sizeof(int64_t));
        } else {
            Dict *d = &t->strs[k];
            int32_t c = dict_code(d, begin[k], (size_t)(stop[k] - begin[k]));
            buf_put(&d->codes, &c, sizeof c);
        }
    }
    t->rows++;
    return 1;
}

static int scan_lines(const char *s, Py_ssize_t n, TagSpec *tags, int ntags, Buf *ends,
                      Buf *kinds) {
    const char *p = s, *last = s + n;
    if (buf_reserve(ends, (size_t)(n / 48 + 1) * sizeof(int64_t))) return -1;
    if (buf_reserve(kinds, (size_t)(n / 48 + 1))) return -1;
    while (p < last) {
        const char *nl = memchr(p, '\n', (size_t)(last - p));
        if (!nl) break;
        int64_t at = nl - s;
        int8_t kind = OTHER;
        for (int t = 0; t < ntags; t++) {
            TagSpec *tag = &tags[t];
            if (nl - p >= tag->label_len && same_bytes(p, tag->label, tag->label_len)) {
                kind = canonical(tag, p, nl) ? (int8_t)t : (int8_t)(NONCANONICAL + t);
                break;
            }
        }
        buf_put(ends, &at, sizeof at);
        buf_put(kinds, &kind, 1);
        p = nl + 1;
    }
    if (ends->failed || kinds->failed) return -1;
    for (int t = 0; t < ntags; t++)
        for (int k = 0; k < tags[t].nfields; k++)
            if (tags[t].ints[k].failed || tags[t].strs[k].codes.failed ||
                tags[t].strs[k].offsets.failed || tags[t].strs[k].chars.failed)
                return -1;
    return 0;
}

static PyObject *to_bytearray(Buf *b) {
    return PyByteArray_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->len);
}

static void free_tags(TagSpec *tags, int ntags) {
    for (int t = 0; t < ntags; t++)
        for (int k = 0; k < MAX_FIELDS; k++) {
            free(tags[t].ints[k].data);
            free(tags[t].strs[k].codes.data);
            free(tags[t].strs[k].offsets.data);
            free(tags[t].strs[k].chars.data);
            free(tags[t].strs[k].table);
        }
}

static int read_schema(PyObject *schema, TagSpec *tags, int *ntags) {
    if (!PyTuple_Check(schema) || PyTuple_GET_SIZE(schema) > MAX_TAGS) {
        PyErr_SetString(PyExc_TypeError, "schema must be a tuple of at most 16 tags");
        return -1;
    }
    *ntags = (int)PyTuple_GET_SIZE(schema);
    for (int t = 0; t < *ntags; t++) {
        PyObject *label, *prefix, *fields;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(schema, t), "SSO!", &label, &prefix,
                              &PyTuple_Type, &fields))
            return -1;
        if (PyBytes_GET_SIZE(prefix) != PREFIX_BYTES || PyTuple_GET_SIZE(fields) < 1 ||
            PyTuple_GET_SIZE(fields) > MAX_FIELDS) {
            PyErr_SetString(PyExc_ValueError, "a tag's prefix must be 5 bytes, with 1-32 fields");
            return -1;
        }
        TagSpec *tag = &tags[t];
        tag->label = PyBytes_AS_STRING(label);
        tag->label_len = PyBytes_GET_SIZE(label);
        tag->prefix = PyBytes_AS_STRING(prefix);
        tag->nfields = (int)PyTuple_GET_SIZE(fields);
        for (int k = 0; k < tag->nfields; k++) {
            PyObject *key;
            int is_int;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, k), "Sp", &key, &is_int)) return -1;
            tag->key[k] = PyBytes_AS_STRING(key);
            tag->key_len[k] = PyBytes_GET_SIZE(key);
            tag->is_int[k] = is_int;
        }
    }
    return 0;
}

static PyObject *columns_of(TagSpec *tags, int ntags) {
    PyObject *out = PyDict_New();
    if (!out) return NULL;
    for (int t = 0; t < ntags; t++) {
        TagSpec *tag = &tags[t];
        if (!tag->rows) continue;
        PyObject *cols = PyList_New(tag->nfields);
        if (!cols) goto fail;
        for (int k = 0; k < tag->nfields; k++) {
            PyObject *col;
            if (tag->is_int[k]) {
                col = to_bytearray(&tag->ints[k]);
            } else {
                Dict *d = &tag->strs[k];
                col = Py_BuildValue("(NNN)", to_bytearray(&d->codes), to_bytearray(&d->offsets),
                                    to_bytearray(&d->chars));
            }
            if (!col) {
                Py_DECREF(cols);
                goto fail;
            }
            PyList_SET_ITEM(cols, k, col);
        }
        PyObject *key = PyLong_FromLong(t);
        int bad = !key || PyDict_SetItem(out, key, cols) < 0;
        Py_XDECREF(key);
        Py_DECREF(cols);
        if (bad) goto fail;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *schema;
    if (!PyArg_ParseTuple(args, "y*O", &view, &schema)) return NULL;
    TagSpec *tags = calloc(MAX_TAGS, sizeof(TagSpec));
    Buf ends = {0}, kinds = {0};
    PyObject *result = NULL;
    int ntags = 0, failed;
    if (!tags) {
        PyErr_NoMemory();
        goto done;
    }
    if (read_schema(schema, tags, &ntags)) goto done;
    Py_BEGIN_ALLOW_THREADS;
    failed = scan_lines(view.buf, view.len, tags, ntags, &ends, &kinds);
    Py_END_ALLOW_THREADS;
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *columns = columns_of(tags, ntags);
    if (columns)
        result = Py_BuildValue("(NNN)", to_bytearray(&ends), to_bytearray(&kinds), columns);
done:
    if (tags) free_tags(tags, MAX_TAGS);
    free(tags);
    free(ends.data);
    free(kinds.data);
    PyBuffer_Release(&view);
    return result;
}


/* One core's tasks at sorted positions [lo, hi) of `order`, queue by queue. */
static void hold_core(const int64_t *order, const int64_t *unit, const int64_t *rank,
                      const int64_t *start, const int64_t *end, Py_ssize_t lo, Py_ssize_t hi,
                      int64_t *held, Py_ssize_t *pos, Py_ssize_t *stop, int64_t *credit) {
    int nq = 0;
    for (Py_ssize_t i = lo; i < hi; i++) {
        int64_t j = order[i];
        int last = i + 1 == hi || unit[order[i + 1]] != unit[j];
        held[i] = last ? end[j] : (end[j] < start[order[i + 1]] ? end[j] : start[order[i + 1]]);
        if (i == lo || unit[order[i - 1]] != unit[j]) pos[nq++] = i;
        if (last) stop[nq - 1] = i + 1;
    }
    int64_t t = INT64_MAX;
    for (int q = 0; q < nq; q++)
        if (start[order[pos[q]]] < t) t = start[order[pos[q]]];
    for (;;) {
        int64_t next = INT64_MAX, best = INT64_MAX;
        Py_ssize_t owner = -1;
        for (int q = 0; q < nq; q++) {
            Py_ssize_t i = pos[q];
            /* past what this queue held by now (or a task holding nothing) */
            while (i < stop[q] && (held[i] <= t || held[i] <= start[order[i]])) i++;
            pos[q] = i;
            if (i == stop[q]) continue;
            int64_t j = order[i];
            if (start[j] <= t) {
                if (held[i] < next) next = held[i];
                if (rank[j] < best) {
                    best = rank[j];
                    owner = j;
                }
            } else if (start[j] < next) {
                next = start[j];
            }
        }
        if (next == INT64_MAX) break;
        if (owner >= 0) credit[owner] += next - t;
        t = next;
    }
}

static int exclusive_all(const int64_t *order, const int64_t *core, const int64_t *unit,
                         const int64_t *rank, const int64_t *start, const int64_t *end,
                         Py_ssize_t n, double *out) {
    int64_t *held = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    int64_t *credit = calloc((size_t)(n ? n : 1), sizeof(int64_t));
    Py_ssize_t *pos = malloc((size_t)(n ? n : 1) * sizeof(Py_ssize_t));
    Py_ssize_t *stop = malloc((size_t)(n ? n : 1) * sizeof(Py_ssize_t));
    int failed = !held || !credit || !pos || !stop;
    if (!failed) {
        Py_ssize_t lo = 0;
        while (lo < n) {
            Py_ssize_t hi = lo + 1;
            while (hi < n && core[order[hi]] == core[order[lo]]) hi++;
            hold_core(order, unit, rank, start, end, lo, hi, held, pos, stop, credit);
            lo = hi;
        }
        for (Py_ssize_t j = 0; j < n; j++) out[j] = (double)credit[j];
    }
    free(held);
    free(credit);
    free(pos);
    free(stop);
    return failed ? -1 : 0;
}

static PyObject *exclusive(PyObject *self, PyObject *args) {
    Py_buffer v[6];
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = v[0].len / (Py_ssize_t)sizeof(int64_t);
    int ok = 1;
    for (int k = 0; k < 6; k++) ok &= v[k].len == n * (Py_ssize_t)sizeof(int64_t);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "exclusive's arrays must be int64 of one length");
    } else {
        result = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(double));
        if (result) {
            double *out = (double *)PyByteArray_AS_STRING(result);
            int failed;
            Py_BEGIN_ALLOW_THREADS;
            failed = exclusive_all(v[0].buf, v[1].buf, v[2].buf, v[3].buf, v[4].buf, v[5].buf,
                                   n, out);
            Py_END_ALLOW_THREADS;
            if (failed) {
                Py_CLEAR(result);
                PyErr_NoMemory();
            }
        }
    }
    for (int k = 0; k < 6; k++) PyBuffer_Release(&v[k]);
    return result;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static int match_all(const int64_t *key, const int64_t *rank, Py_ssize_t n, const int64_t *query,
                     Py_ssize_t m, int64_t *out) {
    size_t slots = 16;
    while (slots < (size_t)n * 2) slots *= 2;
    int64_t *table = malloc(slots * sizeof(int64_t)); /* task index, -1 empty */
    if (!table) return -1;
    memset(table, 0xff, slots * sizeof(int64_t));
    for (Py_ssize_t j = 0; j < n; j++) {
        size_t i = mix64((uint64_t)key[j]) & (slots - 1);
        for (;;) {
            int64_t k = table[i];
            if (k < 0) {
                table[i] = j;
                break;
            }
            if (key[k] == key[j]) {
                if (rank[j] >= rank[k]) table[i] = j; /* ties: the later index */
                break;
            }
            i = (i + 1) & (slots - 1);
        }
    }
    for (Py_ssize_t q = 0; q < m; q++) {
        size_t i = mix64((uint64_t)query[q]) & (slots - 1);
        out[q] = -1;
        for (;;) {
            int64_t k = table[i];
            if (k < 0) break;
            if (key[k] == query[q]) {
                out[q] = k;
                break;
            }
            i = (i + 1) & (slots - 1);
        }
    }
    free(table);
    return 0;
}

static PyObject *match(PyObject *self, PyObject *args) {
    Py_buffer v[3];
    if (!PyArg_ParseTuple(args, "y*y*y*", &v[0], &v[1], &v[2])) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = v[0].len / (Py_ssize_t)sizeof(int64_t), m = v[2].len / (Py_ssize_t)sizeof(int64_t);
    if (v[1].len != v[0].len || v[0].len % sizeof(int64_t) || v[2].len % sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "match's arrays must be int64, the first two of one length");
    } else {
        result = PyByteArray_FromStringAndSize(NULL, m * (Py_ssize_t)sizeof(int64_t));
        if (result) {
            int64_t *out = (int64_t *)PyByteArray_AS_STRING(result);
            int failed;
            Py_BEGIN_ALLOW_THREADS;
            failed = match_all(v[0].buf, v[1].buf, n, v[2].buf, m, out);
            Py_END_ALLOW_THREADS;
            if (failed) {
                Py_CLEAR(result);
                PyErr_NoMemory();
            }
        }
    }
    for (int k = 0; k < 3; k++) PyBuffer_Release(&v[k]);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Scan whole trace lines (see the module source)."},
    {"exclusive", exclusive, METH_VARARGS, "Exclusive cycles per task (see the module source)."},
    {"match", match, METH_VARARGS, "The task of each query's key (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "The profiler's compiled kernels.", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
