/* plume_pipeline_build: a resolved pipeline into a backend, a model on it
 * and an engine with the pipeline's providers — the one assembly every
 * command and program uses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plume/model.h"
#include "plume/pipeline.h"
#include "runtime/pipeline_internal.h"

/* `backend: auto` with a choice (a plugin registered another backend):
 * says on stderr which one it picked. */
static void say_auto_backend(const plume_pipeline *p, const plume_registry *reg)
{
    char names[512];
    plume_registry_names(reg, PLUME_KIND_BACKEND, names, sizeof names);
    if (!p->backend_auto || !strchr(names, ','))
        return;
    fprintf(stderr, "plume: backend: auto picked %s (registered: %s; cpu unless another is "
                    "usable on this machine)\n",
            ((const plume_backend_vtable *)p->backend.vt)->name, names);
}

/* The engine's providers from the pipeline: a sampler other than the
 * built-in standard one, the proposer. */
static int attach_providers(const plume_pipeline *p, plume_engine *e, plume_error *err)
{
    plume_sampling_params unused;
    if (!plume_pipeline_sampling_params(p, &unused, NULL)) {
        const plume_settings *ss;
        const plume_sampler_vtable *svt = plume_pipeline_sampler(p, &ss);
        if (plume_engine_set_sampler(e, svt, ss, err))
            return -1;
    }
    const plume_settings *ps;
    int32_t k = 0;
    const plume_proposer_vtable *pvt = plume_pipeline_proposer(p, &ps, &k);
    if (pvt && plume_engine_set_proposer(e, pvt, ps, k, err))
        return -1;
    return 0;
}

int plume_pipeline_build(const plume_pipeline *p, plume_registry *reg, const plume_build_opts *o,
                         plume_model **model, plume_engine **engine, plume_error *err)
{
    *model = NULL;
    if (engine)
        *engine = NULL;
    plume_build_opts none = {0};
    if (!o)
        o = &none;
    plume_load_params lp = plume_load_defaults();
    lp.registry = reg;
    lp.format = plume_pipeline_weight_format(p, &lp.format_settings);
    lp.backend_vt = plume_pipeline_backend(p, &lp.backend_settings);
    lp.n_threads = o->n_threads > 0 ? o->n_threads : plume_pipeline_threads(p);
    say_auto_backend(p, reg);
    plume_model *m;
    if (plume_model_load_ex(plume_pipeline_model(p), &lp, &m, err))
        return -1;
    if (engine) {
        plume_engine_params ep;
        plume_pipeline_engine_params(p, &ep);
        if (o->engine)
            ep = *o->engine;
        if (!ep.registry)
            ep.registry = reg; /* the proposer's host loads a draft model with it */
        plume_engine *e;
        if (plume_engine_create(m, &ep, &e, err)) {
            plume_model_free(m);
            return -1;
        }
        if (attach_providers(p, e, err)) {
            plume_engine_free(e);
            plume_model_free(m);
            return -1;
        }
        *engine = e;
    }
    *model = m;
    return 0;
}
