/* Fixture plugin "good": a sampler provider "fixture-argmax" (always the
 * highest logit, plus `offset` positions in the vocabulary) and a proposer
 * "fixture-repeat" (drafts the last token k times).  Also built with
 * -DPLUME_PLUGIN_STATIC into the loader test, and as plume-misnamed.so. */
#include <stdlib.h>

#include "plume/plugin.h"

struct plume_sampler_state {
    int32_t n_vocab;
    int64_t offset;
};

static int argmax_validate(const plume_settings *s, plume_error *err)
{
    static const char *const keys[] = {"offset"};
    int64_t off;
    return plume_settings_int(s, "offset", 0, 0, 1000, &off, err) ||
                   plume_settings_check_keys(s, keys, 1, err)
               ? -1
               : 0;
}

static int argmax_create(const plume_settings *s, int32_t n_vocab, uint64_t seed,
                         plume_sampler_state **out, plume_error *err)
{
    (void)seed;
    plume_sampler_state *st = malloc(sizeof *st);
    if (!st)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    st->n_vocab = n_vocab;
    if (plume_settings_int(s, "offset", 0, 0, 1000, &st->offset, err)) {
        free(st);
        return -1;
    }
    *out = st;
    return 0;
}

static void argmax_destroy(plume_sampler_state *st) { free(st); }

static int32_t argmax_sample(plume_sampler_state *st, const float *logits, const int32_t *h,
                             size_t n)
{
    (void)h;
    (void)n;
    int32_t best = 0;
    for (int32_t i = 1; i < st->n_vocab; i++)
        if (logits[i] > logits[best])
            best = i;
    return (int32_t)((best + st->offset) % st->n_vocab);
}

static const plume_sampler_vtable argmax = {
    .struct_size = sizeof(plume_sampler_vtable),
    .interface_version = PLUME_SAMPLER_INTERFACE_VERSION,
    .name = "fixture-argmax",
    .validate = argmax_validate,
    .create = argmax_create,
    .destroy = argmax_destroy,
    .sample = argmax_sample,
};

static int repeat_create(const plume_proposer_host *host, const plume_settings *settings,
                         plume_proposer **out, plume_error *err)
{
    (void)settings;
    (void)host;
    (void)err;
    *out = (plume_proposer *)malloc(1);
    return *out ? 0 : -1;
}

static void repeat_destroy(plume_proposer *p) { free(p); }

static int repeat_propose(plume_proposer *p, const plume_propose_seq *seqs, size_t n,
                          plume_draft *drafts, plume_error *err)
{
    (void)p;
    (void)err;
    for (size_t i = 0; i < n; i++) {
        drafts[i].n = seqs[i].n_tokens > 0 ? seqs[i].k : 0;
        for (int32_t j = 0; j < drafts[i].n; j++)
            drafts[i].tokens[j] = seqs[i].tokens[seqs[i].n_tokens - 1];
        drafts[i].has_probs = 0;
    }
    return 0;
}

static const plume_proposer_vtable repeat = {
    .struct_size = sizeof(plume_proposer_vtable),
    .interface_version = PLUME_PROPOSER_INTERFACE_VERSION,
    .name = "fixture-repeat",
    .create = repeat_create,
    .destroy = repeat_destroy,
    .propose = repeat_propose,
};

static int good_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    return plume_register_sampler(reg, &argmax) || plume_register_proposer(reg, &repeat) ? -1 : 0;
}

PLUME_PLUGIN_DEFINE("good", "1.2.3", "fixture: an argmax sampler and a repeat proposer",
                    "Apache-2.0", good_init)
