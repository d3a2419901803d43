/* A small YAML document tree read with libyaml's event parser: mappings,
 * sequences and scalars, each with its 1-based line and column.  Anchors,
 * aliases, tags and multi-document streams are refused (a pipeline never
 * needs them, and refusing aliases keeps hostile input linear).  Depth and
 * node count are bounded. */
#ifndef PLUME_RUNTIME_YAML_TREE_H
#define PLUME_RUNTIME_YAML_TREE_H

#include <stdbool.h>
#include <stddef.h>

#include "plume/error.h"

typedef enum ynode_type { YNODE_SCALAR, YNODE_SEQ, YNODE_MAP } ynode_type;

typedef struct ynode ynode;
struct ynode {
    ynode_type type;
    int line, col;       /* 1-based */
    char *text;          /* scalar: its text (NUL-terminated) */
    size_t len;
    bool quoted;         /* scalar: written quoted or as a block scalar */
    size_t n;            /* seq: items; map: pairs */
    ynode **items;       /* seq: items; map: values */
    ynode **keys;        /* map: keys (scalars) */
};

#define YTREE_MAX_DEPTH 16
#define YTREE_MAX_NODES 4096

/* Parses len bytes; name prefixes messages ("name:line:col: ...").  An
 * empty document yields *out = NULL and returns 0.  Duplicate mapping keys
 * and non-scalar keys are errors. */
int ytree_parse(const char *text, size_t len, const char *name, ynode **out, plume_error *err);
void ytree_free(ynode *n);

/* A new scalar / empty map node (for settings built in code). */
ynode *ytree_scalar(const char *text, bool quoted);
ynode *ytree_map(void);
/* Appends key: value to a map; takes value.  -1 when out of memory. */
int ytree_map_add(ynode *map, const char *key, ynode *value);
/* The value under key in a map, or NULL; *key_node (if non-NULL) gets the key. */
ynode *ytree_get(const ynode *map, const char *key, const ynode **key_node);
/* "a mapping", "a list", "a scalar". */
const char *ytree_type_name(ynode_type t);

#endif
