/* plume — settings: a provider's typed, read-only view of its part of a
 * pipeline file.
 *
 * A pipeline section such as
 *
 *     sampling: { method: typical, typical_p: 0.9, temperature: 0.7 }
 *
 * reaches the selected provider as a plume_settings holding the keys that
 * are the provider's own (here typical_p and temperature; "method" belongs to
 * the pipeline).  Every value remembers where it was written, so the getters
 * below report errors as
 *
 *     pipe.yaml:4:35: sampling.typical_p must be a number in (0, 1], got 1.5
 *
 * and a provider's validate() is usually a list of getter calls followed by
 * plume_settings_check_keys().  The getters also record the value each key
 * resolved to (defaults included), which is what `plume check` prints.
 *
 * Only plain (unquoted) scalars are numbers or booleans; quoted text is a
 * string.  Booleans are true/false.  A settings object may also be built in
 * code (plume_settings_new) to give a provider settings without a file. */
#ifndef PLUME_SETTINGS_H
#define PLUME_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct plume_settings plume_settings;

/* Number of keys, and the i-th key in file order. */
PLUME_API size_t plume_settings_count(const plume_settings *s);
PLUME_API const char *plume_settings_key(const plume_settings *s, size_t i);
/* True when the key was written. */
PLUME_API bool plume_settings_has(const plume_settings *s, const char *key);
/* The dotted path of the section, e.g. "sampling" or "speculative.draft". */
PLUME_API const char *plume_settings_path(const plume_settings *s);

/* Typed getters.  An absent key yields def (recorded as a default); a
 * present key must have the type and lie in [lo, hi], else -1 with a message
 * naming file:line:column, the key, the accepted range and what was found. */
PLUME_API int plume_settings_int(const plume_settings *s, const char *key, int64_t def, int64_t lo,
                                 int64_t hi, int64_t *out, plume_error *err);
PLUME_API int plume_settings_float(const plume_settings *s, const char *key, double def, double lo,
                                   double hi, double *out, plume_error *err);
/* Like plume_settings_float, but the lower bound is exclusive: (lo, hi]. */
PLUME_API int plume_settings_float_open_lo(const plume_settings *s, const char *key, double def,
                                           double lo, double hi, double *out, plume_error *err);
PLUME_API int plume_settings_bool(const plume_settings *s, const char *key, bool def, bool *out,
                                  plume_error *err);
/* Any scalar as text (the string stays valid as long as s). */
PLUME_API int plume_settings_string(const plume_settings *s, const char *key, const char *def,
                                    const char **out, plume_error *err);
/* One of n choices; *out is its index.  The message lists the choices. */
PLUME_API int plume_settings_choice(const plume_settings *s, const char *key,
                                    const char *const *choices, size_t n, size_t def, size_t *out,
                                    plume_error *err);
/* A file or directory path; a relative one resolves against the pipeline
 * file's directory first, then the current directory (the first that
 * exists; if neither does, the pipeline-relative path).  *out is malloc'd. */
PLUME_API int plume_settings_path_value(const plume_settings *s, const char *key, char **out,
                                        plume_error *err);
/* A nested mapping (e.g. a draft model's own section); *out stays valid as
 * long as s.  An absent key gives *out = NULL and returns 0. */
PLUME_API int plume_settings_child(const plume_settings *s, const char *key,
                                   const plume_settings **out, plume_error *err);

/* Fails on the first key not in accepted[0..n), listing the accepted keys
 * (the provider's and the pipeline's own keys of this section). */
PLUME_API int plume_settings_check_keys(const plume_settings *s, const char *const *accepted,
                                        size_t n, plume_error *err);

/* For checks the getters cannot express: fills err with
 * "file:line:column: <path>.<key>: <message>" positioned at key's value (at
 * the section when key is NULL or absent).  Returns -1. */
PLUME_API int plume_settings_error(const plume_settings *s, const char *key, plume_error *err,
                                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Settings built in code: an empty section named path ("sampling"). */
PLUME_API int plume_settings_new(const char *path, plume_settings **out, plume_error *err);
/* plume_settings_new whose error messages name source (copied: "--spec
 * ngram:k=4", a checkpoint's config file) where plume_settings_new's say
 * "(settings)": for settings read from text that is not a pipeline file. */
PLUME_API int plume_settings_new_in(const char *source, const char *path, plume_settings **out,
                                    plume_error *err);
/* Adds key: value, value parsed as an unquoted YAML scalar would be. */
PLUME_API int plume_settings_set(plume_settings *s, const char *key, const char *value,
                                 plume_error *err);
PLUME_API void plume_settings_free(plume_settings *s);

#ifdef __cplusplus
}
#endif
#endif
