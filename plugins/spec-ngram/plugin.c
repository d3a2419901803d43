/* spec-ngram: prompt-lookup speculative decoding as a plume plugin. */
#include "ngram_proposer.h"
#include "plume/plugin.h"

static int spec_ngram_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    return plume_register_proposer(reg, plume_ngram_proposer());
}

PLUME_PLUGIN_DEFINE("spec-ngram", "0.1.0",
                    "prompt lookup: drafts the tokens that followed the longest recurring suffix n-gram",
                    "Apache-2.0", spec_ngram_init)
