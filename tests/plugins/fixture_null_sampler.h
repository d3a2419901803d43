/* The callbacks of a sampler that does nothing (no state, always token 0),
 * for fixture plugins that only need a sampler to register. */
#ifndef PLUME_TEST_FIXTURE_NULL_SAMPLER_H
#define PLUME_TEST_FIXTURE_NULL_SAMPLER_H

#include "plume/plugin.h"

/* Token 0, whatever the logits. */
static int32_t null_sample(plume_sampler_state *st, const float *l, const int32_t *h, size_t n)
{
    (void)st;
    (void)l;
    (void)h;
    (void)n;
    return 0;
}

/* No state: *out is NULL. */
static int null_create(const plume_settings *s, int32_t nv, uint64_t seed,
                       plume_sampler_state **out, plume_error *err)
{
    (void)s;
    (void)nv;
    (void)seed;
    (void)err;
    *out = NULL;
    return 0;
}

/* Nothing to free. */
static void null_destroy(plume_sampler_state *st) { (void)st; }

#endif
