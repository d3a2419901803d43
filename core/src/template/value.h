/* Values of the Jinja engine and the runtime they live in.
 *
 * Every value a render creates lives in one arena freed when the render
 * ends, so values are plain structs passed by value with no reference
 * counts.  An error anywhere (a bad operation, a limit reached, memory
 * exhausted) is raised with jrt_fail, which longjmps back to the render's
 * entry; nothing needs unwinding because nothing is owned outside the arena. */
#ifndef PLUME_TEMPLATE_VALUE_H
#define PLUME_TEMPLATE_VALUE_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"

typedef enum jv_kind {
    JV_UNDEF, /* a missing variable, key or attribute: jinja2's default Undefined */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST, /* also tuples (jlist.tuple) */
    JV_DICT, /* also namespace() objects (jdict.ns) */
    JV_FUNC
} jv_kind;

typedef struct jstr {
    size_t len;
    char data[]; /* NUL-terminated after len bytes */
} jstr;

struct jlist;
struct jdict;
struct jfunc;

typedef struct jv {
    jv_kind kind;
    bool markup; /* JV_STR from |safe or |escape: markupsafe's Markup, which escapes what + joins to it */
    union {
        bool b;
        int64_t i;
        double f;
        const jstr *s; /* JV_STR; for JV_UNDEF the missing name (may be NULL) */
        struct jlist *l;
        struct jdict *d;
        struct jfunc *fn;
    } u;
} jv;

typedef struct jlist {
    size_t n, cap;
    jv *items;
    bool tuple;
    bool gen; /* a generator (what select, map, ... return): always true, no len(), not JSON */
} jlist;

typedef struct jdict {
    size_t n, cap;
    jv *keys;
    jv *vals;
    bool ns; /* a namespace(): attributes may be assigned with {% set ns.x = ... %} */
} jdict;

typedef struct jrt jrt;

/* A builtin callable: self is the bound object for methods (JV_UNDEF else). */
typedef jv (*jbuiltin_fn)(jrt *rt, jv self, const jv *args, size_t nargs, const jstr *const *kwnames,
                          const jv *kwargs, size_t nkw);

typedef struct jfunc {
    const char *name;
    jbuiltin_fn builtin; /* NULL for a macro */
    jv self;
    const void *macro;   /* struct jnode * of the macro (or of a call block's caller) */
    void *closure;       /* struct jframe * the macro was defined in */
    const void *caller;  /* jfunc of `caller` for a macro invoked from a call block */
} jfunc;

/* Limits on what one render may use; 0 fields take the defaults. */
typedef struct jlimits {
    uint64_t max_steps;     /* nodes evaluated (default 20 000 000) */
    size_t max_output;      /* bytes of output, also of any captured block (default 16 MiB) */
    size_t max_memory;      /* arena bytes (default 256 MiB) */
    unsigned max_depth;     /* macro calls and nested loops (default 200) */
    size_t max_loop;        /* items in one loop or range() (default 1 000 000) */
} jlimits;

typedef struct jchunk jchunk;

struct jrt {
    jchunk *chunks;
    size_t mem_used;
    jlimits lim;
    uint64_t steps;
    unsigned depth;
    unsigned cdepth;        /* nested evaluation calls (C stack), bounded by JRT_MAX_CDEPTH */
    jmp_buf *jb;
    plume_error *err;
    int line, col;          /* position of the construct being evaluated */
    const char *construct;  /* what it is ("filter 'tojson'", "for", ...) */
    int64_t now;            /* seconds since the epoch for strftime_now */
    bool now_utc;
    void *eval;             /* the evaluator's state (struct jeval *) */
};

/* Nested evaluation calls at most (expressions within statements within
 * macro calls), so that no template can exhaust the C stack. */
#define JRT_MAX_CDEPTH 2000
/* Values nested deeper than this cannot be printed, compared or dumped. */
#define JV_MAX_NESTING 500

/* Sets up rt with limits lim (NULL: defaults).  jb and err are set by the caller. */
void jrt_init(jrt *rt, const jlimits *lim);
/* Frees every chunk of rt's arena. */
void jrt_free(jrt *rt);
/* Allocates n zeroed bytes in the arena; fails (longjmp) past max_memory. */
void *jrt_alloc(jrt *rt, size_t n);
/* Raises an error at the current position: fills rt->err with
 * "line L, column C, in <construct>: <message>" and longjmps. */
