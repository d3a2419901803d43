/* plume bench spec: one model load, the same seeded workload under each
 * speculative setting in turn, swapping the proposer on the live engine. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/pipeline_args.h"
#include "plume/engine.h"
#include "plume/model.h"
#include "plume/pipeline.h"
#include "plume/proposer.h"
#include "plume/registry.h"
#include "plume/settings.h"

static const char help[] =
    "usage: plume bench spec (--model PATH | --pipeline FILE) [options]\n"
    "\n"
    "Loads the model once and serves the same workload (greedy unless --temperature)\n"
    "under each speculative setting in turn, swapping the proposer on the live engine;\n"
    "prints tokens/s, speedup over the first variant (normally off), acceptance rate,\n"
    "mean tokens per target forward, whether the output equals the first variant's\n"
    "(greedy only: sampled outputs differ by design, the column reads n/a), the\n"
    "draft time share (wall time inside the proposer's propose, accepted and\n"
    "release calls over the variant's wall time, timed by the engine) and the\n"
    "proposer's extra memory (its draft model's weights as stored + its KV pool as\n"
    "allocated + scratch, as its memory callback reports them; - where it has none).\n"
    "\n"
    "options:\n"
    CLI_PIPELINE_HELP
    "  --spec VARIANT        one variant (repeatable, run in the order given): off, or\n"
    "                        METHOD[:KEY=VALUE,...], METHOD a proposer (registered, or\n"
    "                        from the plugin spec-METHOD).  k=K (or\n"
    "                        num_speculative_tokens=K) drafts at most K tokens a step\n"
    "                        (1..32, default 4); adaptive=true|false and\n"
    "                        disable_above_batch=auto|N|0 set the engine's adaptive\n"
    "                        speculation (docs/engine.md; default: the pipeline's); every\n"
    "                        other KEY=VALUE is a setting of the proposer, checked by it\n"
    "                        as in a pipeline's `speculative:`; unset ones come from\n"
    "                        the pipeline's `speculative:` section when it names the\n"
    "                        same method (e.g. the draft model), else keep the\n"
    "                        proposer's defaults.  Example:\n"
    "                        --spec ngram:k=3,prompt_lookup_max=2\n"
    "                        (default: --spec off --spec ngram:k=3 --spec ngram:k=5)\n"
    "  --prompts FILE        JSONL workload, {\"prompt\", \"chat\", \"max_tokens\"} per line\n"
    "                        (default bench/data/spec_prompts.jsonl: input-grounded prompts)\n"
    "  --batch N             requests served at once (default 1)\n"
    "  --reps N              repetitions per variant; the median is reported (default 3)\n"
    "  --max-tokens N        cap on each request's output (default: the file's, else 128)\n"
    "  --threads N           the backend's threads (default: the pipeline's `threads`)\n"
    "  --temperature T       sample every request at temperature T (default 0: greedy;\n"
    "                        the pipeline's `sampling:` is not used); with T > 0 the\n"
    "                        other settings are the request defaults (top_k 40,\n"
    "                        top_p 0.95, min_p 0.05) unless given:\n"
    "  --top-k N, --top-p P, --min-p P   the sampling filters (plume generate's meaning)\n"
    "  --seed S              request i of the workload samples with seed S + i (default\n"
    "                        0), the same in every rep and variant\n"
    "  --json                print {\"model_loads\": 1, \"variants\": [{\"name\", \"tok_s\",\n"
    "                        \"speedup\", \"acceptance_rate\", \"tokens_per_forward\",\n"
    "                        \"proposer_model_loads\", \"steps_skipped\",\n"
    "                        \"draft_time_share\", \"draft_seconds\", \"draft_memory\":\n"
    "                        {\"weight_bytes\", \"kv_bytes\", \"scratch_bytes\",\n"
    "                        \"total_bytes\"} (null when the proposer does not report\n"
    "                        it), \"engine_spec_bytes\" (the engine's own buffers for\n"
    "                        drafts, not in draft_memory), \"output_identical\" (null\n"
    "                        when sampling), ...}],\n"
    "                        \"sampling\": {...}}\n"
    "\n"
    "model_loads is how often this run loaded the target: once, then every variant\n"
    "is swapped in on the same live engine (plume_engine_set_proposer), never\n"
    "reloading it.  proposer_model_loads is what each variant's proposer loaded\n"
    "through its host (a draft model: 1; ngram and off: 0).\n";

#define MAX_VARIANTS 16

typedef struct variant {
    const char *name;           /* the --spec text */
    char method[32];            /* "" = off */
    int k;
    const plume_proposer_vtable *vt;
    plume_settings *settings;   /* the proposer's keys */
    double tok_s, acceptance, tokens_per_forward;
    int64_t drafted, accepted;
    bool identical;
    int adaptive;               /* -1: the pipeline's */
    int32_t disable_above;      /* INT32_MIN: the pipeline's; -1 auto, 0 never, N */
    int64_t proposer_loads;     /* models its proposer loaded */
    int64_t skipped;            /* steps the policy drafted nothing in */
    double draft_share;         /* proposer seconds over the reps' wall seconds */
    double draft_seconds;       /* proposer seconds, all reps */
    plume_proposer_memory mem;  /* -1 fields: not reported */
    int64_t engine_bytes;       /* the engine's speculation buffers */
} variant;

