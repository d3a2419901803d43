/* The built-in sampler provider "standard" (plume/sampler.h). */
#include <stdlib.h>

#include "runtime/builtin.h"

int builtin_standard_params(const plume_settings *s, plume_sampling_params *p, plume_error *err)
{
    size_t n;
    const plume_sampling_param *t = plume_sampling_param_list(&n);
    const char *keys[16];
    plume_sampling_params v = plume_sampling_defaults();
    for (size_t i = 0; i < n; i++) {
        const plume_sampling_param *f = &t[i];
        keys[i] = f->name;
        double x;
        int64_t k;
        int rc = f->integer ? plume_settings_int(s, f->name, (int64_t)f->def, (int64_t)f->lo,
                                                 (int64_t)f->hi, &k, err)
                 : f->lo_open ? plume_settings_float_open_lo(s, f->name, f->def, f->lo, f->hi, &x,
                                                             err)
                              : plume_settings_float(s, f->name, f->def, f->lo, f->hi, &x, err);
        if (rc)
            return -1;
        plume_sampling_param_store(&v, f, f->integer ? (double)k : x);
    }
    if (plume_settings_check_keys(s, keys, n, err))
        return -1;
    *p = v;
    return 0;
}

static int standard_validate(const plume_settings *s, plume_error *err)
{
    plume_sampling_params p;
    return builtin_standard_params(s, &p, err);
}

int builtin_standard_create_params(const plume_sampling_params *p, int32_t n_vocab,
                                   plume_sampler_state **out, plume_error *err)
{
    plume_sampler *smp;
    if (plume_sampler_create(p, n_vocab, &smp, err))
        return -1;
    *out = (plume_sampler_state *)smp;
    return 0;
}

static int standard_create(const plume_settings *s, int32_t n_vocab, uint64_t seed,
                           plume_sampler_state **out, plume_error *err)
{
    plume_sampling_params p;
    if (builtin_standard_params(s, &p, err))
        return -1;
    p.seed = seed;
    return builtin_standard_create_params(&p, n_vocab, out, err);
}

static void standard_destroy(plume_sampler_state *st) { plume_sampler_free((plume_sampler *)st); }

static int32_t standard_sample(plume_sampler_state *st, const float *logits,
                               const int32_t *history, size_t n_history)
{
    return plume_sampler_sample((plume_sampler *)st, logits, history, n_history);
}

static int32_t standard_probs(plume_sampler_state *st, const float *logits,
                              const int32_t *history, size_t n_history, float *probs)
{
    return plume_sampler_probs((plume_sampler *)st, logits, history, n_history, probs);
}

static plume_rng *standard_rng(plume_sampler_state *st)
{
    return plume_sampler_rng((plume_sampler *)st);
}

const plume_sampler_vtable plume_builtin_standard_sampler = {
    .struct_size = sizeof(plume_sampler_vtable),
    .interface_version = PLUME_SAMPLER_INTERFACE_VERSION,
    .name = PLUME_BUILTIN_SAMPLER,
    .validate = standard_validate,
    .create = standard_create,
    .destroy = standard_destroy,
    .sample = standard_sample,
    .probs = standard_probs,
    .rng = standard_rng,
};
