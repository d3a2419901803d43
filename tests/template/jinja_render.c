/* jinja_render TEMPLATE [--now EPOCH]: compiles TEMPLATE once and renders it
 * for each JSON object read from stdin (one per line), writing one JSON line
 * per context: {"ok": true, "out": "..."} or {"ok": false, "error": "..."}.
 * A template that does not compile gives one {"ok": false, "compile": true,
 * "error": "..."} line per context.  The strftime_now time is EPOCH in UTC.
 * jinja_render --cases [--now EPOCH]: each stdin line is {"template": T,
 * "context": C}; T is compiled and rendered over C.
 * Used by tests/template/conformance.py and cases.py, which compare each
 * output with jinja2's. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            } else
                buf = nb;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: jinja_render TEMPLATE [--now EPOCH] < contexts.jsonl\n");
        return 2;
    }
    jinja_render_opts opts = {.now_utc = true};
    bool cases = !strcmp(argv[1], "--cases");
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--now"))
            opts.now = strtoll(argv[++i], NULL, 10);
    size_t len = 0;
    char *src = cases ? NULL : slurp(argv[1], &len);
    if (!cases && !src) {
        fprintf(stderr, "jinja_render: cannot read %s\n", argv[1]);
        return 2;
    }
    plume_error cerr = {0};
    jinja_template *t = NULL;
    int crc = cases ? 0 : jinja_compile(src, len, &t, &cerr);
    free(src);
    size_t cap = 1 << 20;
    char *line = malloc(cap);
    while (line && fgets(line, (int)cap, stdin)) {
        json_t *ctx = json_loads(line, 0, NULL);
        json_t *res;
        if (cases) {
            json_t *tj = json_object_get(ctx, "template");
            jinja_free(t);
            t = NULL;
            crc = jinja_compile(json_string_value(tj) ? json_string_value(tj) : "",
                                json_string_length(tj), &t, &cerr);
            json_t *c = json_incref(json_object_get(ctx, "context"));
            json_decref(ctx);
            ctx = c;
        }
        if (crc) {
            res = json_pack("{sbsbss}", "ok", 0, "compile", 1, "error", cerr.msg);
        } else {
            char *out = NULL;
            size_t olen = 0;
            plume_error err = {0};
            if (jinja_render(t, ctx, &opts, &out, &olen, &err) == 0)
                res = json_pack("{sbss#}", "ok", 1, "out", out, olen);
            else
                res = json_pack("{sbss}", "ok", 0, "error", err.msg);
            free(out);
        }
        if (!res) /* output that is not UTF-8 */
            res = json_pack("{sbss}", "ok", 0, "error", "the output is not valid UTF-8");
        char *s = json_dumps(res, JSON_COMPACT | JSON_ENSURE_ASCII);
        puts(s);
        fflush(stdout);
        free(s);
        json_decref(res);
        json_decref(ctx);
    }
    free(line);
    jinja_free(t);
    return 0;
}
