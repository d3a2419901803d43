/* The Jinja parser (see parser.h): recursive descent with jinja2's operator
 * precedence (or < and < not < comparisons < + - < ~ < * / // % < ** <
 * unary, then postfix ., [], () and the | filter and is-test chain). */
#include <stdlib.h>
#include <string.h>

#include "template/filters.h"
#include "template/parser.h"

typedef struct parser {
    jrt *rt;
    const jtok *t;
    size_t n, i;
    unsigned depth;
} parser;

static const jtok *cur(parser *p)
{
    return &p->t[p->i < p->n ? p->i : p->n - 1];
}

static const jtok *peek(parser *p, size_t k)
{
    size_t j = p->i + k;
    return &p->t[j < p->n ? j : p->n - 1];
}

static const char *tok_desc(const jtok *t)
{
    switch (t->kind) {
    case JT_EOF: return "end of template";
    case JT_TEXT: return "template text";
    case JT_VAR_BEGIN: return "'{{'";
    case JT_VAR_END: return "'}}'";
    case JT_BLOCK_BEGIN: return "'{%'";
    case JT_BLOCK_END: return "'%}'";
    default: return t->text;
    }
}

_Noreturn static void fail(parser *p, const char *fmt, const char *a, const char *b)
{
    const jtok *t = cur(p);
    p->rt->line = t->line;
    p->rt->col = t->col;
    jrt_fail(p->rt, PLUME_ERR_UNSUPPORTED, fmt, a, b);
}

static bool is_op(const jtok *t, const char *op)
{
    return t->kind == JT_OP && strcmp(t->text, op) == 0;
}

static bool is_name(const jtok *t, const char *name)
{
    return t->kind == JT_NAME && strcmp(t->text, name) == 0;
}

static void expect_op(parser *p, const char *op)
{
    if (!is_op(cur(p), op))
        fail(p, "expected '%s', found %s", op, tok_desc(cur(p)));
    p->i++;
}

static void expect_block_end(parser *p, const char *tag)
{
    if (cur(p)->kind != JT_BLOCK_END)
        fail(p, "expected '%%}' to end the '%s' tag, found %s", tag, tok_desc(cur(p)));
    p->i++;
}

static jnode *node(parser *p, jnode_kind k, const jtok *at)
{
    jnode *n = jrt_alloc(p->rt, sizeof *n);
    n->kind = k;
    n->line = at->line;
    n->col = at->col;
    return n;
}

/* A growable array of node pointers in the arena. */
typedef struct nvec {
    jnode **v;
    size_t n, cap;
} nvec;

/* The arena array v of n elements of `size` bytes and capacity *cap, with
 * room for one more: v itself, or a copy twice as large (4 at first). */
static void *arena_grow(parser *p, void *v, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return v;
    size_t nc = *cap ? *cap * 2 : 4;
    void *nv = jrt_alloc(p->rt, nc * size);
    if (n)
        jcopy(nv, v, n * size);
    *cap = nc;
    return nv;
}

static void nvec_push(parser *p, nvec *a, jnode *x)
{
    a->v = arena_grow(p, a->v, a->n, &a->cap, sizeof *a->v);
    a->v[a->n++] = x;
}

/* Sets names[n] to the current token's text, growing the arena array names
 * of capacity *cap; returns the array. */
static const jstr **push_name(parser *p, const jstr **names, size_t n, size_t *cap)
{
    names = arena_grow(p, (void *)names, n, cap, sizeof *names);
    names[n] = jstr_new(p->rt, cur(p)->text, cur(p)->len);
    return names;
}

/* Gives node n the items as its args. */
static void set_args(jnode *n, const nvec *items)
{
    n->args = items->v;
    n->nargs = items->n;
}

static void enter(parser *p)
{
    if (++p->depth > 200)
        fail(p, "the template nests more than %s levels deep%s", "200", "");
}

static jnode *parse_expression(parser *p, bool condexpr);
static jnode *parse_tuple(parser *p, bool condexpr, bool explicit_parens);
static jnode *parse_unary(parser *p, bool with_filter);

