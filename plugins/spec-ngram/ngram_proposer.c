/* The ngram proposer: stateless per sequence (it reads the tokens the
 * engine passes each step), so release/accepted have nothing to do, and
 * its drafts are lookups, so it ignores the sampling parameters. */
#include "ngram_proposer.h"

#include <stdlib.h>

#include "ngram_lookup.h"

struct plume_proposer {
    int32_t min_n, max_n;
};

static const char *const keys[] = {"method", "num_speculative_tokens", "prompt_lookup_min",
                                   "prompt_lookup_max"};

/* Reads and checks the settings (NULL = defaults). */
static int read_settings(const plume_settings *s, int32_t *min_n, int32_t *max_n,
                         plume_error *err)
{
    int64_t lo = 1, hi = 4;
    if (s && (plume_settings_check_keys(s, keys, sizeof keys / sizeof *keys, err) ||
              plume_settings_int(s, "prompt_lookup_min", 1, 1, 64, &lo, err) ||
              plume_settings_int(s, "prompt_lookup_max", 4, 1, 64, &hi, err)))
        return -1;
    if (hi < lo) {
        if (s)
            return plume_settings_error(s, "prompt_lookup_max", err,
                                        "must be >= prompt_lookup_min (%lld), got %lld",
                                        (long long)lo, (long long)hi);
        return plume_err(err, PLUME_ERR_INVALID, "ngram: prompt_lookup_max < prompt_lookup_min");
    }
    *min_n = (int32_t)lo;
    *max_n = (int32_t)hi;
    return 0;
}

static int ngram_validate(const plume_settings *s, plume_error *err)
{
    int32_t a = 0, b = 0;
    return read_settings(s, &a, &b, err);
}

/* Prompt lookup needs nothing of the host: no model, no device memory. */
static int ngram_create(const plume_proposer_host *host, const plume_settings *s,
                        plume_proposer **out, plume_error *err)
{
    (void)host;
    int32_t min_n = 1, max_n = 4;
    if (read_settings(s, &min_n, &max_n, err))
        return -1;
    plume_proposer *p = malloc(sizeof *p);
    if (!p)
        return plume_err(err, PLUME_ERR_NOMEM, "ngram: out of memory");
    p->min_n = min_n;
    p->max_n = max_n;
    *out = p;
    return 0;
}

static void ngram_destroy(plume_proposer *p) { free(p); }

static int ngram_propose(plume_proposer *p, const plume_propose_seq *seqs, size_t n,
                         plume_draft *drafts, plume_error *err)
{
    (void)err;
    for (size_t i = 0; i < n; i++) {
        drafts[i].n = plume_ngram_lookup(seqs[i].tokens, seqs[i].n_tokens, p->min_n, p->max_n, seqs[i].k, drafts[i].tokens);
        drafts[i].has_probs = 0; /* a point mass: no probabilities */
    }
    return 0;
}

static const plume_proposer_vtable vtable = {
    .struct_size = sizeof(plume_proposer_vtable),
    .interface_version = PLUME_PROPOSER_INTERFACE_VERSION,
    .name = "ngram",
    .validate = ngram_validate,
    .create = ngram_create,
    .destroy = ngram_destroy,
    .propose = ngram_propose,
    .accepted = NULL,
    .release = NULL,
};

const plume_proposer_vtable *plume_ngram_proposer(void) { return &vtable; }