/* Parses "off" or "METHOD[:KEY=VALUE,...]" into v: k (num_speculative_tokens)
 * is the engine's, every other key goes into v->settings for the proposer
 * to validate.  Messages name the --spec text and the fix. */
static int parse_variant(const char *s, variant *v, plume_error *err)
{
    memset(v, 0, sizeof *v);
    v->name = s;
    v->k = 4; /* a pipeline's num_speculative_tokens default */
    v->adaptive = -1;
    v->disable_above = INT32_MIN;
    if (strcmp(s, "off") == 0)
        return 0;
    const char *colon = strchr(s, ':');
    size_t ml = colon ? (size_t)(colon - s) : strlen(s);
    if (ml == 0 || ml >= sizeof v->method)
        return plume_err(err, PLUME_ERR_INVALID,
                         "--spec %s: expected off or METHOD[:KEY=VALUE,...] with a proposer "
                         "name of 1 to %zu characters before the colon",
                         s, sizeof v->method - 1);
    memcpy(v->method, s, ml);
    char file[96];
    snprintf(file, sizeof file, "--spec %s", s);
    if (plume_settings_new_in(file, "speculative", &v->settings, err))
        return -1;
    bool k_given = false;
    char *list = strdup(colon ? colon + 1 : "");
    if (!list)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    int rc = 0;
    char *save = NULL;
    for (char *kv = strtok_r(list, ",", &save); kv && !rc; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq || eq == kv || !eq[1]) {
            rc = plume_err(err, PLUME_ERR_INVALID,
                           "--spec %s: '%s' is not KEY=VALUE; write e.g. %s:k=3 (settings "
                           "separated by commas)",
                           s, kv, v->method);
            break;
        }
        *eq = '\0';
        const char *val = eq + 1;
        if (strcmp(kv, "k") == 0 || strcmp(kv, "num_speculative_tokens") == 0) {
            char *end;
            long n = strtol(val, &end, 10);
            if (k_given || *end || n < 1 || n > 32)
                rc = plume_err(err, PLUME_ERR_INVALID,
                               "--spec %s: %s must be given once, as an integer in [1, 32] "
                               "(tokens drafted per step), got %s",
                               s, kv, val);
            v->k = (int)n;
            k_given = true;
        } else if (strcmp(kv, "adaptive") == 0) {
            if (strcmp(val, "true") != 0 && strcmp(val, "false") != 0)
                rc = plume_err(err, PLUME_ERR_INVALID,
                               "--spec %s: adaptive must be true or false, got %s", s, val);
            v->adaptive = strcmp(val, "true") == 0;
        } else if (strcmp(kv, "disable_above_batch") == 0) {
            char *end = "";
            bool is_auto = strcmp(val, "auto") == 0;
            long n = is_auto ? -1 : strtol(val, &end, 10);
            if (!is_auto && (*end || n < 0 || n > 65536))
                rc = plume_err(err, PLUME_ERR_INVALID,
                               "--spec %s: disable_above_batch must be auto, 0 (never) or a "
                               "batch size N in [1, 65536], got %s",
                               s, val);
            v->disable_above = (int32_t)n;
        } else if (strcmp(kv, "method") == 0) {
            rc = plume_err(err, PLUME_ERR_INVALID,
                           "--spec %s: the method is the name before the colon, not a key; "
                           "write %s:KEY=VALUE,...",
                           s, val);
        } else {
            if ((rc = plume_settings_set(v->settings, kv, val, err)))
                plume_err_prefix(err, "--spec %s", s);
        }
    }
    free(list);
    if (!rc && colon && !colon[1])
        rc = plume_err(err, PLUME_ERR_INVALID,
                       "--spec %s: nothing after the colon; give KEY=VALUE settings or drop "
                       "the colon",
                       s);
    return rc;
}