/* (args, kw=value) after the '(' has been seen; fills n's args and kwargs. */
static void parse_call_args(parser *p, jnode *n)
{
    expect_op(p, "(");
    nvec pos = {0}, kwv = {0};
    const jstr **kwn = NULL;
    size_t kwcap = 0;
    while (!is_op(cur(p), ")")) {
        if (pos.n || kwv.n)
            expect_op(p, ",");
        if (is_op(cur(p), ")"))
            break;
        if (is_op(cur(p), "*") || is_op(cur(p), "**"))
            fail(p, "%s arguments in a call are not supported%s", cur(p)->text, "");
        if (cur(p)->kind == JT_NAME && is_op(peek(p, 1), "=")) {
            kwn = push_name(p, kwn, kwv.n, &kwcap);
            p->i += 2;
            nvec_push(p, &kwv, parse_expression(p, true));
        } else {
            if (kwv.n)
                fail(p, "a positional argument follows a keyword argument%s%s", "", "");
            nvec_push(p, &pos, parse_expression(p, true));
        }
    }
    p->i++;
    set_args(n, &pos);
    n->kwnames = kwn;
    n->kwargs = kwv.v;
    n->nkw = kwv.n;
}

static const jstr *dotted_name(parser *p)
{
    if (cur(p)->kind != JT_NAME)
        fail(p, "expected a name, found %s%s", tok_desc(cur(p)), "");
    const jtok *t = cur(p);
    p->i++;
    if (is_op(cur(p), ".") && peek(p, 1)->kind == JT_NAME) {
        char buf[256];
        size_t len = t->len < 200 ? t->len : 200;
        jcopy(buf, t->text, len);
        while (is_op(cur(p), ".") && peek(p, 1)->kind == JT_NAME && len < 200) {
            const jtok *nx = peek(p, 1);
            buf[len++] = '.';
            size_t l = nx->len < 200 - len ? nx->len : 200 - len;
            jcopy(buf + len, nx->text, l);
            len += l;
            p->i += 2;
        }
        return jstr_new(p->rt, buf, len);
    }
    return jstr_new(p->rt, t->text, t->len);
}

static jnode *parse_filter(parser *p, jnode *input)
{
    const jtok *at = cur(p);
    jnode *f = node(p, JN_FILTER, at);
    f->a = input;
    f->name = dotted_name(p);
    /* an unknown filter fails when it runs, as in jinja2 3 (a branch that is
     * never taken may name one) */
    f->filter = jfilter_find(f->name->data);
    if (is_op(cur(p), "("))
        parse_call_args(p, f);
    return f;
}

static jnode *parse_test(parser *p, jnode *input)
{
    const jtok *at = cur(p);
    jnode *t = node(p, JN_TEST, at);
    t->a = input;
    if (is_name(cur(p), "not")) {
        t->negate = true;
        p->i++;
    }
    t->name = dotted_name(p);
    t->test = jtest_find(t->name->data); /* NULL: fails when it runs */
    const jtok *c = cur(p);
    if (is_op(c, "(")) {
        parse_call_args(p, t);
    } else if ((c->kind == JT_NAME || c->kind == JT_STRING || c->kind == JT_INT ||
                c->kind == JT_FLOAT || is_op(c, "[") || is_op(c, "{")) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is"))
            fail(p, "you cannot chain tests with 'is'%s%s", "", "");
        jnode *arg = parse_unary(p, false);
        t->args = jrt_alloc(p->rt, sizeof(jnode *));
        t->args[0] = arg;
        t->nargs = 1;
    }
    return t;
}

