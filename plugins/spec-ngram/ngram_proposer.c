/* The ngram proposer: stateless per sequence (it reads the tokens the
 * engine passes each step), so release/accepted have nothing to do. */
#include "ngram_proposer.h"

#include <stdlib.h>

#include "ngram_lookup.h"

struct plume_proposer {
    plume_ngram_settings s;
};

static int ngram_create(const void *settings, int32_t n_vocab, plume_proposer **out,
                        plume_error *err)
{
    (void)n_vocab;
    plume_ngram_settings s = {1, 4};
    if (settings)
        s = *(const plume_ngram_settings *)settings;
    if (s.prompt_lookup_min < 1 || s.prompt_lookup_max < s.prompt_lookup_min ||
        s.prompt_lookup_max > 64)
        return plume_err(err, PLUME_ERR_INVALID,
                         "ngram: need 1 <= prompt_lookup_min <= prompt_lookup_max <= 64, got %d "
                         "and %d",
                         s.prompt_lookup_min, s.prompt_lookup_max);
    plume_proposer *p = malloc(sizeof *p);
    if (!p)
        return plume_err(err, PLUME_ERR_NOMEM, "ngram: out of memory");
    p->s = s;
    *out = p;
    return 0;
}

static void ngram_destroy(plume_proposer *p) { free(p); }

static int ngram_propose(plume_proposer *p, const plume_propose_seq *seqs, size_t n,
                         plume_draft *drafts, plume_error *err)
{
    (void)err;
    for (size_t i = 0; i < n; i++) {
        drafts[i].n = plume_ngram_lookup(seqs[i].tokens, seqs[i].n_tokens, p->s.prompt_lookup_min,
                                         p->s.prompt_lookup_max, seqs[i].k, drafts[i].tokens);
        drafts[i].has_probs = 0; /* a point mass: no probabilities */
    }
    return 0;
}

static const plume_proposer_vtable vtable = {
    .struct_size = sizeof(plume_proposer_vtable),
    .interface_version = PLUME_PROPOSER_INTERFACE_VERSION,
    .name = "ngram",
    .create = ngram_create,
    .destroy = ngram_destroy,
    .propose = ngram_propose,
    .accepted = NULL,
    .release = NULL,
};

const plume_proposer_vtable *plume_ngram_proposer(void) { return &vtable; }