/* The proposer of v->method (loading the plugin spec-METHOD when no
 * registered proposer has that name), with v's settings checked by the
 * provider's own validate. */
/* A variant of the pipeline's own method starts from the pipeline's
 * `speculative` settings (its draft model, ...): each key the variant does
 * not give is copied, a value that names an existing file or directory
 * relative to the pipeline file as that resolved path. */
static int inherit_settings(const plume_pipeline *pipe, variant *v, plume_error *err)
{
    const plume_settings *ps = NULL;
    const plume_proposer_vtable *pvt = plume_pipeline_proposer(pipe, &ps, NULL);
    if (!pvt || !ps || strcmp(pvt->name, v->method) != 0)
        return 0;
    for (size_t i = 0, n = plume_settings_count(ps); i < n; i++) {
        const char *key = plume_settings_key(ps, i), *raw = NULL;
        if (strcmp(key, "method") == 0 || strcmp(key, "num_speculative_tokens") == 0 ||
            plume_settings_has(v->settings, key))
            continue;
        plume_error ignored = {0};
        if (plume_settings_string(ps, key, NULL, &raw, &ignored) || !raw)
            continue; /* not a scalar: the provider takes it from the pipeline only */
        char *path = NULL;
        struct stat sb;
        bool is_path = plume_settings_path_value(ps, key, &path, &ignored) == 0 && path &&
                       stat(path, &sb) == 0;
        int rc = plume_settings_set(v->settings, key, is_path ? path : raw, err);
        free(path);
        if (rc)
            return plume_err_prefix(err, "--spec %s: the pipeline's %s", v->name, key);
    }
    return 0;
}

static int resolve_variant(plume_registry *reg, variant *v, plume_error *err)
{
    char plugin[64];
    snprintf(plugin, sizeof plugin, "spec-%s", v->method);
    if (!plume_registry_find_proposer(reg, v->method) && plume_registry_load(reg, plugin, err))
        return plume_err_prefix(err, "--spec %s: no proposer '%s' is registered, and loading "
                                     "the plugin %s failed",
                                v->name, v->method, plugin);
    if (!(v->vt = plume_registry_find_proposer(reg, v->method))) {
        char names[512];
        return plume_err(err, PLUME_ERR_INVALID,
                         "--spec %s: plugin %s registers no proposer named '%s' (registered "
                         "proposers: %s)",
                         v->name, plugin, v->method,
                         plume_registry_names(reg, PLUME_KIND_PROPOSER, names, sizeof names));
    }
    if (v->vt->validate)
        return v->vt->validate(v->settings, err);
    if (plume_settings_count(v->settings) > 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "--spec %s: proposer %s takes no settings (only k), got '%s'", v->name,
                         v->method, plume_settings_key(v->settings, 0));
    return 0;
}

typedef struct prompt_set {
    char **text;
    int *max_tokens;
    int n;
} prompt_set;

