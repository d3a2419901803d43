/* The Jinja engine's entry points (see jinja.h). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "template/eval.h"
#include "template/jinja.h"
#include "template/lexer.h"
#include "template/parser.h"

struct jinja_template {
    jrt arena; /* owns the tree */
    jnode *body;
};

int jinja_compile(const char *src, size_t len, jinja_template **out, plume_error *err)
{
    *out = NULL;
    jtoklist toks;
    if (jlex(src, len, &toks, err))
        return plume_err_prefix(err, "chat template");
    jinja_template *t = calloc(1, sizeof *t);
    if (!t) {
        jlex_free(&toks);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory compiling the chat template");
    }
    jrt_init(&t->arena, NULL);
    jmp_buf jb;
    t->arena.jb = &jb;
    t->arena.err = err;
    if (setjmp(jb)) {
        jlex_free(&toks);
        jrt_free(&t->arena);
        free(t);
        return plume_err_prefix(err, "chat template");
    }
    t->body = jparse(&t->arena, &toks);
    jlex_free(&toks);
    t->arena.jb = NULL;
    t->arena.err = NULL;
    *out = t;
    return 0;
}

void jinja_free(jinja_template *t)
{
    if (!t)
        return;
    jrt_free(&t->arena);
    free(t);
}

int jinja_render(const jinja_template *t, const json_t *ctx, const jinja_render_opts *opts,
                 char **out, size_t *out_len, plume_error *err)
{
    *out = NULL;
    if (out_len)
        *out_len = 0;
    if (ctx && !json_is_object(ctx))
        return plume_err(err, PLUME_ERR_INVALID, "chat template: the context must be a JSON object");
    jrt rt;
    jrt_init(&rt, opts ? &opts->limits : NULL);
    if (opts) {
        rt.now = opts->now;
        rt.now_utc = opts->now_utc;
    }
    jmp_buf jb;
    rt.jb = &jb;
    rt.err = err;
    /* volatile: read after longjmp */
    char *volatile result = NULL;
    if (setjmp(jb)) {
        free(result);
        jrt_free(&rt);
        return plume_err_prefix(err, "chat template");
    }
    jframe *builtins = jrt_alloc(&rt, sizeof *builtins);
    jglobals_install(&rt, &builtins->vars);
    jframe *vars = jrt_alloc(&rt, sizeof *vars);
    vars->parent = builtins;
    if (ctx) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)ctx, k, v)
        {
            jdict_set(&rt, &vars->vars, jv_cstr(&rt, k), jv_from_json(&rt, v));
        }
    }
    jbuf b = {0};
    jeval_render(&rt, t->body, vars, &b);
    result = malloc(b.n + 1);
    if (!result)
        jrt_fail(&rt, PLUME_ERR_NOMEM, "out of memory copying the rendered template");
    if (b.n)
        memcpy(result, b.p, b.n);
    result[b.n] = 0;
    *out = result;
    if (out_len)
        *out_len = b.n;
    jrt_free(&rt);
    return 0;
}
