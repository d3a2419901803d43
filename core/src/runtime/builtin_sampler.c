/* The built-in sampler provider "standard" (plume/sampler.h). */
#include <stdlib.h>

#include "runtime/builtin.h"

int builtin_standard_params(const plume_settings *s, plume_sampling_params *p, plume_error *err)
{
    static const char *const keys[] = {"temperature", "top_k", "top_p", "min_p",
                                       "repetition_penalty", "repeat_last_n",
                                       "presence_penalty", "frequency_penalty"};
    plume_sampling_params d = plume_sampling_defaults();
    double t, tp, mp, rp, pp, fp;
    int64_t k, rn;
    if (plume_settings_float(s, "temperature", d.temperature, 0.0, 100.0, &t, err) ||
        plume_settings_int(s, "top_k", d.top_k, 0, 1 << 30, &k, err) ||
        plume_settings_float_open_lo(s, "top_p", d.top_p, 0.0, 1.0, &tp, err) ||
        plume_settings_float(s, "min_p", d.min_p, 0.0, 0.999999, &mp, err) ||
        plume_settings_float_open_lo(s, "repetition_penalty", d.repetition_penalty, 0.0, 100.0,
                                     &rp, err) ||
        plume_settings_int(s, "repeat_last_n", d.repeat_last_n, -1, 1 << 30, &rn, err) ||
        plume_settings_float(s, "presence_penalty", d.presence_penalty, -2.0, 2.0, &pp, err) ||
        plume_settings_float(s, "frequency_penalty", d.frequency_penalty, -2.0, 2.0, &fp, err) ||
        plume_settings_check_keys(s, keys, sizeof keys / sizeof *keys, err))
        return -1;
    *p = d;
    p->temperature = (float)t;
    p->top_k = (int32_t)k;
    p->top_p = (float)tp;
    p->min_p = (float)mp;
    p->repetition_penalty = (float)rp;
    p->repeat_last_n = (int32_t)rn;
    p->presence_penalty = (float)pp;
    p->frequency_penalty = (float)fp;
    p->seed = 0;
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