static int load_prompts(const char *path, const plume_tokenizer *tok, int cap_tokens,
                        prompt_set *ps, plume_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return plume_err(err, PLUME_ERR_IO, "cannot open the workload %s", path);
    char *line = NULL;
    size_t lcap = 0;
    int lineno = 0;
    memset(ps, 0, sizeof *ps);
    while (getline(&line, &lcap, f) > 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        json_t *jp = json_object_get(o, "prompt");
        if (!json_is_string(jp)) {
            json_decref(o);
            free(line);
            fclose(f);
            return plume_err(err, PLUME_ERR_INVALID, "%s:%d: expected {\"prompt\": TEXT, ...}",
                             path, lineno);
        }
        char *text = NULL;
        if (json_is_true(json_object_get(o, "chat"))) {
            plume_chat_msg msg = {"user", json_string_value(jp)};
            if (plume_chat_apply(tok, &msg, 1, true, &text, err)) {
                json_decref(o);
                free(line);
                fclose(f);
                return -1;
            }
        } else {
            text = strdup(json_string_value(jp));
        }
        json_t *jm = json_object_get(o, "max_tokens");
        int mt = json_is_integer(jm) ? (int)json_integer_value(jm) : 128;
        if (cap_tokens > 0 && cap_tokens < mt)
            mt = cap_tokens;
        ps->text = realloc(ps->text, sizeof *ps->text * (size_t)(ps->n + 1));
        ps->max_tokens = realloc(ps->max_tokens, sizeof *ps->max_tokens * (size_t)(ps->n + 1));
        ps->text[ps->n] = text;
        ps->max_tokens[ps->n++] = mt;
        json_decref(o);
    }
    free(line);
    fclose(f);
    if (ps->n == 0)
        return plume_err(err, PLUME_ERR_INVALID, "%s has no prompts", path);
    return 0;
}

/* Serves the workload `batch` requests at a time; stores every output so
 * variants can be compared. */
static int run_workload(plume_engine *e, const prompt_set *ps, int batch,
                        const plume_sampling_params *sp, int32_t **outs, size_t *n_outs,
                        int64_t *generated, plume_error *err)
{
    plume_request_params rp = plume_request_defaults();
    rp.sampling = *sp;
    *generated = 0;
    for (int first = 0; first < ps->n; first += batch) {
        int64_t ids[256];
        int count = ps->n - first < batch ? ps->n - first : batch;
        for (int i = 0; i < count; i++) {
            rp.max_tokens = ps->max_tokens[first + i];
            rp.sampling.seed = sp->seed + (uint64_t)(first + i);
            ids[i] = plume_engine_add_text(e, ps->text[first + i], &rp, err);
            if (ids[i] < 0)
                return -1;
        }
        while (plume_engine_has_work(e))
            if (plume_engine_step(e, err) < 0)
                return -1;
        for (int i = 0; i < count; i++) {
            plume_request_result r;
            plume_engine_result(e, ids[i], &r);
            *generated += (int64_t)r.n_output;
            int idx = first + i;
            free(outs[idx]);
            outs[idx] = malloc(sizeof(int32_t) * (r.n_output + 1));
            memcpy(outs[idx], r.output_ids, sizeof(int32_t) * r.n_output);
            n_outs[idx] = r.n_output;
            plume_engine_release(e, ids[i]);
        }
    }
    return 0;
}

/* Whether the proposer reported every part of its memory (off: zeros). */
static bool mem_known(const plume_proposer_memory *m)
{
    return m->weight_bytes >= 0 && m->kv_bytes >= 0 && m->scratch_bytes >= 0;
}

