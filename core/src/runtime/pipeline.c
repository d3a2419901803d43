/* Pipelines: parse the YAML file, load its plugins, validate every section
 * (each provider its own settings), resolve defaults. */
#include "plume/pipeline.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/builtin.h"
#include "runtime/pipeline_internal.h"

#define PIPELINE_MAX_BYTES (1 << 20)

static const char *const top_keys[] = {"model",     "backend",  "plugins",     "threads",
                                       "kv_cache",  "scheduler", "sampling",   "speculative",
                                       "kv_connector", "load_format"};
static const char *const format_hidden[] = {"method"};
static const char *const kv_keys[] = {"block_size", "dtype", "max_tokens"};
static const char *const backend_hidden[] = {"method"};
static const char *const sched_hidden[] = {"method", "max_num_seqs", "max_batched_tokens",
                                           "prefix_caching"};
static const char *const sampling_hidden[] = {"method", "seed"};
/* the engine's keys of the speculative section (the rest go to the proposer) */
static const char *const spec_hidden[] = {"method", "num_speculative_tokens", "adaptive",
                                          "disable_above_batch"};

#define N(a) (sizeof(a) / sizeof *(a))

static void slot_free(pipe_slot *s)
{
    plume_settings_free(s->full);
    plume_settings_free(s->prov);
}

