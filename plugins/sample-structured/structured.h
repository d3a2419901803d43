/* sample-structured: the sampler provider "structured".
 *
 * Settings (a pipeline's `sampling: {method: structured, ...}` or a
 * request's sampler_settings): exactly one constraint key
 *   json_schema: JSON Schema text    json_object: true (any JSON object)
 *   regex: a pattern                 choice: a JSON list of strings
 *   grammar: GBNF text
 * and optionally the standard sampler's keys (temperature, top_k, top_p,
 * min_p, repetition_penalty, repeat_last_n, presence_penalty,
 * frequency_penalty), which override the request's sampling parameters.
 *
 * Each step it masks the logits of the tokens that cannot continue the
 * constraint (end-of-generation only where the constraint may end), then
 * samples as the standard sampler does (plume/sampler.h). */
#ifndef SS_STRUCTURED_H
#define SS_STRUCTURED_H

#include "plume/sampler_provider.h"

/* The provider's vtable (static). */
const plume_sampler_vtable *ss_structured_sampler(void);

#endif
