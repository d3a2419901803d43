/* The one table of sampling parameters (plume/sampler.h): names, types,
 * ranges, defaults; the defaults and the validation read it. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "plume/sampler.h"

static const plume_sampling_param table[] = {
    {"temperature", false, 0, 100, false, 0.8, "0 = greedy"},
    {"top_k", true, 0, 1 << 30, false, 40, "0 = off"},
    {"top_p", false, 0, 1, true, 0.95, "1 = off"},
    {"min_p", false, 0, 0.999999, false, 0.05, "0 = off"},
    {"repetition_penalty", false, 0, 100, true, 1.0, "1 = off"},
    {"repeat_last_n", true, -1, 1 << 30, false, 64, "-1 = the whole history"},
    {"presence_penalty", false, -2, 2, false, 0, "0 = off"},
    {"frequency_penalty", false, -2, 2, false, 0, "0 = off"},
};
#define N_PARAMS (sizeof table / sizeof table[0])

/* Where each entry lives in plume_sampling_params (int32_t for an integer
 * entry, float for a real one), in the table's order. */
static const size_t offsets[N_PARAMS] = {
    offsetof(plume_sampling_params, temperature),
    offsetof(plume_sampling_params, top_k),
    offsetof(plume_sampling_params, top_p),
    offsetof(plume_sampling_params, min_p),
    offsetof(plume_sampling_params, repetition_penalty),
    offsetof(plume_sampling_params, repeat_last_n),
    offsetof(plume_sampling_params, presence_penalty),
    offsetof(plume_sampling_params, frequency_penalty),
};

const plume_sampling_param *plume_sampling_param_list(size_t *n)
{
    *n = N_PARAMS;
    return table;
}

const plume_sampling_param *plume_sampling_param_find(const char *name)
{
    for (size_t i = 0; i < N_PARAMS; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

bool plume_sampling_param_ok(const plume_sampling_param *f, double v)
{
    if (!(f->lo_open ? v > f->lo : v >= f->lo) || !(v <= f->hi))
        return false;
    return !f->integer || v == floor(v);
}

void plume_sampling_param_range(const plume_sampling_param *f, char *buf, size_t cap)
{
    snprintf(buf, cap, "%c%g, %g]", f->lo_open ? '(' : '[', f->lo, f->hi);
}

void plume_sampling_param_store(plume_sampling_params *p, const plume_sampling_param *f, double v)
{
    char *at = (char *)p + offsets[f - table];
    if (f->integer) {
        int32_t x = (int32_t)v;
        memcpy(at, &x, sizeof x);
    } else {
        float x = (float)v;
        /* an accepted value stays accepted in single precision: one that
         * rounds onto or past an end (top_p 1e-60 to 0) takes the nearest
         * float inside the range instead */
        if (plume_sampling_param_ok(f, v)) {
            if (!((double)x <= f->hi))
                x = nextafterf(x, -INFINITY);
            if (f->lo_open ? !((double)x > f->lo) : !((double)x >= f->lo))
                x = nextafterf(x, INFINITY);
        }
        memcpy(at, &x, sizeof x);
    }
}

double plume_sampling_param_load(const plume_sampling_params *p, const plume_sampling_param *f)
{
    const char *at = (const char *)p + offsets[f - table];
    if (f->integer) {
        int32_t x;
        memcpy(&x, at, sizeof x);
        return x;
    }
    float x;
    memcpy(&x, at, sizeof x);
    return x;
}

plume_sampling_params plume_sampling_defaults(void)
{
    plume_sampling_params p;
    memset(&p, 0, sizeof p);
    for (size_t i = 0; i < N_PARAMS; i++)
        plume_sampling_param_store(&p, &table[i], table[i].def);
    p.seed = 0;
    return p;
}

int plume_sampling_validate(const plume_sampling_params *p, plume_error *err)
{
    for (size_t i = 0; i < N_PARAMS; i++) {
        const plume_sampling_param *f = &table[i];
        double v = plume_sampling_param_load(p, f);
        if (!plume_sampling_param_ok(f, v)) {
            char range[64];
            plume_sampling_param_range(f, range, sizeof range);
            return plume_err(err, PLUME_ERR_INVALID, "%s must be in %s (%s), got %g", f->name,
                             range, f->neutral, v);
        }
    }
    return 0;
}
