/* The API key check of plume serve and plume router. */
#ifndef PLUME_SERVE_API_KEY_H
#define PLUME_SERVE_API_KEY_H

#include <stdbool.h>

/* True when authorization (an Authorization header's value, NULL when the
 * header is missing) is "Bearer " followed by exactly key.  The comparison
 * of the key takes a time that depends on key's length only, never on
 * where or whether the two differ, so that a client cannot find the key a
 * byte at a time by timing refusals. */
bool api_key_matches(const char *authorization, const char *key);

#endif
