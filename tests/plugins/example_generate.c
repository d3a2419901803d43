/* Test helper: greedy-loop generation with the sampler provider a pipeline
 * selects, over the model's plume_context, printing one JSON line per step
 * with the logits the token was drawn from.  Lets the example-plugin test
 * check, independently in Python, that each token is the one the plugin's
 * rule picks.
 *
 *   example_typical_generate PIPELINE MODEL PLUGIN_DIR N_TOKENS IDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plume/model.h"
#include "plume/pipeline.h"

static int fail(const char *msg)
{
    fprintf(stderr, "example_generate: %s\n", msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 6)
        return fail("usage: PIPELINE MODEL PLUGIN_DIR N_TOKENS IDS");
    plume_error err = {0};
    plume_registry *reg = NULL;
    plume_pipeline *p = NULL;
    if (plume_registry_create(&reg, &err) || plume_registry_add_search_dir(reg, argv[3], &err) ||
        plume_pipeline_load_with_model(reg, argv[1], argv[2], &p, &err))
        return fail(err.msg);
    const plume_settings *ss;
    const plume_sampler_vtable *svt = plume_pipeline_sampler(p, &ss);
    plume_sampling_params sp;
    bool seed_given;
    plume_pipeline_sampling_params(p, &sp, &seed_given);
    plume_model *m;
    if (plume_model_load(plume_pipeline_model(p), &m, &err))
        return fail(err.msg);
    int32_t nv = plume_model_n_vocab(m);
    plume_context *c;
    plume_sampler_state *st;
    if (plume_context_create(m, 256, &c, &err) ||
        svt->create(ss, nv, sp.seed, &st, &err))
        return fail(err.msg);
    int32_t hist[256];
    int n = 0;
    for (char *t = strtok(argv[5], ","); t && n < 128; t = strtok(NULL, ","))
        hist[n++] = atoi(t);
    float *logits = malloc(sizeof(float) * (size_t)nv);
    int steps = atoi(argv[4]);
    if (plume_decode(c, hist, (size_t)n, logits, &err))
        return fail(err.msg);
    printf("{\"sampler\": \"%s\", \"n_vocab\": %d}\n", svt->name, nv);
    for (int s = 0; s < steps && n < 256; s++) {
        int32_t tok = svt->sample(st, logits, hist, (size_t)n);
        printf("{\"token\": %d, \"logits\": [", tok);
        for (int32_t i = 0; i < nv; i++)
            printf("%s%.9g", i ? "," : "", logits[i]);
        printf("]}\n");
        hist[n++] = tok;
        if (plume_decode(c, &tok, 1, logits, &err))
            return fail(err.msg);
    }
    free(logits);
    svt->destroy(st);
    plume_context_free(c);
    plume_model_free(m);
    plume_pipeline_free(p);
    plume_registry_free(reg);
    return 0;
}
