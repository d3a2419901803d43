/* sample-structured: structured outputs (JSON schema, regex, choice, GBNF)
 * enforced while decoding, as a sampler plugin. */
#include "plume/plugin.h"
#include "structured.h"

static int sample_structured_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    return plume_register_sampler(reg, ss_structured_sampler());
}

PLUME_PLUGIN_DEFINE("sample-structured", "0.1.0",
                    "structured outputs: masks the tokens that cannot continue a JSON schema, "
                    "regex, choice list or GBNF grammar",
                    "Apache-2.0", sample_structured_init)
