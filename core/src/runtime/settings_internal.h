/* How the pipeline builds settings views over its YAML tree, and reads back
 * what the getters resolved (for `plume check`). */
#ifndef PLUME_RUNTIME_SETTINGS_INTERNAL_H
#define PLUME_RUNTIME_SETTINGS_INTERNAL_H

#include "plume/settings.h"
#include "runtime/yaml_tree.h"

/* A view of map (borrowed: it must outlive the view; NULL = an empty
 * section) at dotted path, from file (borrowed), with base_dir for paths.
 * hidden[0..n_hidden) are the pipeline's own keys of this section: not
 * visible through the view, but listed as accepted in unknown-key
 * messages.  hidden is borrowed (static storage). */
int settings_view(const ynode *map, const char *file, const char *base_dir, const char *path,
                  const char *const *hidden, size_t n_hidden, int line, int col,
                  plume_settings **out, plume_error *err);

/* The map node the view reads (NULL for an empty section). */
const ynode *settings_map(const plume_settings *s);

/* One resolved key in the order the getters first asked for it. */
typedef struct settings_resolved {
    const char *key;
    const char *value;   /* rendered as YAML */
    int is_default;
} settings_resolved;

size_t settings_n_resolved(const plume_settings *s);
settings_resolved settings_resolved_at(const plume_settings *s, size_t i);
/* Clears the record (before a provider validates, so only its reads show). */
void settings_clear_resolved(plume_settings *s);

#endif
