/* spec-draft: draft-model speculative decoding as a plume plugin. */
#include "draft_proposer.h"
#include "plume/plugin.h"

static int spec_draft_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    return plume_register_proposer(reg, plume_draft_proposer());
}

PLUME_PLUGIN_DEFINE("spec-draft", "0.1.0",
                    "draft model: a small model of the same vocabulary drafts k tokens per step "
                    "for every sequence in one batched forward per position",
                    "Apache-2.0", spec_draft_init)