static jnode *parse_filter_expr(parser *p, jnode *n)
{
    for (;;) {
        if (is_op(cur(p), "|")) {
            p->i++;
            n = parse_filter(p, n);
        } else if (is_name(cur(p), "is")) {
            p->i++;
            n = parse_test(p, n);
        } else if (is_op(cur(p), "(")) {
            jnode *c = node(p, JN_CALL, cur(p));
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else
            return n;
    }
}

static jnode *parse_subscript_item(parser *p)
{
    /* a[b], a[b:c], a[b:c:d], a[:c], ... */
    jnode *parts[3] = {NULL, NULL, NULL};
    int k = 0;
    bool slice = false;
    const jtok *at = cur(p);
    if (!is_op(cur(p), ":"))
        parts[0] = parse_expression(p, true);
    while (is_op(cur(p), ":") && k < 2) {
        slice = true;
        p->i++;
        k++;
        if (!is_op(cur(p), ":") && !is_op(cur(p), "]"))
            parts[k] = parse_expression(p, true);
    }
    if (!slice)
        return parts[0];
    jnode *s = node(p, JN_SLICE, at);
    s->b = parts[0];
    s->c = parts[1];
    s->d = parts[2];
    return s;
}

static jnode *parse_postfix(parser *p, jnode *n)
{
    for (;;) {
        const jtok *t = cur(p);
        if (is_op(t, ".")) {
            p->i++;
            const jtok *nm = cur(p);
            if (nm->kind == JT_NAME) {
                jnode *a = node(p, JN_ATTR, t);
                a->a = n;
                a->name = jstr_new(p->rt, nm->text, nm->len);
                p->i++;
                n = a;
            } else if (nm->kind == JT_INT) {
                jnode *a = node(p, JN_ITEM, t);
                a->a = n;
                a->b = node(p, JN_CONST, nm);
                a->b->val = jv_int(strtoll(nm->text, NULL, 10));
                p->i++;
                n = a;
            } else
                fail(p, "expected an attribute name after '.', found %s%s", tok_desc(nm), "");
        } else if (is_op(t, "[")) {
            p->i++;
            jnode *idx = parse_subscript_item(p);
            expect_op(p, "]");
            if (idx->kind == JN_SLICE) {
                idx->a = n;
                n = idx;
            } else {
                jnode *a = node(p, JN_ITEM, t);
                a->a = n;
                a->b = idx;
                n = a;
            }
        } else if (is_op(t, "(")) {
            jnode *c = node(p, JN_CALL, t);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else
            return n;
    }
}

/* A list [a, b] or a dict {k: v} (its args alternate keys and values), from
 * its opening bracket to `close`; a trailing comma is allowed. */
static jnode *parse_display(parser *p, jnode_kind kind, const char *close)
{
    jnode *n = node(p, kind, cur(p));
    p->i++;
    nvec items = {0};
    while (!is_op(cur(p), close)) {
        if (items.n)
            expect_op(p, ",");
        if (is_op(cur(p), close))
            break;
        nvec_push(p, &items, parse_expression(p, true));
        if (kind == JN_DICT) {
            expect_op(p, ":");
            nvec_push(p, &items, parse_expression(p, true));
        }
    }
    p->i++;
    set_args(n, &items);
    return n;
}

static jnode *parse_primary(parser *p)
{
    const jtok *t = cur(p);
    jnode *n;
    switch (t->kind) {
    case JT_NAME:
        p->i++;
        n = node(p, JN_CONST, t);
        if (!strcmp(t->text, "true") || !strcmp(t->text, "True"))
            n->val = jv_bool(true);
        else if (!strcmp(t->text, "false") || !strcmp(t->text, "False"))
            n->val = jv_bool(false);
        else if (!strcmp(t->text, "none") || !strcmp(t->text, "None"))
            n->val = jv_none();
        else {
            n->kind = JN_NAME;
            n->name = jstr_new(p->rt, t->text, t->len);
        }
        return n;
    case JT_STRING: {
        jbuf b = {0};
        while (cur(p)->kind == JT_STRING) {
            jbuf_put(p->rt, &b, cur(p)->text, cur(p)->len);
            p->i++;
        }
        n = node(p, JN_CONST, t);
        n->val = jbuf_take(p->rt, &b);
        return n;
    }
    case JT_INT:
        p->i++;
        n = node(p, JN_CONST, t);
        n->val = jv_int(strtoll(t->text, NULL, 10));
        return n;
    case JT_FLOAT:
        p->i++;
        n = node(p, JN_CONST, t);
        n->val = jv_float(strtod(t->text, NULL));
        return n;
    case JT_OP:
        if (is_op(t, "(")) {
            p->i++;
            n = parse_tuple(p, true, true);
            expect_op(p, ")");
            return n;
        }
        if (is_op(t, "["))
            return parse_display(p, JN_LIST, "]");
        if (is_op(t, "{"))
            return parse_display(p, JN_DICT, "}");
        break;
    default: break;
    }
    fail(p, "unexpected %s in an expression%s", tok_desc(t), "");
}

static jnode *parse_unary(parser *p, bool with_filter)
{
    enter(p);
    const jtok *t = cur(p);
    jnode *n;
    if (is_op(t, "-") || is_op(t, "+")) {
        p->i++;
        n = node(p, is_op(t, "-") ? JN_NEG : JN_POS, t);
        n->a = parse_unary(p, false);
    } else
        n = parse_primary(p);
    n = parse_postfix(p, n);
    if (with_filter)
        n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static jnode *binop(parser *p, const jtok *at, jop op, jnode *a, jnode *b)
{
    jnode *n = node(p, JN_BINOP, at);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

/* Binary operator tokens and what they do; a list ends with a NULL text. */
typedef struct op_name {
    const char *text;
    jop op;
} op_name;

static const op_name add_ops[] = {{"+", JOP_ADD}, {"-", JOP_SUB}, {NULL, 0}};
static const op_name concat_ops[] = {{"~", JOP_CONCAT}, {NULL, 0}};
static const op_name mul_ops[] = {
    {"*", JOP_MUL}, {"/", JOP_DIV}, {"//", JOP_FLOORDIV}, {"%", JOP_MOD}, {NULL, 0}};
static const op_name pow_ops[] = {{"**", JOP_POW}, {NULL, 0}};
static const op_name compare_ops[] = {{"==", JOP_EQ}, {"!=", JOP_NE}, {"<", JOP_LT},
                                      {"<=", JOP_LE}, {">", JOP_GT},  {">=", JOP_GE},
                                      {NULL, 0}};

/* Whether t is one of the operators in ops; if so, *op says which. */
static bool find_op(const jtok *t, const op_name *ops, jop *op)
{
    for (; ops->text; ops++)
        if (is_op(t, ops->text)) {
            *op = ops->op;
            return true;
        }
    return false;
}

/* The left-associative arithmetic levels, loosest first: + -, ~, * / // %, **. */
static const op_name *const arith_levels[] = {add_ops, concat_ops, mul_ops, pow_ops};
enum { N_ARITH_LEVELS = sizeof arith_levels / sizeof arith_levels[0] };

/* An arithmetic expression from precedence `level` of arith_levels down to
 * the unary operators. */
static jnode *parse_arith(parser *p, size_t level)
{
    if (level == N_ARITH_LEVELS)
        return parse_unary(p, true);
    jnode *n = parse_arith(p, level + 1);
    for (;;) {
        const jtok *at = cur(p);
        jop op;
        if (!find_op(at, arith_levels[level], &op))
            return n;
        p->i++;
        n = binop(p, at, op, n, parse_arith(p, level + 1));
    }
}

static jnode *parse_math1(parser *p) { return parse_arith(p, 0); }

static jnode *parse_compare(parser *p)
{
    const jtok *at = cur(p);
    jnode *first = parse_math1(p);
    nvec rest = {0};
    jop ops[64];
    for (;;) {
        const jtok *t = cur(p);
        jop op;
        if (!find_op(t, compare_ops, &op)) {
            if (is_name(t, "in"))
                op = JOP_IN;
            else if (is_name(t, "not") && is_name(peek(p, 1), "in")) {
                op = JOP_NOTIN;
                p->i++;
            } else
                break;
        }
        p->i++;
        if (rest.n == 64)
            fail(p, "more than 64 chained comparisons%s%s", "", "");
        ops[rest.n] = op;
        nvec_push(p, &rest, parse_math1(p));
    }
    if (!rest.n)
        return first;
    jnode *n = node(p, JN_COMPARE, at);
    n->a = first;
    set_args(n, &rest);
    n->ops = jrt_alloc(p->rt, rest.n * sizeof(jop));
    jcopy(n->ops, ops, rest.n * sizeof(jop));
    return n;
}

static jnode *parse_not(parser *p)
{
    if (is_name(cur(p), "not")) {
        const jtok *at = cur(p);
        p->i++;
        enter(p);
        jnode *n = node(p, JN_NOT, at);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

/* operand (word operand)*: a left-associative chain of 'and' or 'or'. */
static jnode *parse_logic(parser *p, const char *word, jnode_kind kind,
                          jnode *(*operand)(parser *))
{
    jnode *n = operand(p);
    while (is_name(cur(p), word)) {
        const jtok *at = cur(p);
        p->i++;
        jnode *a = node(p, kind, at);
        a->a = n;
        a->b = operand(p);
        n = a;
    }
    return n;
}

static jnode *parse_and(parser *p) { return parse_logic(p, "and", JN_AND, parse_not); }

static jnode *parse_or(parser *p) { return parse_logic(p, "or", JN_OR, parse_and); }

static jnode *parse_expression(parser *p, bool condexpr)
{
    enter(p);
    const jtok *at = cur(p);
    jnode *n = parse_or(p);
    while (condexpr && is_name(cur(p), "if")) {
        p->i++;
        jnode *c = node(p, JN_COND, at);
        c->a = n;
        c->b = parse_or(p);
        if (is_name(cur(p), "else")) {
            p->i++;
            c->c = parse_expression(p, true);
        }
        n = c;
    }
    p->depth--;
    return n;
}

/* Whether the current token ends a tuple being parsed. */
static bool tuple_end(parser *p)
{
    const jtok *t = cur(p);
    return t->kind == JT_VAR_END || t->kind == JT_BLOCK_END || t->kind == JT_EOF || is_op(t, ")") ||
           is_name(t, "recursive") || is_op(t, "=") || is_name(t, "in");
}

static jnode *parse_tuple(parser *p, bool condexpr, bool explicit_parens)
{
    const jtok *at = cur(p);
    nvec items = {0};
    bool comma = false;
    for (;;) {
        if (items.n)
            expect_op(p, ",");
        if (tuple_end(p))
            break;
        nvec_push(p, &items, parse_expression(p, condexpr));
        if (is_op(cur(p), ","))
            comma = true;
        else
            break;
    }
    if (!comma) {
        if (items.n)
            return items.v[0];
        if (!explicit_parens)
            fail(p, "expected an expression, found %s%s", tok_desc(cur(p)), "");
    }
    jnode *n = node(p, JN_TUPLE, at);
    set_args(n, &items);
    return n;
}

/* for/set targets: a name, name.attr (set only), or names separated by commas. */
static jnode *parse_target(parser *p, bool allow_ns)
{
    const jtok *at = cur(p);
    nvec items = {0};
    for (;;) {
        const jtok *t = cur(p);
        if (t->kind != JT_NAME)
            fail(p, "expected a variable name to assign to, found %s%s", tok_desc(t), "");
        jnode *n = node(p, JN_NAME, t);
        n->name = jstr_new(p->rt, t->text, t->len);
        p->i++;
        if (allow_ns && is_op(cur(p), ".") && peek(p, 1)->kind == JT_NAME) {
            jnode *a = node(p, JN_ATTR, cur(p));
            a->a = n;
            a->name = jstr_new(p->rt, peek(p, 1)->text, peek(p, 1)->len);
            p->i += 2;
            return a;
        }
        nvec_push(p, &items, n);
        if (!is_op(cur(p), ","))
            break;
        p->i++;
    }
    if (items.n == 1)
        return items.v[0];
    jnode *t = node(p, JN_TUPLE, at);
    set_args(t, &items);
    return t;
}

static jnode *parse_body(parser *p, const char *const *ends);

static bool at_tag(parser *p, const char *name)
{
    return cur(p)->kind == JT_BLOCK_BEGIN && is_name(peek(p, 1), name);
}

/* Consumes {% name %}. */
static void end_tag(parser *p, const char *name)
{
    p->i += 2;
    expect_block_end(p, name);
}

/* After a block tag's arguments: its '%}', the body and {% end %}. */
static jnode *tag_body(parser *p, const char *tag, const char *end)
{
    const char *const ends[] = {end, NULL};
    expect_block_end(p, tag);
    jnode *body = parse_body(p, ends);
    end_tag(p, end);
    return body;
}

static jnode *parse_filter_chain(parser *p)
{
    jnode *f = NULL;
    do {
        f = parse_filter(p, f);
    } while (is_op(cur(p), "|") && (p->i++, true));
    return f;
}

static jnode *parse_if(parser *p, const jtok *at)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    jnode *n = node(p, JN_IF, at);
    n->a = parse_tuple(p, false, false);
    expect_block_end(p, "if");
    n->body = parse_body(p, ends);
    if (at_tag(p, "elif")) {
        const jtok *e = peek(p, 1);
        p->i += 2;
        jnode *elif = parse_if(p, e);
        jnode *body = node(p, JN_BODY, e);
        body->args = jrt_alloc(p->rt, sizeof(jnode *));
        body->args[0] = elif;
        body->nargs = 1;
        n->else_body = body;
        return n; /* the nested if consumed the endif */
    }
    if (at_tag(p, "else")) {
        static const char *const ends2[] = {"endif", NULL};
        end_tag(p, "else");
        n->else_body = parse_body(p, ends2);
    }
    end_tag(p, "endif");
    return n;
}

static jnode *parse_macro_params(parser *p, jnode *n, const char *tag)
{
    nvec defaults = {0};
    const jstr **names = NULL;
    size_t cap = 0;
    expect_op(p, "(");
    while (!is_op(cur(p), ")")) {
        if (n->nkw)
            expect_op(p, ",");
        if (is_op(cur(p), ")"))
            break;
        if (cur(p)->kind != JT_NAME)
            fail(p, "expected a parameter name in '%s', found %s", tag, tok_desc(cur(p)));
        names = push_name(p, names, n->nkw++, &cap);
        p->i++;
        jnode *def = NULL;
        if (is_op(cur(p), "=")) {
            p->i++;
            def = parse_expression(p, true);
        }
        nvec_push(p, &defaults, def);
    }
    p->i++;
    n->kwnames = names;
    n->kwargs = defaults.v;
    return n;
}

static jnode *parse_statement(parser *p)
{
    const jtok *at = peek(p, 1);
    if (at->kind != JT_NAME)
        fail(p, "expected a tag name after '{%%', found %s%s", tok_desc(at), "");
    p->i += 2;
    const char *tag = at->text;
    jnode *n;
    if (!strcmp(tag, "if"))
        return parse_if(p, at);
    if (!strcmp(tag, "for")) {
        static const char *const ends[] = {"else", "endfor", NULL};
        static const char *const ends2[] = {"endfor", NULL};
        n = node(p, JN_FOR, at);
        n->target = parse_target(p, false);
        if (!is_name(cur(p), "in"))
            fail(p, "expected 'in' in the 'for' tag, found %s%s", tok_desc(cur(p)), "");
        p->i++;
        n->a = parse_tuple(p, false, false);
        if (is_name(cur(p), "if")) {
            p->i++;
            n->b = parse_expression(p, true);
        }
        if (is_name(cur(p), "recursive"))
            fail(p, "recursive for loops are not supported%s%s", "", "");
        expect_block_end(p, "for");
        n->body = parse_body(p, ends);
        if (at_tag(p, "else")) {
            end_tag(p, "else");
            n->else_body = parse_body(p, ends2);
        }
        end_tag(p, "endfor");
        return n;
    }
    if (!strcmp(tag, "set")) {
        jnode *target = parse_target(p, true);
        if (is_op(cur(p), "=")) {
            p->i++;
            n = node(p, JN_SET, at);
            n->target = target;
            n->a = parse_tuple(p, true, false);
            expect_block_end(p, "set");
            return n;
        }
        n = node(p, JN_SETBLOCK, at);
        n->target = target;
        if (is_op(cur(p), "|")) {
            p->i++;
            n->a = parse_filter_chain(p);
        }
        n->body = tag_body(p, "set", "endset");
        return n;
    }
    if (!strcmp(tag, "macro")) {
        n = node(p, JN_MACRO, at);
        if (cur(p)->kind != JT_NAME)
            fail(p, "expected the macro's name, found %s%s", tok_desc(cur(p)), "");
        n->name = jstr_new(p->rt, cur(p)->text, cur(p)->len);
        p->i++;
        parse_macro_params(p, n, "macro");
        n->body = tag_body(p, "macro", "endmacro");
        return n;
    }
    if (!strcmp(tag, "call")) {
        n = node(p, JN_CALLBLOCK, at);
        if (is_op(cur(p), "("))
            parse_macro_params(p, n, "call");
        n->a = parse_expression(p, true);
        if (n->a->kind != JN_CALL)
            fail(p, "the 'call' tag needs a macro call, as in {%% call m() %%}%s%s", "", "");
        n->body = tag_body(p, "call", "endcall");
        return n;
    }
    if (!strcmp(tag, "filter")) {
        n = node(p, JN_FILTERBLOCK, at);
        n->a = parse_filter_chain(p);
        n->body = tag_body(p, "filter", "endfilter");
        return n;
    }
    /* transformers' AssistantTracker: renders its body as it is */
    if (!strcmp(tag, "generation"))
        return tag_body(p, "generation", "endgeneration");
    if (!strcmp(tag, "break") || !strcmp(tag, "continue")) {
        n = node(p, tag[0] == 'b' ? JN_BREAK : JN_CONTINUE, at);
        expect_block_end(p, tag);
        return n;
    }
    p->i -= 1;
    if (!strcmp(tag, "include") || !strcmp(tag, "import") || !strcmp(tag, "from") ||
        !strcmp(tag, "extends") || !strcmp(tag, "block"))
        fail(p, "the '%s' tag is not supported: a chat template cannot load other templates%s",
             tag, "");
    fail(p, "unknown tag '%s'%s", tag,
         "; plume knows if, for, set, macro, call, filter, break, continue and generation");
}

static jnode *parse_body(parser *p, const char *const *ends)
{
    enter(p);
    jnode *body = node(p, JN_BODY, cur(p));
    nvec items = {0};
    for (;;) {
        const jtok *t = cur(p);
        if (t->kind == JT_EOF) {
            if (ends) {
                size_t last = 0;
                while (ends[last + 1])
                    last++;
                fail(p, "the template ended inside a block: close it with {%% %s %%}%s",
                     ends[last], "");
            }
            break;
        }
        if (t->kind == JT_TEXT) {
            jnode *n = node(p, JN_TEXT, t);
            n->val = jv_str(p->rt, t->text, t->len);
            nvec_push(p, &items, n);
            p->i++;
        } else if (t->kind == JT_VAR_BEGIN) {
            p->i++;
            jnode *n = node(p, JN_OUTPUT, t);
            n->a = parse_tuple(p, true, false);
            if (cur(p)->kind != JT_VAR_END)
                fail(p, "expected '}}' to end the expression, found %s%s", tok_desc(cur(p)), "");
            p->i++;
            nvec_push(p, &items, n);
        } else if (t->kind == JT_BLOCK_BEGIN) {
            const jtok *name = peek(p, 1);
            bool is_end = false;
            for (size_t k = 0; ends && ends[k]; k++)
                if (is_name(name, ends[k]))
                    is_end = true;
            if (is_end)
                break;
            if (name->kind == JT_NAME &&
                (!strncmp(name->text, "end", 3) || !strcmp(name->text, "else") ||
                 !strcmp(name->text, "elif"))) {
                p->i++;
                fail(p, "unexpected '%s' tag%s", name->text,
                     ends ? "; check the nesting of the blocks above it"
                          : " with no open block to close");
            }
            nvec_push(p, &items, parse_statement(p));
        } else
            fail(p, "unexpected %s%s", tok_desc(t), "");
    }
    set_args(body, &items);
    p->depth--;
    return body;
}

jnode *jparse(jrt *rt, const jtoklist *toks)
{
    parser p = {.rt = rt, .t = toks->toks, .n = toks->n};
    rt->construct = "template";
    return parse_body(&p, NULL);
}
