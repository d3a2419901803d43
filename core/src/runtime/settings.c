/* Settings: typed getters over a YAML mapping with positions in errors. */
#include "plume/settings.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/settings_internal.h"

typedef struct child {
    char *key;
    plume_settings *s;
} child;

/* What the getters record and the children they create: heap state that
 * const getters may update. */
typedef struct aux {
    settings_resolved *res;
    size_t n_res, cap_res;
    child *kids;
    size_t n_kids;
} aux;

struct plume_settings {
    char *path;
    char *file;
    char *base_dir;
    const ynode *map;
    ynode *owned;                 /* settings built in code own their map */
    const char *const *hidden;
    size_t n_hidden;
    int line, col;                /* of the section, for errors without a key */
    aux *aux;
};

static bool is_hidden(const plume_settings *s, const char *key)
{
    for (size_t i = 0; i < s->n_hidden; i++)
        if (strcmp(s->hidden[i], key) == 0)
            return true;
    return false;
}

int settings_view(const ynode *map, const char *file, const char *base_dir, const char *path,
                  const char *const *hidden, size_t n_hidden, int line, int col,
                  plume_settings **out, plume_error *err)
{
    plume_settings *s = calloc(1, sizeof *s);
    if (!s || !(s->aux = calloc(1, sizeof *s->aux)) || !(s->path = strdup(path)) ||
        !(s->file = strdup(file ? file : "(settings)")) ||
        !(s->base_dir = strdup(base_dir ? base_dir : "."))) {
        plume_settings_free(s);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    s->map = map;
    s->hidden = hidden;
    s->n_hidden = n_hidden;
    s->line = line;
    s->col = col;
    *out = s;
    return 0;
}

const ynode *settings_map(const plume_settings *s) { return s ? s->map : NULL; }

int plume_settings_new_in(const char *file, const char *path, plume_settings **out,
                          plume_error *err)
{
    ynode *m = ytree_map();
    if (!m || settings_view(m, file, ".", path ? path : "", NULL, 0, 0, 0, out, err)) {
        ytree_free(m);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    (*out)->owned = m;
    return 0;
}

int plume_settings_new(const char *path, plume_settings **out, plume_error *err)
{
    return plume_settings_new_in("(settings)", path, out, err);
}

int plume_settings_set(plume_settings *s, const char *key, const char *value, plume_error *err)
{
    if (!s->owned)
        return plume_err(err, PLUME_ERR_INVALID,
                         "settings read from a pipeline file cannot be changed; build new ones "
                         "with plume_settings_new");
    if (ytree_get(s->owned, key, NULL))
        return plume_err(err, PLUME_ERR_INVALID, "%s.%s is already set", s->path, key);
    ynode *v = ytree_scalar(value, false);
    if (!v || ytree_map_add(s->owned, key, v)) {
        ytree_free(v);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    return 0;
}

void plume_settings_free(plume_settings *s)
{
    if (!s)
        return;
    if (s->aux) {
        for (size_t i = 0; i < s->aux->n_res; i++) {
            free((char *)s->aux->res[i].key);
            free((char *)s->aux->res[i].value);
        }
        free(s->aux->res);
        for (size_t i = 0; i < s->aux->n_kids; i++) {
            free(s->aux->kids[i].key);
            plume_settings_free(s->aux->kids[i].s);
        }
        free(s->aux->kids);
        free(s->aux);
    }
    ytree_free(s->owned);
    free(s->path);
    free(s->file);
    free(s->base_dir);
    free(s);
}

/* Visible keys, in file order. */
static size_t visible_index(const plume_settings *s, size_t i)
{
    size_t k = 0;
    for (size_t j = 0; s->map && j < s->map->n; j++) {
        if (is_hidden(s, s->map->keys[j]->text))
            continue;
        if (k++ == i)
            return j;
    }
    return SIZE_MAX;
}

size_t plume_settings_count(const plume_settings *s)
{
    size_t n = 0;
    for (size_t j = 0; s && s->map && j < s->map->n; j++)
        n += !is_hidden(s, s->map->keys[j]->text);
    return n;
}

const char *plume_settings_key(const plume_settings *s, size_t i)
{
    size_t j = s ? visible_index(s, i) : SIZE_MAX;
    return j == SIZE_MAX ? NULL : s->map->keys[j]->text;
}

static const ynode *lookup(const plume_settings *s, const char *key, const ynode **knode)
{
    if (!s || !s->map || is_hidden(s, key))
        return NULL;
    return ytree_get(s->map, key, knode);
}

bool plume_settings_has(const plume_settings *s, const char *key)
{
    return lookup(s, key, NULL) != NULL;
}

const char *plume_settings_path(const plume_settings *s) { return s ? s->path : ""; }

/* "sampling.top_k" or "threads" at top level. */
static void full_key(const plume_settings *s, const char *key, char *buf, size_t cap)
{
    if (s->path[0] && key)
        snprintf(buf, cap, "%s.%s", s->path, key);
    else
        snprintf(buf, cap, "%s", key ? key : s->path);
}

static int vfail(const plume_settings *s, const ynode *at, plume_error *err, const char *key,
                 const char *sep, const char *fmt, va_list ap)
{
    char what[PLUME_ERROR_MSG_MAX], name[256];
    vsnprintf(what, sizeof what, fmt, ap);
    full_key(s, key, name, sizeof name);
    int line = at ? at->line : s->line, col = at ? at->col : s->col;
    if (line > 0)
        return plume_err(err, PLUME_ERR_INVALID, "%s:%d:%d: %s%s%s", s->file, line, col, name,
                         name[0] ? sep : "", what);
    return plume_err(err, PLUME_ERR_INVALID, "%s: %s%s%s", s->file, name, name[0] ? sep : "",
                     what);
}

static int fail(const plume_settings *s, const ynode *at, plume_error *err, const char *key,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail(const plume_settings *s, const ynode *at, plume_error *err, const char *key,
                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(s, at, err, key, " ", fmt, ap);
    va_end(ap);
    return -1;
}

int plume_settings_error(const plume_settings *s, const char *key, plume_error *err,
                         const char *fmt, ...)
{
    const ynode *v = key ? lookup(s, key, NULL) : NULL;
    va_list ap;
    va_start(ap, fmt);
    vfail(s, v, err, v ? key : NULL, ": ", fmt, ap);
    va_end(ap);
    return -1;
}

/* Records the value a key resolved to. */
static void record(const plume_settings *s, const char *key, const char *value, bool is_default)
{
    if (!s)
        return;
    aux *a = s->aux;
    for (size_t i = 0; i < a->n_res; i++)
        if (strcmp(a->res[i].key, key) == 0) {
            char *v = strdup(value);
            if (v) {
                free((char *)a->res[i].value);
                a->res[i].value = v;
                a->res[i].is_default = is_default;
            }
            return;
        }
    if (a->n_res == a->cap_res) {
        size_t cap = a->cap_res ? 2 * a->cap_res : 8;
        settings_resolved *r = realloc(a->res, sizeof *r * cap);
        if (!r)
            return; /* only the printout loses the entry */
        a->res = r;
        a->cap_res = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return;
    }
    a->res[a->n_res++] = (settings_resolved){k, v, is_default};
}

size_t settings_n_resolved(const plume_settings *s) { return s ? s->aux->n_res : 0; }
settings_resolved settings_resolved_at(const plume_settings *s, size_t i) { return s->aux->res[i]; }

void settings_clear_resolved(plume_settings *s)
{
    for (size_t i = 0; i < s->aux->n_res; i++) {
        free((char *)s->aux->res[i].key);
        free((char *)s->aux->res[i].value);
    }
    s->aux->n_res = 0;
}

/* The scalar under key: NULL (and 0) when absent, -1 on a non-scalar or an
 * empty value. */
static int scalar(const plume_settings *s, const char *key, const char *expect, const ynode **out,
                  plume_error *err)
{
    *out = NULL;
    const ynode *v = lookup(s, key, NULL);
    if (!v)
        return 0;
    if (v->type != YNODE_SCALAR)
        return fail(s, v, err, key, "must be %s, got %s", expect, ytree_type_name(v->type));
    if (!v->quoted && v->len == 0)
        return fail(s, v, err, key, "needs a value (%s); remove the key for the default", expect);
    *out = v;
    return 0;
}

static bool parse_int(const ynode *v, int64_t *out)
{
    if (v->quoted)
        return false;
    errno = 0;
    char *end;
    long long x = strtoll(v->text, &end, 10);
    if (errno || end == v->text || *end)
        return false;
    *out = x;
    return true;
}

static bool parse_float(const ynode *v, double *out)
{
    if (v->quoted)
        return false;
    const char *t = v->text;
    /* decimal only: no hex floats, inf or nan */
    for (const char *c = t; *c; c++)
        if (!strchr("0123456789+-.eE", *c))
            return false;
    errno = 0;
    char *end;
    double x = strtod(t, &end);
    if (errno || end == t || *end || !isfinite(x))
        return false;
    *out = x;
    return true;
}

static const char *shown(const ynode *v)
{
    return v->quoted ? "a quoted string" : v->text;
}

int plume_settings_int(const plume_settings *s, const char *key, int64_t def, int64_t lo,
                       int64_t hi, int64_t *out, plume_error *err)
{
    const ynode *v;
    char expect[96];
    snprintf(expect, sizeof expect, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    if (scalar(s, key, expect, &v, err))
        return -1;
    int64_t x = def;
    if (v && (!parse_int(v, &x) || x < lo || x > hi))
        return fail(s, v, err, key, "must be %s, got %s%s%s", expect, v->quoted ? "" : "'",
                    shown(v), v->quoted ? "" : "'");
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)x);
    record(s, key, buf, !v);
    *out = x;
    return 0;
}

/* The shortest text that reads back as x (or as the same float, for values
 * that came from a float default). */
static void format_float(double x, char *buf, size_t cap)
{
    bool is_float = x == (double)(float)x;
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, x);
        double y = strtod(buf, NULL);
        if (y == x || (is_float && (float)y == (float)x))
            break;
    }
    if (strchr(buf, 'e') && x == floor(x) && fabs(x) < 1e15)
        snprintf(buf, cap, "%.0f", x); /* 100, not 1e+02 */
    if (!strpbrk(buf, ".e"))
        strncat(buf, ".0", cap - strlen(buf) - 1);
}

static int get_float(const plume_settings *s, const char *key, double def, double lo, double hi,
                     bool open_lo, double *out, plume_error *err)
{
    const ynode *v;
    char expect[128], a[32], b[32];
    format_float(lo, a, sizeof a);
    format_float(hi, b, sizeof b);
    snprintf(expect, sizeof expect, "a number in %c%s, %s]", open_lo ? '(' : '[', a, b);
    if (scalar(s, key, expect, &v, err))
        return -1;
    double x = def;
    if (v && (!parse_float(v, &x) || (open_lo ? x <= lo : x < lo) || x > hi))
        return fail(s, v, err, key, "must be %s, got %s%s%s", expect, v->quoted ? "" : "'",
                    shown(v), v->quoted ? "" : "'");
    char buf[32];
    format_float(x, buf, sizeof buf);
    record(s, key, buf, !v);
    *out = x;
    return 0;
}

int plume_settings_float(const plume_settings *s, const char *key, double def, double lo,
                         double hi, double *out, plume_error *err)
{
    return get_float(s, key, def, lo, hi, false, out, err);
}

int plume_settings_float_open_lo(const plume_settings *s, const char *key, double def, double lo,
                                 double hi, double *out, plume_error *err)
{
    return get_float(s, key, def, lo, hi, true, out, err);
}

int plume_settings_bool(const plume_settings *s, const char *key, bool def, bool *out,
                        plume_error *err)
{
    const ynode *v;
    if (scalar(s, key, "true or false", &v, err))
        return -1;
    bool x = def;
    if (v) {
        static const char *const yes[] = {"true", "True", "TRUE"}, *const no[] = {"false", "False", "FALSE"};
        bool ok = false;
        for (int i = 0; i < 3 && !v->quoted; i++) {
            if (strcmp(v->text, yes[i]) == 0)
                x = ok = true;
            else if (strcmp(v->text, no[i]) == 0) {
                x = false;
                ok = true;
            }
        }
        if (!ok)
            return fail(s, v, err, key, "must be true or false, got %s%s%s", v->quoted ? "" : "'",
                        shown(v), v->quoted ? "" : "'");
    }
    record(s, key, x ? "true" : "false", !v);
    *out = x;
    return 0;
}

/* Renders a string for the resolved printout (quoted when YAML would
 * misread it plain). */
static void quote(const char *t, char *buf, size_t cap)
{
    bool plain = t[0] && !strpbrk(t, ":#{}[],&*!|>'\"%@`\\\n\t") && t[0] != ' ' && t[0] != '-' &&
                 t[strlen(t) - 1] != ' ';
    if (plain) {
        snprintf(buf, cap, "%s", t);
        return;
    }
    size_t o = 0;
    if (cap < 3)
        return;
    buf[o++] = '"';
    for (const char *c = t; *c && o + 3 < cap; c++) {
        if (*c == '"' || *c == '\\')
            buf[o++] = '\\';
        buf[o++] = *c == '\n' ? ' ' : *c;
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

int plume_settings_string(const plume_settings *s, const char *key, const char *def,
                          const char **out, plume_error *err)
{
    const ynode *v;
    if (scalar(s, key, "a string", &v, err))
        return -1;
    const char *x = v ? v->text : def;
    char buf[512];
    quote(x ? x : "", buf, sizeof buf);
    record(s, key, x ? buf : "null", !v);
    *out = x;
    return 0;
}

int plume_settings_choice(const plume_settings *s, const char *key, const char *const *choices,
                          size_t n, size_t def, size_t *out, plume_error *err)
{
    char list[512] = "";
    for (size_t i = 0; i < n; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, choices[i], sizeof list - strlen(list) - 1);
    }
    char expect[600];
    snprintf(expect, sizeof expect, "one of %s", list);
    const ynode *v;
    if (scalar(s, key, expect, &v, err))
        return -1;
    size_t x = def;
    if (v) {
        x = n;
        for (size_t i = 0; i < n; i++)
            if (strcmp(v->text, choices[i]) == 0)
                x = i;
        if (x == n)
            return fail(s, v, err, key, "must be %s, got '%s'", expect, v->text);
    }
    record(s, key, choices[x], !v);
    *out = x;
    return 0;
}

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

int plume_settings_path_value(const plume_settings *s, const char *key, char **out,
                              plume_error *err)
{
    *out = NULL;
    const ynode *v;
    if (scalar(s, key, "a path", &v, err))
        return -1;
    if (!v)
        return 0;
    if (v->len == 0)
        return fail(s, v, err, key, "must be a non-empty path");
    char *p;
    if (v->text[0] == '/') {
        p = strdup(v->text);
    } else {
        size_t n = strlen(s->base_dir) + v->len + 2;
        p = malloc(n);
        if (p)
            snprintf(p, n, "%s/%s", s->base_dir, v->text);
        if (p && !exists(p) && exists(v->text)) {
            free(p);
            p = strdup(v->text);
        }
    }
    if (!p)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    char buf[PATH_MAX + 8];
    quote(p, buf, sizeof buf);
    record(s, key, buf, false);
    *out = p;
    return 0;
}

int plume_settings_child(const plume_settings *s, const char *key, const plume_settings **out,
                         plume_error *err)
{
    *out = NULL;
    const ynode *v = lookup(s, key, NULL);
    if (!v)
        return 0;
    if (v->type != YNODE_MAP)
        return fail(s, v, err, key, "must be a mapping { key: value, ... }, got %s",
                    ytree_type_name(v->type));
    aux *a = s->aux;
    for (size_t i = 0; i < a->n_kids; i++)
        if (strcmp(a->kids[i].key, key) == 0) {
            *out = a->kids[i].s;
            return 0;
        }
    child *k = realloc(a->kids, sizeof *k * (a->n_kids + 1));
    if (!k)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    a->kids = k;
    char path[256];
    full_key(s, key, path, sizeof path);
    plume_settings *c;
    if (settings_view(v, s->file, s->base_dir, path, NULL, 0, v->line, v->col, &c, err))
        return -1;
    if (!(k[a->n_kids].key = strdup(key))) {
        plume_settings_free(c);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    k[a->n_kids++].s = c;
    *out = c;
    return 0;
}

int plume_settings_check_keys(const plume_settings *s, const char *const *accepted, size_t n,
                              plume_error *err)
{
    if (!s || !s->map)
        return 0;
    for (size_t j = 0; j < s->map->n; j++) {
        const ynode *k = s->map->keys[j];
        if (is_hidden(s, k->text))
            continue;
        bool ok = false;
        for (size_t i = 0; i < n && !ok; i++)
            ok = strcmp(k->text, accepted[i]) == 0;
        if (ok)
            continue;
        char list[768] = "";
        for (size_t i = 0; i < s->n_hidden + n; i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, i < s->n_hidden ? s->hidden[i] : accepted[i - s->n_hidden],
                    sizeof list - strlen(list) - 1);
        }
        char where[256];
        full_key(s, NULL, where, sizeof where);
        if (s->map->keys[j]->line > 0)
            return plume_err(err, PLUME_ERR_INVALID, "%s:%d:%d: unknown key '%s'%s%s; accepted: %s",
                             s->file, k->line, k->col, k->text, where[0] ? " in " : "", where,
                             list[0] ? list : "none");
        return plume_err(err, PLUME_ERR_INVALID, "%s: unknown key '%s'%s%s; accepted: %s", s->file,
                         k->text, where[0] ? " in " : "", where, list[0] ? list : "none");
    }
    return 0;
}
