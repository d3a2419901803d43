/* The parsed template: expression and statement nodes. */
#ifndef PLUME_TEMPLATE_AST_H
#define PLUME_TEMPLATE_AST_H

#include <stddef.h>

#include "template/value.h"

typedef enum jnode_kind {
    /* expressions */
    JN_CONST,    /* val */
    JN_NAME,     /* name */
    JN_ATTR,     /* a.name */
    JN_ITEM,     /* a[b] */
    JN_SLICE,    /* a[b:c:d], each may be NULL */
    JN_CALL,     /* a(args, kw=...) */
    JN_FILTER,   /* a|name(args); a NULL in a filter block or block set */
    JN_TEST,     /* a is [not] name(args) */
    JN_BINOP,    /* a op b: + - * / // % ** ~ */
    JN_NEG,      /* -a */
    JN_POS,      /* +a */
    JN_NOT,      /* not a */
    JN_AND,
    JN_OR,
    JN_COMPARE,  /* a op b op c ...: ops[], args[] */
    JN_COND,     /* a if b else c (c may be NULL) */
    JN_LIST,     /* [args] */
    JN_TUPLE,    /* (args) */
    JN_DICT,     /* {args[2i]: args[2i+1]} */
    /* statements */
    JN_TEXT,     /* val: literal text */
    JN_OUTPUT,   /* {{ a }} */
    JN_IF,       /* if a: body else: else_body (elif nests an if in else_body) */
    JN_FOR,      /* for target in a [if b] [recursive]: body else: else_body */
    JN_SET,      /* set target = a */
    JN_SETBLOCK, /* set target [| filters in a] %} body {% endset */
    JN_MACRO,    /* macro name(params = defaults): body */
    JN_CALLBLOCK,/* call(params) a: body */
    JN_FILTERBLOCK, /* filter a: body */
    JN_BREAK,
    JN_CONTINUE,
    JN_BODY      /* a list of statements: args[] */
} jnode_kind;

typedef enum jop {
    JOP_ADD, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_CONCAT,
    JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN
} jop;

struct jfilter_def;
struct jtest_def;

typedef struct jnode {
    jnode_kind kind;
    int line, col;
    jop op;
    bool negate;          /* JN_TEST: is not; JN_FOR: recursive */
    jv val;               /* JN_CONST, JN_TEXT */
    const jstr *name;     /* JN_NAME, JN_ATTR, JN_FILTER, JN_TEST, JN_MACRO */
    struct jnode *a, *b, *c, *d;
    struct jnode *target; /* JN_FOR, JN_SET, JN_SETBLOCK: a JN_NAME, JN_TUPLE of names, or JN_ATTR of a name */
    struct jnode **args;  /* call/filter/test positional args; list/tuple/dict items; body statements; macro params */
    size_t nargs;
    const jstr **kwnames; /* keyword argument names; macro parameter names */
    struct jnode **kwargs;/* keyword argument values; macro defaults (NULL: none) */
    size_t nkw;
    jop *ops;             /* JN_COMPARE */
    struct jnode *body, *else_body; /* JN_BODY nodes */
    const struct jfilter_def *filter;
    const struct jtest_def *test;
} jnode;

#endif