void plume_pipeline_free(plume_pipeline *p)
{
    if (!p)
        return;
    slot_free(&p->format);
    slot_free(&p->backend);
    slot_free(&p->scheduler);
    slot_free(&p->sampler);
    slot_free(&p->proposer);
    slot_free(&p->kv_connector);
    plume_settings_free(p->kv);
    plume_settings_free(p->top);
    for (size_t i = 0; i < p->n_plugins; i++)
        free(p->plugins[i]);
    free(p->plugins);
    ytree_free(p->root);
    free(p->model);
    free(p->file);
    free(p->base_dir);
    free(p);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Where an error without a better place points: the key's value, or the
 * top of the file. */
static int fail_at(const plume_pipeline *p, const ynode *at, plume_error *err, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));
static int fail_at(const plume_pipeline *p, const ynode *at, plume_error *err, const char *fmt,
                   ...)
{
    char what[PLUME_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (at && at->line == 0) /* built in code: no position */
        return plume_err(err, PLUME_ERR_INVALID, "%s: %s", p->file, what);
    return plume_err(err, PLUME_ERR_INVALID, "%s:%d:%d: %s", p->file, at ? at->line : 1,
                     at ? at->col : 1, what);
}

/* Resolves and probes the model path written at node at (NULL when it was
 * given in code). */
static int resolve_model(plume_pipeline *p, const char *written, const char *base_dir,
                         const ynode *at, plume_error *err)
{
    char *path = NULL;
    if (written[0] == '/' || !base_dir) {
        path = strdup(written);
    } else {
        size_t n = strlen(base_dir) + strlen(written) + 2;
        if ((path = malloc(n)))
            snprintf(path, n, "%s/%s", base_dir, written);
        if (path && !exists(path) && exists(written)) {
            free(path);
            path = strdup(written);
        }
    }
    if (!path)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    if (!exists(path)) {
        int rc = at ? fail_at(p, at, err,
                              "model: %s does not exist (looked for it relative to the pipeline's "
                              "directory %s, then the current directory); fix the path or run "
                              "scripts/fetch-model",
                              written, base_dir ? base_dir : ".")
                    : plume_err(err, PLUME_ERR_IO, "model %s does not exist", written);
        free(path);
        return rc;
    }
    char real[PATH_MAX];
    if (realpath(path, real)) {
        free(path);
        path = strdup(real);
        if (!path)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    if (p->format_given) { /* load_format named the format: no probing */
        free(p->model);
        p->model = path;
        p->model_checked = true;
        return 0;
    }
    plume_error perr = {0};
    const plume_weight_format_vtable *f = plume_registry_probe_format(p->reg, path, &perr);
    if (!f) {
        int rc = at ? fail_at(p, at, err, "model: %s", perr.msg)
                    : plume_err(err, perr.code, "%s", perr.msg);
        free(path);
        return rc;
    }
    free(p->model);
    p->model = path;
    p->model_checked = true;
    p->format.present = true;
    p->format.vt = plume_registry_find(p->reg, PLUME_KIND_WEIGHT_FORMAT, f->name, &p->format.info);
    return 0;
}

static int load_plugins(plume_pipeline *p, plume_error *err)
{
    const ynode *v = ytree_get(p->root, "plugins", NULL);
    if (!v)
        return 0;
    if (v->type != YNODE_SEQ)
        return fail_at(p, v, err, "plugins must be a list of plugin names, e.g. plugins: "
                                  "[spec-ngram], got %s", ytree_type_name(v->type));
    p->plugins = calloc(v->n ? v->n : 1, sizeof *p->plugins);
    if (!p->plugins)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < v->n; i++) {
        const ynode *it = v->items[i];
        if (it->type != YNODE_SCALAR || it->len == 0)
            return fail_at(p, it, err, "plugins[%zu] must be a plugin name such as spec-ngram, "
                                       "got %s", i, it->type == YNODE_SCALAR ? "nothing"
                                                                             : ytree_type_name(it->type));
        plume_error lerr = {0};
        if (plume_registry_load(p->reg, it->text, &lerr))
            return fail_at(p, it, err, "plugins[%zu]: %s", i, lerr.msg);
        if (!(p->plugins[p->n_plugins++] = strdup(it->text)))
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    return 0;
}

/* The section under key: a mapping (or absent: NULL, an empty section). */
static int section(plume_pipeline *p, const char *key, const char *const *hidden, size_t n_hidden,
                   plume_settings **full, plume_settings **prov, bool *written, plume_error *err)
{
    const ynode *knode = NULL;
    const ynode *v = ytree_get(p->root, key, &knode);
    if (v && v->type != YNODE_MAP)
        return fail_at(p, v, err, "%s must be a mapping { key: value, ... }, got %s", key,
                       v->type == YNODE_SCALAR && !v->quoted && v->len == 0
                           ? "nothing"
                           : ytree_type_name(v->type));
    int line = knode ? knode->line : 1, col = knode ? knode->col : 1;
    if (written)
        *written = v != NULL;
    if (settings_view(v, p->file, p->base_dir, key, NULL, 0, line, col, full, err))
        return -1;
    if (prov && settings_view(v, p->file, p->base_dir, key, hidden, n_hidden, line, col, prov, err))
        return -1;
    return 0;
}

/* Makes sure a provider's message carries a position. */
static int provider_fail(const plume_pipeline *p, const pipe_slot *s, const char *what,
                         plume_error *err)
{
    size_t n = strlen(p->file);
    if (strncmp(err->msg, p->file, n) == 0 && err->msg[n] == ':')
        return -1;
    char msg[PLUME_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", err->msg);
    const ynode *m = settings_map(s->full);
    return fail_at(p, m, err, "%s (%s provider '%s'): %s", what, plume_kind_name(s->info.kind),
                   s->info.name, msg);
}

/* Runs the provider's validate (NULL: it takes no settings). */
static int validate_slot(const plume_pipeline *p, pipe_slot *s, const char *what,
                         int (*validate)(const plume_settings *, plume_error *), plume_error *err)
{
    settings_clear_resolved(s->prov);
    int rc = validate ? validate(s->prov, err) : plume_settings_check_keys(s->prov, NULL, 0, err);
    return rc ? provider_fail(p, s, what, err) : 0;
}

/* Looks a provider up by the name under key "method" of s->full (def when
 * absent; NULL def = required). */
static int pick(plume_pipeline *p, pipe_slot *s, plume_provider_kind kind, const char *section_name,
                const char *def, plume_error *err)
{
    const char *name;
    if (plume_settings_string(s->full, "method", def, &name, err))
        return -1;
    if (!name)
        return plume_settings_error(s->full, NULL, err,
                                    "needs a method (the %s provider); registered: %s", plume_kind_name(kind),
                                    plume_registry_names(p->reg, kind, (char[512]){0}, 512));
    s->vt = plume_registry_find(p->reg, kind, name, &s->info);
    if (!s->vt) {
        char names[512];
        return plume_settings_error(
            s->full, "method", err,
            "no %s provider '%s'; available: %s (a plugin that provides it must be listed in "
            "plugins:)", plume_kind_name(kind), name,
            plume_registry_names(p->reg, kind, names, sizeof names));
    }
    (void)section_name;
    s->present = true;
    return 0;
}

static int do_backend(plume_pipeline *p, plume_error *err)
{
    const ynode *knode = NULL;
    const ynode *v = ytree_get(p->root, "backend", &knode);
    pipe_slot *s = &p->backend;
    const char *name = "auto";
    if (v && v->type == YNODE_SCALAR) {
        if (v->len == 0)
            return fail_at(p, v, err, "backend needs a value: auto or a backend name");
        name = v->text;
        if (settings_view(NULL, p->file, p->base_dir, "backend", NULL, 0, v->line, v->col,
                          &s->full, err) ||
            settings_view(NULL, p->file, p->base_dir, "backend", backend_hidden, 1, v->line,
                          v->col, &s->prov, err))
            return -1;
    } else {
        if (section(p, "backend", backend_hidden, N(backend_hidden), &s->full, &s->prov, NULL, err) ||
            plume_settings_string(s->full, "method", "auto", &name, err))
            return -1;
    }
    s->written = v != NULL;
    char names[512];
    if (strcmp(name, "auto") == 0) {
        const plume_backend_vtable *b = plume_registry_best_backend(p->reg);
        if (!b)
            return fail_at(p, v, err, "backend: auto found no usable backend (registered: %s)",
                           plume_registry_names(p->reg, PLUME_KIND_BACKEND, names, sizeof names));
        p->backend_auto = true;
        name = b->name;
    }
    s->vt = plume_registry_find(p->reg, PLUME_KIND_BACKEND, name, &s->info);
    if (!s->vt) {
        const ynode *at = v && v->type == YNODE_MAP ? ytree_get(v, "method", NULL) : v;
        return fail_at(p, at, err,
                       "backend: no backend provider '%s'; available: auto, %s (a plugin that "
                       "provides it must be listed in plugins:)",
                       name, plume_registry_names(p->reg, PLUME_KIND_BACKEND, names, sizeof names));
    }
    const plume_backend_vtable *b = s->vt;
    if (!p->backend_auto && b->score && b->score() == 0) {
        /* create fails the same way, with the backend's own reason */
        plume_error why = {0};
        plume_backend *inst = NULL;
        if (b->create(s->prov, 0, &inst, &why) == 0) {
            b->destroy(inst);
            snprintf(why.msg, sizeof why.msg, "no device or driver; use backend: auto or cpu");
        }
        return fail_at(p, v, err, "backend: %s is not usable on this machine: %s", name, why.msg);
    }
    s->present = true;
    return validate_slot(p, s, "backend", b->validate, err);
}

static int do_kv_cache(plume_pipeline *p, plume_error *err)
{
    /* indexed by plume_kv_dtype; without a dtype key the engine's default */
    static const char *const dtypes[] = {"f32", "f16", "int8"};
    static const plume_kv_dtype kv_of[] = {PLUME_KV_F32, PLUME_KV_F16, PLUME_KV_INT8};
    int64_t bs, mt;
    size_t dt;
    if (section(p, "kv_cache", NULL, 0, &p->kv, NULL, NULL, err) ||
        plume_settings_int(p->kv, "block_size", p->ep.block_size, 1, 1024, &bs, err) ||
        plume_settings_choice(p->kv, "dtype", dtypes, 3, (size_t)p->ep.kv_dtype, &dt, err) ||
        plume_settings_int(p->kv, "max_tokens", p->ep.kv_max_tokens, 1, (int64_t)1 << 31, &mt,
                           err) ||
        plume_settings_check_keys(p->kv, kv_keys, N(kv_keys), err))
        return -1;
    if (mt < bs)
        return plume_settings_error(p->kv, "max_tokens", err,
                                    "must be at least block_size (%lld), got %lld",
                                    (long long)bs, (long long)mt);
    p->ep.block_size = (int32_t)bs;
    p->ep.kv_max_tokens = mt;
    p->ep.kv_dtype = kv_of[dt];
    return 0;
}

static int do_scheduler(plume_pipeline *p, plume_error *err)
{
    pipe_slot *s = &p->scheduler;
    int64_t ns, nb;
    bool pc;
    if (section(p, "scheduler", sched_hidden, N(sched_hidden), &s->full, &s->prov, &s->written,
                err) ||
        pick(p, s, PLUME_KIND_SCHEDULER, "scheduler", PLUME_BUILTIN_SCHEDULER, err) ||
        plume_settings_int(s->full, "max_num_seqs", p->ep.max_num_seqs, 1, 65536, &ns, err) ||
        plume_settings_int(s->full, "max_batched_tokens", p->ep.max_batched_tokens, 1, 1 << 20,
                           &nb, err) ||
        plume_settings_bool(s->full, "prefix_caching", p->ep.prefix_caching, &pc, err))
        return -1;
    p->ep.max_num_seqs = (int32_t)ns;
    p->ep.max_batched_tokens = (int32_t)nb;
    p->ep.prefix_caching = pc;
    const plume_scheduler_vtable *vt = s->vt;
    if (validate_slot(p, s, "scheduler", vt->validate, err))
        return -1;
    p->mixed_batches = true;
    if (strcmp(s->info.name, PLUME_BUILTIN_SCHEDULER) == 0) {
        plume_error e2;
        if (builtin_continuous_mixed(s->prov, &p->mixed_batches, &e2))
            return plume_err(err, e2.code, "%s", e2.msg);
    }
    p->ep.mixed_batches = p->mixed_batches;
    /* the built-in stays NULL so that mixed_batches (and --separate-batches
     * after it) choose its policy */
    if (strcmp(s->info.name, PLUME_BUILTIN_SCHEDULER) != 0) {
        p->ep.scheduler = vt;
        p->ep.scheduler_settings = s->prov;
    }
    return 0;
}

static int do_sampling(plume_pipeline *p, plume_error *err)
{
    pipe_slot *s = &p->sampler;
    if (section(p, "sampling", sampling_hidden, N(sampling_hidden), &s->full, &s->prov,
                &s->written, err) ||
        pick(p, s, PLUME_KIND_SAMPLER, "sampling", PLUME_BUILTIN_SAMPLER, err))
        return -1;
    p->seed_given = plume_settings_has(s->full, "seed");
    int64_t seed = 0;
    if (p->seed_given && plume_settings_int(s->full, "seed", 0, 0, INT64_MAX, &seed, err))
        return -1;
    p->seed = (uint64_t)seed;
    const plume_sampler_vtable *vt = s->vt;
    return validate_slot(p, s, "sampling", vt->validate, err);
}

static int do_speculative(plume_pipeline *p, plume_error *err)
{
    pipe_slot *s = &p->proposer;
    if (!ytree_get(p->root, "speculative", NULL))
        return 0;
    int64_t k;
    if (section(p, "speculative", spec_hidden, N(spec_hidden), &s->full, &s->prov, &s->written,
                err) ||
        pick(p, s, PLUME_KIND_PROPOSER, "speculative", NULL, err) ||
        plume_settings_int(s->full, "num_speculative_tokens", 4, 1, 32, &k, err))
        return -1;
    p->num_spec = (int32_t)k;
    /* adaptive speculation: the engine's (plume_engine_params.spec_*) */
    bool adaptive;
    const char *dab;
    if (plume_settings_bool(s->full, "adaptive", p->ep.spec_adaptive, &adaptive, err) ||
        plume_settings_string(s->full, "disable_above_batch", "0", &dab, err))
        return -1;
    int64_t bound = -1;
    plume_error e2;
    if (strcmp(dab, "auto") != 0 &&
        plume_settings_int(s->full, "disable_above_batch", 0, 0, 65536, &bound, &e2))
        return plume_err(err, e2.code,
                         "%s, or auto (auto: the engine's measured cost model decides each "
                         "step; 0: never; N: no drafts in steps of more than N decoding "
                         "sequences)",
                         e2.msg);
    p->ep.spec_adaptive = adaptive;
    p->ep.spec_disable_above_batch = (int32_t)bound;
    const plume_proposer_vtable *vt = s->vt;
    return validate_slot(p, s, "speculative", vt->validate, err);
}

/* kv_connector: { method: NAME, role: prefill|decode, on_failure:
 * fail|recompute, ... } -- the engine's keys; the rest goes to the
 * provider (plume/kv_connector.h, docs/disaggregation.md). */
static const char *const kvc_hidden[] = {"method", "role", "on_failure"};

static int do_kv_connector(plume_pipeline *p, plume_error *err)
{
    pipe_slot *s = &p->kv_connector;
    if (!ytree_get(p->root, "kv_connector", NULL))
        return 0;
    static const char *const roles[] = {"prefill", "decode", "producer", "consumer"};
    static const char *const fails[] = {"fail", "recompute"};
    size_t role = 0, fail = 0;
    if (section(p, "kv_connector", kvc_hidden, N(kvc_hidden), &s->full, &s->prov, &s->written,
                err) ||
        pick(p, s, PLUME_KIND_KV_CONNECTOR, "kv_connector", NULL, err))
        return -1;
    if (!plume_settings_has(s->full, "role"))
        return plume_settings_error(s->full, NULL, err,
                                    "needs role: prefill (this worker computes prompts and sends "
                                    "their KV) or decode (it loads them and decodes)");
    if (plume_settings_choice(s->full, "role", roles, N(roles), 0, &role, err) ||
        plume_settings_choice(s->full, "on_failure", fails, N(fails), 0, &fail, err))
        return -1;
    p->role = role % 2 == 0 ? PLUME_KV_PRODUCER : PLUME_KV_CONSUMER;
    const plume_kv_connector_vtable *vt = s->vt;
    if (validate_slot(p, s, "kv_connector", vt->validate, err))
        return -1;
    p->ep.kv_connector = vt;
    p->ep.kv_connector_settings = s->prov;
    p->ep.kv_role = p->role;
    p->ep.kv_recompute_on_failure = fail == 1;
    return 0;
}

/* load_format: auto (the default: the format whose probe scores highest
 * opens the model), a weight format's name, or { method: NAME, ... } with
 * that format's settings (dummy: dtype, pure, seed, tokenizer). */
static int do_load_format(plume_pipeline *p, plume_error *err)
{
    const ynode *knode = NULL;
    const ynode *v = ytree_get(p->root, "load_format", &knode);
    pipe_slot *s = &p->format;
    if (!v)
        return 0;
    const char *name;
    if (v->type == YNODE_SCALAR) {
        if (v->len == 0)
            return fail_at(p, v, err, "load_format needs a value: auto, dummy or a weight format's "
                                      "name");
        name = v->text;
        if (settings_view(NULL, p->file, p->base_dir, "load_format", NULL, 0, v->line, v->col,
                          &s->full, err) ||
            settings_view(NULL, p->file, p->base_dir, "load_format", format_hidden, 1, v->line,
                          v->col, &s->prov, err))
            return -1;
    } else if (section(p, "load_format", format_hidden, N(format_hidden), &s->full, &s->prov,
                       NULL, err) ||
               plume_settings_string(s->full, "method", "auto", &name, err)) {
        return -1;
    }
    s->written = true;
    if (strcmp(name, "auto") == 0) {
        if (plume_settings_count(s->prov) > 0)
            return fail_at(p, v, err, "load_format: auto takes no settings; name a format "
                                      "(method: dummy) to give it settings");
        return 0;
    }
    char names[512];
    s->vt = plume_registry_find(p->reg, PLUME_KIND_WEIGHT_FORMAT, name, &s->info);
    if (!s->vt) {
        const ynode *at = v->type == YNODE_MAP ? ytree_get(v, "method", NULL) : v;
        return fail_at(p, at, err,
                       "load_format: no weight format '%s'; available: auto, %s (dummy: random "
                       "weights from a config.json)",
                       name,
                       plume_registry_names(p->reg, PLUME_KIND_WEIGHT_FORMAT, names, sizeof names));
    }
    s->present = true;
    p->format_given = true;
    const plume_weight_format_vtable *f = s->vt;
    return validate_slot(p, s, "load_format", f->validate, err);
}

/* The model given in code instead of the file's `model:`. */
static int resolve_override(plume_pipeline *p, const char *model, plume_error *err)
{
    if (!exists(model))
        return plume_err(err, PLUME_ERR_IO, "model %s does not exist; check the path", model);
    return resolve_model(p, model, NULL, NULL, err);
}

/* The file's `model:`; with check_model false it is taken as written. */
static int resolve_written_model(plume_pipeline *p, bool check_model, plume_error *err)
{
    const ynode *m = ytree_get(p->root, "model", NULL);
    if (!m)
        return fail_at(p, NULL, err, "model is missing; add model: PATH (a .gguf file or an HF "
                                     "model directory)");
    if (m->type != YNODE_SCALAR || m->len == 0)
        return fail_at(p, m, err, "model must be a path to a .gguf file or an HF model "
                                  "directory, got %s",
                       m->type == YNODE_SCALAR ? "nothing" : ytree_type_name(m->type));
    if (check_model)
        return resolve_model(p, m->text, p->base_dir, m, err);
    return (p->model = strdup(m->text)) ? 0 : plume_err(err, PLUME_ERR_NOMEM, "out of memory");
}

/* Validates the whole tree in p->root; model_override replaces `model:`. */
static int resolve(plume_pipeline *p, bool check_model, const char *model_override,
                   plume_error *err)
{
    if (!p->root)
        return fail_at(p, NULL, err, "the pipeline is empty; it needs at least model: PATH (a "
                                     ".gguf file or an HF model directory)");
    if (p->root->type != YNODE_MAP)
        return fail_at(p, p->root, err, "a pipeline is a mapping of keys (model, backend, "
                                        "sampling, ...), got %s", ytree_type_name(p->root->type));
    if (settings_view(p->root, p->file, p->base_dir, "", NULL, 0, 1, 1, &p->top, err) ||
        plume_settings_check_keys(p->top, top_keys, N(top_keys), err))
        return -1;
    p->ep = plume_engine_defaults();
    if (load_plugins(p, err) || do_load_format(p, err))
        return -1;
    if (model_override ? resolve_override(p, model_override, err)
                       : resolve_written_model(p, check_model, err))
        return -1;
    int64_t threads;
    if (plume_settings_int(p->top, "threads", 0, 0, 4096, &threads, err))
        return -1;
    p->threads = (int)threads;
    return do_backend(p, err) || do_kv_cache(p, err) || do_scheduler(p, err) ||
                   do_sampling(p, err) || do_speculative(p, err) || do_kv_connector(p, err)
               ? -1
               : 0;
}

/* Keeps a message on one line when it echoes text from the file: control
 * characters become \n, \t or \xNN. */
static int one_line(plume_error *err)
{
    if (!err)
        return -1;
    char out[PLUME_ERROR_MSG_MAX];
    size_t o = 0;
    for (const unsigned char *c = (const unsigned char *)err->msg; *c && o + 5 < sizeof out; c++) {
        if (*c >= 0x20 && *c != 0x7f)
            out[o++] = (char)*c;
        else if (*c == '\n' || *c == '\t' || *c == '\r')
            o += (size_t)snprintf(out + o, 3, "\\%c", *c == '\n' ? 'n' : *c == '\t' ? 't' : 'r');
        else
            o += (size_t)snprintf(out + o, 5, "\\x%02x", *c);
    }
    out[o] = '\0';
    memcpy(err->msg, out, o + 1);
    return -1;
}

static plume_pipeline *pipeline_new(plume_registry *reg, const char *name, const char *base_dir,
                                    plume_error *err)
{
    plume_pipeline *p = calloc(1, sizeof *p);
    if (!p || !(p->file = strdup(name)) || !(p->base_dir = strdup(base_dir ? base_dir : "."))) {
        plume_pipeline_free(p);
        plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        return NULL;
    }
    p->reg = reg;
    return p;
}

int plume_pipeline_parse(plume_registry *reg, const char *text, size_t len, const char *name,
                         const char *base_dir, bool check_model, plume_pipeline **out,
                         plume_error *err)
{
    *out = NULL;
    plume_pipeline *p = pipeline_new(reg, name ? name : "(pipeline)", base_dir, err);
    if (!p)
        return -1;
    if (ytree_parse(text, len, p->file, &p->root, err) || resolve(p, check_model, NULL, err)) {
        plume_pipeline_free(p);
        return one_line(err);
    }
    *out = p;
    return 0;
}

int plume_pipeline_load(plume_registry *reg, const char *path, plume_pipeline **out,
                        plume_error *err)
{
    return plume_pipeline_load_with_model(reg, path, NULL, out, err);
}

int plume_pipeline_load_with_model(plume_registry *reg, const char *path, const char *model,
                                   plume_pipeline **out, plume_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return plume_err(err, PLUME_ERR_IO, "cannot open pipeline %s; check the path", path);
    char *buf = malloc(PIPELINE_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, PIPELINE_MAX_BYTES + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!buf)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    if (bad || n > PIPELINE_MAX_BYTES) {
        free(buf);
        return plume_err(err, bad ? PLUME_ERR_IO : PLUME_ERR_RANGE,
                         bad ? "cannot read pipeline %s" : "pipeline %s is larger than 1 MiB; a "
                                                           "pipeline is a short YAML file",
                         path);
    }
    char *dir = strdup(path);
    if (!dir) {
        free(buf);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        slash == dir ? (void)(dir[1] = '\0') : (void)(*slash = '\0');
    plume_pipeline *p = pipeline_new(reg, path, slash ? dir : ".", err);
    int rc = -1;
    if (p && ytree_parse(buf, n, p->file, &p->root, err) == 0 && resolve(p, true, model, err) == 0) {
        *out = p;
        p = NULL;
        rc = 0;
    }
    plume_pipeline_free(p);
    free(dir);
    free(buf);
    return rc ? one_line(err) : 0;
}

/* A pipeline built in code takes root (model_path its model) and is
 * resolved like a file's; p is freed on failure. */
static int adopt_root(plume_pipeline *p, ynode *root, const char *model_path,
                      plume_pipeline **out, plume_error *err)
{
    p->root = root;
    if (!exists(model_path)) {
        plume_pipeline_free(p);
        return plume_err(err, PLUME_ERR_IO, "model %s does not exist; check the path", model_path);
    }
    if (resolve(p, true, NULL, err)) {
        plume_pipeline_free(p);
        return one_line(err);
    }
    *out = p;
    return 0;
}

int plume_pipeline_for_model(plume_registry *reg, const char *model_path, plume_pipeline **out,
                             plume_error *err)
{
    *out = NULL;
    plume_pipeline *p = pipeline_new(reg, "(default)", ".", err);
    if (!p)
        return -1;
    ynode *root = ytree_map(), *m = ytree_scalar(model_path, true);
    if (!root || !m || ytree_map_add(root, "model", m)) {
        ytree_free(root);
        ytree_free(m);
        plume_pipeline_free(p);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    return adopt_root(p, root, model_path, out, err);
}

int plume_pipeline_for_model_as(plume_registry *reg, const char *model_path,
                                const char *load_format, const plume_settings *s,
                                plume_pipeline **out, plume_error *err)
{
    *out = NULL;
    if (!load_format)
        return plume_pipeline_for_model(reg, model_path, out, err);
    plume_pipeline *p = pipeline_new(reg, "(command line)", ".", err);
    if (!p)
        return -1;
    ynode *root = ytree_map(), *m = ytree_scalar(model_path, true), *lf = ytree_map();
    bool ok = root && m && lf && ytree_map_add(root, "model", m) == 0;
    if (!ok)
        ytree_free(m);
    if (!ok || !root) {
        ytree_free(lf);
        lf = NULL;
    }
    ynode *meth = ok ? ytree_scalar(load_format, true) : NULL;
    ok = ok && meth && ytree_map_add(lf, "method", meth) == 0;
    for (size_t i = 0, n = s ? plume_settings_count(s) : 0; ok && i < n; i++) {
        const char *k = plume_settings_key(s, i), *val = NULL;
        plume_error e2;
        if (plume_settings_string(s, k, NULL, &val, &e2) || !val)
            continue;
        ynode *vn = ytree_scalar(val, false);
        ok = vn && ytree_map_add(lf, k, vn) == 0;
    }
    if (ok && ytree_map_add(root, "load_format", lf) != 0)
        ok = false;
    else if (ok)
        lf = NULL; /* root owns it */
    if (!ok) {
        ytree_free(lf);
        ytree_free(root);
        plume_pipeline_free(p);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    return adopt_root(p, root, model_path, out, err);
}

const char *plume_pipeline_file(const plume_pipeline *p) { return p->file; }
const char *plume_pipeline_model(const plume_pipeline *p) { return p->model; }
int plume_pipeline_threads(const plume_pipeline *p) { return p->threads; }

void plume_pipeline_engine_params(const plume_pipeline *p, plume_engine_params *out)
{
    *out = p->ep;
}

bool plume_pipeline_sampling_params(const plume_pipeline *p, plume_sampling_params *out,
                                    bool *seed_given)
{
    bool standard = strcmp(p->sampler.info.name, PLUME_BUILTIN_SAMPLER) == 0;
    plume_error e;
    if (!standard || builtin_standard_params(p->sampler.prov, out, &e))
        *out = plume_sampling_defaults(); /* validated already: only for other providers */
    out->seed = p->seed;
    if (seed_given)
        *seed_given = p->seed_given;
    return standard;
}

static const void *slot_out(const pipe_slot *s, const plume_settings **settings)
{
    if (settings)
        *settings = s->present ? s->prov : NULL;
    return s->present ? s->vt : NULL;
}

const plume_weight_format_vtable *plume_pipeline_weight_format(const plume_pipeline *p,
                                                               const plume_settings **s)
{
    return slot_out(&p->format, s);
}
const plume_backend_vtable *plume_pipeline_backend(const plume_pipeline *p,
                                                   const plume_settings **s)
{
    return slot_out(&p->backend, s);
}
const plume_scheduler_vtable *plume_pipeline_scheduler(const plume_pipeline *p,
                                                       const plume_settings **s)
{
    return slot_out(&p->scheduler, s);
}
const plume_sampler_vtable *plume_pipeline_sampler(const plume_pipeline *p,
                                                   const plume_settings **s)
{
    return slot_out(&p->sampler, s);
}
const plume_proposer_vtable *plume_pipeline_proposer(const plume_pipeline *p,
                                                     const plume_settings **s,
                                                     int32_t *num_speculative_tokens)
{
    if (num_speculative_tokens)
        *num_speculative_tokens = p->proposer.present ? p->num_spec : 0;
    return slot_out(&p->proposer, s);
}
const plume_kv_connector_vtable *plume_pipeline_kv_connector(const plume_pipeline *p,
                                                             const plume_settings **s,
                                                             plume_kv_role *role)
{
    if (role)
        *role = p->role;
    return slot_out(&p->kv_connector, s);
}