_Noreturn void jrt_fail(jrt *rt, plume_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Counts one step; fails past max_steps. */
void jrt_step(jrt *rt);
/* Counts work proportional to n (bytes scanned, items compared) as steps,
 * one per 16, so that operations on large values are bounded too. */
void jrt_work(jrt *rt, size_t n);

/* memcpy that accepts n == 0 with NULL pointers (an empty list's items). */
static inline void jcopy(void *dst, const void *src, size_t n)
{
    if (n)
        __builtin_memcpy(dst, src, n);
}

/* ---- constructors ---- */
static inline jv jv_undef(const jstr *name) { jv v = {.kind = JV_UNDEF}; v.u.s = name; return v; }
static inline jv jv_none(void) { jv v = {.kind = JV_NONE}; return v; }
static inline jv jv_bool(bool b) { jv v = {.kind = JV_BOOL}; v.u.b = b; return v; }
static inline jv jv_int(int64_t i) { jv v = {.kind = JV_INT}; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {.kind = JV_FLOAT}; v.u.f = f; return v; }
static inline jv jv_strv(const jstr *s) { jv v = {.kind = JV_STR}; v.u.s = s; return v; }

/* ---- numbers (bool counts as one, as in Python) ---- */
static inline bool jv_is_num(jv v)
{
    return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
}
/* A number's value as a double. */
static inline double jv_fval(jv v)
{
    return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : (double)v.u.b;
}
/* An int's or a bool's value. */
static inline int64_t jv_ival(jv v) { return v.kind == JV_INT ? v.u.i : (int64_t)v.u.b; }

const jstr *jstr_new(jrt *rt, const char *p, size_t n);
const jstr *jstr_cstr(jrt *rt, const char *s);
jv jv_str(jrt *rt, const char *p, size_t n);
jv jv_cstr(jrt *rt, const char *s);
jv jv_list(jrt *rt, size_t cap);
/* A new list (a tuple when tuple) holding copies of the n items. */
jv jv_list_of(jrt *rt, const jv *items, size_t n, bool tuple);
/* The tuple (a, b). */
static inline jv jv_pair(jrt *rt, jv a, jv b)
{
    const jv items[2] = {a, b};
    return jv_list_of(rt, items, 2, true);
}
jv jv_dict(jrt *rt, size_t cap);
void jlist_push(jrt *rt, jlist *l, jv v);
/* Sets key k (replacing an equal key's value in place, as a Python dict does). */
void jdict_set(jrt *rt, jdict *d, jv k, jv v);
/* The value under key k, or false when absent. */
bool jdict_get(const jdict *d, jv k, jv *out);
bool jdict_get_c(const jdict *d, const char *k, jv *out);

/* ---- a growable byte buffer in the arena, bounded by max_output ---- */
typedef struct jbuf {
    char *p;
    size_t n, cap;
} jbuf;
void jbuf_put(jrt *rt, jbuf *b, const char *p, size_t n);
void jbuf_puts(jrt *rt, jbuf *b, const char *s);
void jbuf_putc(jrt *rt, jbuf *b, char c);
void jbuf_printf(jrt *rt, jbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
jv jbuf_take(jrt *rt, jbuf *b);

/* ---- Python semantics ---- */
/* "str", "int", "list", ... as Python names the type (for messages). */
const char *jv_type_name(jv v);
bool jv_truthy(jv v);
/* Python ==. */
bool jv_equal(jv a, jv b);
/* Python <, >, ...: returns -1/0/1; fails for unorderable types. */
int jv_compare(jrt *rt, jv a, jv b);
/* Appends Python str(v) (str(undefined) is ""). */
void jv_write_str(jrt *rt, jbuf *b, jv v);
/* Appends Python repr(v). */
void jv_write_repr(jrt *rt, jbuf *b, jv v);
/* str(v) as a value. */
jv jv_to_str(jrt *rt, jv v);
/* Appends json.dumps(v, ensure_ascii, indent, separators, sort_keys) as Python
 * writes it; indent < 0 is None, indent_str overrides the spaces when set. */
void jv_write_json(jrt *rt, jbuf *b, jv v, bool ensure_ascii, int indent, const jstr *indent_str,
                   const jstr *item_sep, const jstr *key_sep, bool sort_keys);
/* HTML-escapes s as markupsafe.escape does (& < > " '). */
jv jv_html_escape(jrt *rt, const jstr *s);
/* Appends Python repr() of a float. */
void jv_write_float(jbuf *b, jrt *rt, double f);

/* ---- UTF-8 code points (Python indexes strings by code point) ---- */
size_t jutf8_count(const char *p, size_t n);
/* Byte offset of code point index cp in p[0..n) (n when past the end). */
size_t jutf8_offset(const char *p, size_t n, size_t cp);

/* ---- iteration: lists as they are, dicts as their keys, strings as their characters ---- */
/* A list of v's items for `for`, `in`, filters; fails for non-iterables.
 * Undefined iterates as empty. */
jlist *jv_iterate(jrt *rt, jv v);

/* ---- JSON (jansson) in ---- */
struct json_t;
jv jv_from_json(jrt *rt, const struct json_t *j);

#endif
