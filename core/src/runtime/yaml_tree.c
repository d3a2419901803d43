#include "runtime/yaml_tree.h"

#include <stdlib.h>
#include <string.h>
#include <yaml.h>

typedef struct builder {
    yaml_parser_t parser;
    const char *name;
    size_t n_nodes;
    plume_error *err;
} builder;

const char *ytree_type_name(ynode_type t)
{
    return t == YNODE_MAP ? "a mapping" : t == YNODE_SEQ ? "a list" : "a scalar";
}

void ytree_free(ynode *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++) {
        ytree_free(n->items[i]);
        if (n->keys)
            ytree_free(n->keys[i]);
    }
    free(n->items);
    free(n->keys);
    free(n->text);
    free(n);
}

static ynode *node_new(ynode_type t, int line, int col)
{
    ynode *n = calloc(1, sizeof *n);
    if (n) {
        n->type = t;
        n->line = line;
        n->col = col;
    }
    return n;
}

ynode *ytree_scalar(const char *text, bool quoted)
{
    ynode *n = node_new(YNODE_SCALAR, 0, 0);
    if (!n)
        return NULL;
    n->len = strlen(text);
    n->text = strdup(text);
    n->quoted = quoted;
    if (!n->text) {
        free(n);
        return NULL;
    }
    return n;
}

ynode *ytree_map(void) { return node_new(YNODE_MAP, 0, 0); }

/* Appends (key, value) to a seq (key NULL) or map. */
static int append(ynode *parent, ynode *key, ynode *value)
{
    size_t cap = parent->n;
    ynode **items = realloc(parent->items, sizeof *items * (cap + 1));
    if (!items)
        return -1;
    parent->items = items;
    if (parent->type == YNODE_MAP) {
        ynode **keys = realloc(parent->keys, sizeof *keys * (cap + 1));
        if (!keys)
            return -1;
        parent->keys = keys;
        keys[cap] = key;
    }
    items[cap] = value;
    parent->n++;
    return 0;
}

int ytree_map_add(ynode *map, const char *key, ynode *value)
{
    ynode *k = ytree_scalar(key, false);
    if (!k || append(map, k, value)) {
        ytree_free(k);
        return -1;
    }
    return 0;
}

ynode *ytree_get(const ynode *map, const char *key, const ynode **key_node)
{
    if (!map || map->type != YNODE_MAP)
        return NULL;
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->keys[i]->text, key) == 0) {
            if (key_node)
                *key_node = map->keys[i];
            return map->items[i];
        }
    return NULL;
}

static int fail_at(builder *b, const yaml_mark_t *m, const char *what)
{
    return plume_err(b->err, PLUME_ERR_INVALID, "%s:%zu:%zu: %s", b->name, m->line + 1,
                     m->column + 1, what);
}

static int next_event(builder *b, yaml_event_t *ev)
{
    if (yaml_parser_parse(&b->parser, ev))
        return 0;
    const yaml_parser_t *p = &b->parser;
    const yaml_mark_t *m = p->problem ? &p->problem_mark : &p->context_mark;
    return plume_err(b->err, PLUME_ERR_INVALID, "%s:%zu:%zu: not valid YAML: %s%s%s", b->name,
                     m->line + 1, m->column + 1, p->problem ? p->problem : "parse error",
                     p->context ? " " : "", p->context ? p->context : "");
}

static int parse_node(builder *b, yaml_event_t *ev, int depth, ynode **out);

/* Reads the children of a seq or map until its end event. */
static int parse_children(builder *b, ynode *parent, int depth)
{
    for (;;) {
        yaml_event_t ev;
        if (next_event(b, &ev))
            return -1;
        if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        ynode *key = NULL, *value = NULL;
        if (parent->type == YNODE_MAP) {
            yaml_mark_t km = ev.start_mark;
            if (parse_node(b, &ev, depth + 1, &key))
                return -1;
            if (key->type != YNODE_SCALAR) {
                ytree_free(key);
                return fail_at(b, &km, "a key must be a plain name, not a list or mapping");
            }
            if (ytree_get(parent, key->text, NULL)) {
                int rc = plume_err(b->err, PLUME_ERR_INVALID,
                                   "%s:%d:%d: key '%s' appears twice in this mapping; keep one",
                                   b->name, key->line, key->col, key->text);
                ytree_free(key);
                return rc;
            }
            if (next_event(b, &ev)) {
                ytree_free(key);
                return -1;
            }
        }
        if (parse_node(b, &ev, depth + 1, &value) || append(parent, key, value)) {
            if (!b->err || !b->err->msg[0])
                plume_err(b->err, PLUME_ERR_NOMEM, "%s: out of memory", b->name);
            ytree_free(key);
            ytree_free(value);
            return -1;
        }
    }
}