static int64_t mem_total(const plume_proposer_memory *m)
{
    return m->weight_bytes + m->kv_bytes + m->scratch_bytes;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int bench_spec(int argc, char **argv)
{
    cli_pipeline_opts po = {0};
    const char *prompts = "bench/data/spec_prompts.jsonl";
    static const char *const default_specs[] = {"off", "ngram:k=3", "ngram:k=5"};
    const char *specs[MAX_VARIANTS];
    int nv = 0, batch = 1, reps = 3, cap_tokens = 0, threads = 0;
    bool as_json = false;
    plume_sampling_params sp = plume_request_defaults().sampling;
    for (int i = 1; i < argc; i++) {
        const char *v;
        cli_exit_if_help(argv, i, help);
        if (cli_pipeline_opt("bench spec", argc, argv, &i, &po)) {
            continue;
        } else if (cli_opt(argc, argv, &i, "--spec", &v)) {
            if (nv == MAX_VARIANTS) {
                fprintf(stderr, "plume bench spec: at most %d --spec variants\n", MAX_VARIANTS);
                return 2;
            }
            specs[nv++] = v;
        } else if (cli_opt(argc, argv, &i, "--variants", &v)) {
            fprintf(stderr,
                    "plume bench spec: --variants was replaced by --spec, one variant each "
                    "(repeatable): e.g. --spec off --spec ngram:k=3,prompt_lookup_max=2\n");
            return 2;
        } else if (cli_opt(argc, argv, &i, "--prompts", &v)) {
            prompts = v;
        } else if (cli_opt(argc, argv, &i, "--batch", &v)) {
            batch = (int)cli_int("--batch", v, 1, 256);
        } else if (cli_opt(argc, argv, &i, "--reps", &v)) {
            reps = (int)cli_int("--reps", v, 1, 100);
        } else if (cli_opt(argc, argv, &i, "--max-tokens", &v)) {
            cap_tokens = (int)cli_int("--max-tokens", v, 1, 1 << 20);
        } else if (cli_opt(argc, argv, &i, "--threads", &v)) {
            threads = (int)cli_int("--threads", v, 1, 1024);
        } else if (cli_sampling_opt(argc, argv, &i, "--temperature", "temperature", &sp) ||
                   cli_sampling_opt(argc, argv, &i, "--top-k", "top_k", &sp) ||
                   cli_sampling_opt(argc, argv, &i, "--top-p", "top_p", &sp) ||
                   cli_sampling_opt(argc, argv, &i, "--min-p", "min_p", &sp)) {
            continue;
        } else if (cli_opt(argc, argv, &i, "--seed", &v)) {
            sp.seed = (uint64_t)cli_int("--seed", v, 0, INT64_MAX);
        } else if (cli_flag(argv, i, "--json")) {
            as_json = true;
        } else {
            cli_unknown("bench spec", argv[i]);
        }
    }
    if (!po.model && !po.pipeline) {
        fprintf(stderr, "plume bench spec: --model or --pipeline is required\n\n%s", help);
        return 2;
    }
    if (nv == 0) {
        nv = (int)(sizeof default_specs / sizeof *default_specs);
        memcpy(specs, default_specs, sizeof default_specs);
    }
    plume_error err = {0};
    if (plume_sampling_validate(&sp, &err)) {
        fprintf(stderr, "plume bench spec: %s\n", err.msg);
        return 2;
    }
    const bool sampled = sp.temperature > 0.0f;
    variant vs[MAX_VARIANTS];
    int parsed = 0;
    for (; parsed < nv; parsed++) {
        if (parse_variant(specs[parsed], &vs[parsed], &err)) {
            parsed++; /* its settings are freed below */
            fprintf(stderr, "plume bench spec: %s\n", err.msg);
            for (int i = 0; i < parsed; i++)
                plume_settings_free(vs[i].settings);
            return 2;
        }
    }

    plume_model *m = NULL;
    plume_engine *e = NULL;
    prompt_set ps = {0};
    int32_t **ref = NULL, **outs = NULL;
    size_t *n_ref = NULL, *n_outs = NULL;
    int status = 1;
    plume_registry *reg = NULL;
    plume_pipeline *pipe = NULL;
    if (cli_pipeline_resolve("bench spec", &po, &reg, &pipe)) {
        status = 2;
        goto done;
    }
    /* every variant's proposer and settings, checked before the model loads */
    for (int i = 0; i < nv; i++)
        if (vs[i].method[0] &&
            (inherit_settings(pipe, &vs[i], &err) || resolve_variant(reg, &vs[i], &err)))
            goto done;
    int64_t proposer_loads = 0;
    int model_loads = 0; /* the target's: this command builds it once, here */
    plume_engine_params ep;
    plume_pipeline_engine_params(pipe, &ep);
    ep.max_num_seqs = batch > ep.max_num_seqs ? batch : ep.max_num_seqs;
    plume_build_opts bo = {.engine = &ep, .n_threads = threads};
    if (plume_pipeline_build(pipe, reg, &bo, &m, &e, &err))
        goto done;
    model_loads++;
    if (load_prompts(prompts, plume_model_tokenizer(m), cap_tokens, &ps, &err))
        goto done;
    ref = calloc((size_t)ps.n, sizeof *ref);
    outs = calloc((size_t)ps.n, sizeof *outs);
    n_ref = calloc((size_t)ps.n, sizeof *n_ref);
    n_outs = calloc((size_t)ps.n, sizeof *n_outs);
    /* warm-up: one request, not measured */
    {
        prompt_set one = {ps.text, ps.max_tokens, 1};
        int64_t g;
        if (run_workload(e, &one, 1, &sp, outs, n_outs, &g, &err))
            goto done;
    }
    for (int vi = 0; vi < nv; vi++) {
        variant *v = &vs[vi];
        plume_engine_stats st0 = plume_engine_get_stats(e);
        if (plume_engine_set_proposer(e, v->vt, v->settings, v->k, &err) ||
            plume_engine_set_spec_policy(e, v->adaptive >= 0 ? v->adaptive == 1 : ep.spec_adaptive,
                                         v->disable_above != INT32_MIN
                                             ? v->disable_above
                                             : ep.spec_disable_above_batch,
                                         &err))
            goto done;
        v->proposer_loads = plume_engine_get_stats(e).proposer_model_loads - st0.proposer_model_loads;
        proposer_loads += v->proposer_loads;
        double times[100], wall = 0.0;
        int64_t generated = 0;
        plume_engine_stats before = plume_engine_get_stats(e);
        for (int r = 0; r < reps; r++) {
            double t0 = plume_clock_seconds();
            if (run_workload(e, &ps, batch, &sp, outs, n_outs, &generated, &err))
                goto done;
            times[r] = plume_clock_seconds() - t0;
            wall += times[r];
        }
        plume_proposer_usage use;
        plume_engine_proposer_usage(e, &use); /* since set_proposer: these reps only */
        v->draft_seconds = use.seconds;
        v->draft_share = wall > 0 ? use.seconds / wall : 0.0;
        v->mem = v->method[0] ? use.memory : (plume_proposer_memory){0, 0, 0};
        v->engine_bytes = use.engine_bytes;
        plume_engine_stats after = plume_engine_get_stats(e);
        qsort(times, (size_t)reps, sizeof *times, cmp_double);
        v->tok_s = (double)generated / times[reps / 2];
        v->drafted = after.spec_drafted - before.spec_drafted;
        v->skipped = after.spec_steps_skipped - before.spec_steps_skipped;
        v->accepted = after.spec_accepted - before.spec_accepted;
        int64_t fw = after.spec_forwards - before.spec_forwards;
        int64_t emitted = after.spec_emitted - before.spec_emitted;
        v->acceptance = v->drafted ? (double)v->accepted / (double)v->drafted : 0.0;
        /* decoding forwards without drafts emit one token each */
        int64_t plain = (after.generated_tokens - before.generated_tokens) - emitted;
        v->tokens_per_forward = (fw + plain) ? (double)(emitted + plain) / (double)(fw + plain) : 1.0;
        v->identical = true;
        for (int i = 0; i < ps.n; i++) {
            if (vi == 0) {
                ref[i] = outs[i];
                n_ref[i] = n_outs[i];
                outs[i] = NULL;
            } else if (n_outs[i] != n_ref[i] ||
                       memcmp(outs[i], ref[i], sizeof(int32_t) * n_ref[i]) != 0) {
                v->identical = false;
            }
        }
        if (!as_json)
            fprintf(stderr, "  %-16s %7.1f tok/s  acceptance %5.1f%%  %.2f tokens/forward\n",
                    v->name, v->tok_s, 100.0 * v->acceptance, v->tokens_per_forward);
    }
    if (plume_engine_set_proposer(e, NULL, NULL, 0, &err))
        goto done;
    if (as_json) {
        json_t *arr = json_array();
        for (int i = 0; i < nv; i++) {
            const variant *v = &vs[i];
            json_t *o = json_pack(
                "{s:s,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:b,s:I,s:f,s:f,s:o,s:o,s:I}", "name", v->name,
                "tok_s", v->tok_s, "speedup", v->tok_s / vs[0].tok_s, "acceptance_rate",
                v->acceptance, "tokens_per_forward", v->tokens_per_forward, "drafted",
                (json_int_t)v->drafted, "accepted", (json_int_t)v->accepted,
                "proposer_model_loads", (json_int_t)v->proposer_loads, "proposer_loaded_model",
                v->proposer_loads > 0, "steps_skipped", (json_int_t)v->skipped,
                "draft_time_share", v->draft_share, "draft_seconds", v->draft_seconds,
                "output_identical", sampled ? json_null() : json_boolean(v->identical),
                "draft_memory", mem_known(&v->mem)
                                    ? json_pack("{s:I,s:I,s:I,s:I}", "weight_bytes",
                                                (json_int_t)v->mem.weight_bytes, "kv_bytes",
                                                (json_int_t)v->mem.kv_bytes, "scratch_bytes",
                                                (json_int_t)v->mem.scratch_bytes, "total_bytes",
                                                (json_int_t)mem_total(&v->mem))
                                    : json_null(),
                "engine_spec_bytes", (json_int_t)v->engine_bytes);
            json_array_append_new(arr, o);
        }
        json_t *o = json_pack("{s:i,s:o,s:i,s:i,s:s,s:{s:f,s:i,s:f,s:f,s:I}}", "model_loads",
                              model_loads, "variants", arr, "batch", batch, "reps", reps,
                              "prompts", prompts, "sampling", "temperature",
                              (double)sp.temperature, "top_k", (int)sp.top_k, "top_p",
                              (double)sp.top_p, "min_p", (double)sp.min_p, "seed",
                              (json_int_t)sp.seed);
        char *s = json_dumps(o, 0);
        puts(s);
        free(s);
        json_decref(o);
    } else {
        printf("%-18s %9s %8s %11s %10s %7s %11s %10s %6s %8s\n", "variant", "tok/s", "speedup",
               "acceptance", "tok/fwd", "same", "draft time", "draft MiB", "loads", "skipped");
        for (int i = 0; i < nv; i++) {
            const variant *v = &vs[i];
            char mib[32];
            if (mem_known(&v->mem))
                snprintf(mib, sizeof mib, "%.1f", (double)mem_total(&v->mem) / (1 << 20));
            else
                snprintf(mib, sizeof mib, "-");
            printf("%-18s %9.1f %7.2fx %10.1f%% %10.2f %7s %10.1f%% %10s %6lld %8lld\n", v->name,
                   v->tok_s, v->tok_s / vs[0].tok_s, 100.0 * v->acceptance, v->tokens_per_forward,
                   i == 0 ? "-" : sampled ? "n/a" : v->identical ? "yes" : "NO",
                   100.0 * v->draft_share, mib, (long long)v->proposer_loads,
                   (long long)v->skipped);
        }
        for (int i = 0; i < nv; i++)
            if (mem_known(&vs[i].mem) && mem_total(&vs[i].mem) > 0)
                printf("%s memory: weights %.1f MiB (as stored) + KV %.1f MiB (allocated) + "
                       "scratch %.1f MiB; the engine's speculation buffers %.1f MiB\n",
                       vs[i].name, (double)vs[i].mem.weight_bytes / (1 << 20),
                       (double)vs[i].mem.kv_bytes / (1 << 20),
                       (double)vs[i].mem.scratch_bytes / (1 << 20),
                       (double)vs[i].engine_bytes / (1 << 20));
        if (sampled)
            printf("sampled at temperature %g (top_k %d, top_p %g, min_p %g, seed %llu + "
                   "request index): outputs are not compared (same: n/a)\n",
                   (double)sp.temperature, (int)sp.top_k, (double)sp.top_p, (double)sp.min_p,
                   (unsigned long long)sp.seed);
        else
            printf("greedy (temperature 0): same = the output equals the first variant's\n");
        printf("model loads (target): %d; workload: %s (%d prompts, batch %d, median of %d)\n",
               model_loads, prompts, ps.n, batch, reps);
    }
    status = 0;
done:
    if (status == 1)
        fprintf(stderr, "plume bench spec: %s\n", err.msg[0] ? err.msg : "failed");
    for (int i = 0; ps.text && i < ps.n; i++) {
        free(ps.text[i]);
        if (ref)
            free(ref[i]);
        if (outs)
            free(outs[i]);
    }
    free(ps.text);
    free(ps.max_tokens);
    free(ref);
    free(outs);
    free(n_ref);
    free(n_outs);
    plume_engine_free(e);
    plume_model_free(m);
    for (int i = 0; i < nv; i++)
        plume_settings_free(vs[i].settings);
    plume_pipeline_free(pipe);
    plume_registry_free(reg);
    return status;
}
