/* The resolved pipeline's state, shared by pipeline.c (parse, validate,
 * accessors) and pipeline_print.c. */
#ifndef PLUME_RUNTIME_PIPELINE_INTERNAL_H
#define PLUME_RUNTIME_PIPELINE_INTERNAL_H

#include "plume/pipeline.h"
#include "runtime/settings_internal.h"

/* One slot: the provider chosen and its settings. */
typedef struct pipe_slot {
    bool present;             /* false: optional slot left out */
    bool written;             /* the section was in the file (else all defaults) */
    const void *vt;
    plume_provider_info info;
    plume_settings *full;     /* the section with the pipeline's own keys */
    plume_settings *prov;     /* the provider's view (pipeline keys hidden) */
} pipe_slot;

struct plume_pipeline {
    plume_registry *reg;
    char *file;
    char *base_dir;
    ynode *root;
    plume_settings *top;
    char *model;
    bool model_checked;
    bool backend_auto;
    bool format_given;        /* load_format named the weight format */
    int threads;
    char **plugins;
    size_t n_plugins;
    plume_engine_params ep;
    plume_settings *kv;       /* kv_cache view */
    pipe_slot format, backend, scheduler, sampler, proposer, kv_connector;
    bool mixed_batches;
    uint64_t seed;
    bool seed_given;
    int32_t num_spec;
    plume_kv_role role;
};

#endif