/* Builds the node starting with ev (which it consumes). */
static int parse_node(builder *b, yaml_event_t *ev, int depth, ynode **out)
{
    *out = NULL;
    yaml_mark_t m = ev->start_mark;
    const yaml_char_t *anchor = NULL, *tag = NULL;
    ynode_type t;
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        t = YNODE_SCALAR;
        anchor = ev->data.scalar.anchor;
        tag = ev->data.scalar.tag;
        break;
    case YAML_SEQUENCE_START_EVENT:
        t = YNODE_SEQ;
        anchor = ev->data.sequence_start.anchor;
        tag = ev->data.sequence_start.tag;
        break;
    case YAML_MAPPING_START_EVENT:
        t = YNODE_MAP;
        anchor = ev->data.mapping_start.anchor;
        tag = ev->data.mapping_start.tag;
        break;
    case YAML_ALIAS_EVENT:
        yaml_event_delete(ev);
        return fail_at(b, &m, "aliases (*name) are not supported in pipelines; write the value out");
    default:
        yaml_event_delete(ev);
        return fail_at(b, &m, "unexpected YAML event");
    }
    if (anchor || tag) {
        yaml_event_delete(ev);
        return fail_at(b, &m, anchor ? "anchors (&name) are not supported in pipelines; remove it"
                                     : "tags (!tag) are not supported in pipelines; remove it");
    }
    if (depth > YTREE_MAX_DEPTH || ++b->n_nodes > YTREE_MAX_NODES) {
        yaml_event_delete(ev);
        return fail_at(b, &m, depth > YTREE_MAX_DEPTH
                                  ? "nested too deeply (a pipeline needs at most a few levels)"
                                  : "too many values for a pipeline file");
    }
    ynode *n = node_new(t, (int)m.line + 1, (int)m.column + 1);
    if (!n) {
        yaml_event_delete(ev);
        return plume_err(b->err, PLUME_ERR_NOMEM, "%s: out of memory", b->name);
    }
    if (t == YNODE_SCALAR) {
        n->len = ev->data.scalar.length;
        n->text = malloc(n->len + 1);
        n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        if (n->text) {
            memcpy(n->text, ev->data.scalar.value, n->len);
            n->text[n->len] = '\0';
        }
        yaml_event_delete(ev);
        if (!n->text) {
            ytree_free(n);
            return plume_err(b->err, PLUME_ERR_NOMEM, "%s: out of memory", b->name);
        }
        if (strlen(n->text) != n->len) {
            ytree_free(n);
            return fail_at(b, &m, "a value contains a NUL character");
        }
        *out = n;
        return 0;
    }
    yaml_event_delete(ev);
    if (parse_children(b, n, depth)) {
        ytree_free(n);
        return -1;
    }
    *out = n;
    return 0;
}

int ytree_parse(const char *text, size_t len, const char *name, ynode **out, plume_error *err)
{
    *out = NULL;
    if (err)
        err->msg[0] = '\0';
    builder b = {.name = name, .err = err};
    if (!yaml_parser_initialize(&b.parser))
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", name);
    yaml_parser_set_input_string(&b.parser, (const unsigned char *)text, len);
    int rc = -1;
    ynode *root = NULL;
    yaml_event_t ev;
    /* stream start, then a document or the stream end */
    if (next_event(&b, &ev))
        goto done;
    yaml_event_delete(&ev);
    if (next_event(&b, &ev))
        goto done;
    if (ev.type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&ev);
        rc = 0;
        goto done;
    }
    yaml_event_delete(&ev); /* document start */
    if (next_event(&b, &ev) || parse_node(&b, &ev, 0, &root))
        goto done;
    if (next_event(&b, &ev)) /* document end */
        goto done;
    yaml_event_delete(&ev);
    if (next_event(&b, &ev))
        goto done;
    if (ev.type != YAML_STREAM_END_EVENT) {
        yaml_mark_t m = ev.start_mark;
        yaml_event_delete(&ev);
        fail_at(&b, &m, "a pipeline file holds one YAML document; remove the second one");
        goto done;
    }
    yaml_event_delete(&ev);
    *out = root;
    root = NULL;
    rc = 0;
done:
    ytree_free(root);
    yaml_parser_delete(&b.parser);
    return rc;
}
