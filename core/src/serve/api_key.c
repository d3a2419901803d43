/* api_key_matches (api_key.h). */
#include "serve/api_key.h"

#include <string.h>

bool api_key_matches(const char *authorization, const char *key)
{
    if (!authorization || strncmp(authorization, "Bearer ", 7) != 0)
        return false;
    const char *given = authorization + 7;
    size_t kl = strlen(key), gl = strlen(given);
    /* every byte of key is compared, whatever came before; a shorter or
     * longer given key differs in length, which is folded in too */
    volatile unsigned diff = (unsigned)(kl != gl);
    for (size_t i = 0; i < kl; i++)
        diff |= (unsigned)(unsigned char)(key[i] ^ (i < gl ? given[i] : 0));
    return diff == 0;
}
