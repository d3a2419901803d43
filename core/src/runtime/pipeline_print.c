/* `plume check`'s printout: the resolved pipeline as YAML, every slot with
 * its provider and where it comes from, every setting with its value and
 * whether it is a default. */
#include <stdio.h>
#include <string.h>

#include "runtime/pipeline_internal.h"

/* "built-in" or "plugin NAME VERSION (FILE)". */
static void origin(const plume_provider_info *i, char *buf, size_t cap)
{
    if (strcmp(i->file, "built-in") == 0)
        snprintf(buf, cap, "built-in");
    else
        snprintf(buf, cap, "plugin %s %s (%s)", i->plugin, i->plugin_version, i->file);
}

static void line(FILE *f, int indent, const char *key, const char *value, const char *comment)
{
    char kv[512];
    snprintf(kv, sizeof kv, "%*s%s: %s", indent, "", key, value);
    if (comment && comment[0])
        fprintf(f, "%-44s # %s\n", kv, comment);
    else
        fprintf(f, "%s\n", kv);
}

/* Prints a settings view's resolved keys, then any it never asked for
 * (possible only for a proposer without a validate slot). */
static void settings_lines(FILE *f, int indent, const plume_settings *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < settings_n_resolved(s); i++) {
        settings_resolved r = settings_resolved_at(s, i);
        line(f, indent, r.key, r.value, r.is_default ? "default" : NULL);
    }
    for (size_t i = 0; i < plume_settings_count(s); i++) {
        const char *k = plume_settings_key(s, i);
        bool seen = false;
        for (size_t j = 0; j < settings_n_resolved(s) && !seen; j++)
            seen = strcmp(settings_resolved_at(s, j).key, k) == 0;
        const ynode *m = settings_map(s);
        const ynode *v = ytree_get(m, k, NULL);
        if (!seen)
            line(f, indent, k, v && v->type == YNODE_SCALAR ? v->text : "{...}",
                 "passed to the provider as written");
    }
}

/* A section of the pipeline's own keys followed by the provider's. */
static void slot_section(FILE *f, const char *key, const pipe_slot *s, const char *method_key,
                         const char *const *own, size_t n_own)
{
    char where[512];
    origin(&s->info, where, sizeof where);
    fprintf(f, "%s:\n", key);
    line(f, 2, method_key, s->info.name, where);
    for (size_t k = 0; k < n_own; k++)
        for (size_t i = 0; i < settings_n_resolved(s->full); i++) {
            settings_resolved r = settings_resolved_at(s->full, i);
            if (strcmp(r.key, own[k]) == 0)
                line(f, 2, r.key, r.value, r.is_default ? "default" : NULL);
        }
    settings_lines(f, 2, s->prov);
}

void plume_pipeline_print(const plume_pipeline *p, void *stream)
{
    FILE *f = stream;
    char where[512], names[512];
    fprintf(f, "# resolved pipeline: %s\n", p->file);
    line(f, 0, "model", p->model, p->model_checked ? NULL : "not checked");
    if (p->format_given) {
        origin(&p->format.info, where, sizeof where);
        fprintf(f, "load_format:\n");
        line(f, 2, "method", p->format.info.name, where);
        settings_lines(f, 2, p->format.prov);
    } else if (p->format.present) {
        origin(&p->format.info, where, sizeof where);
        char c[600];
        snprintf(c, sizeof c, "weight format, by probing the model; %s", where);
        line(f, 0, "format", p->format.info.name, c);
    }
    snprintf(where, sizeof where, "each layer's method is chosen by probing the checkpoint; "
                                  "registered: %s",
             plume_registry_names(p->reg, PLUME_KIND_LINEAR, names, sizeof names));
    line(f, 0, "linear", "auto", where);
    origin(&p->backend.info, where, sizeof where);
    if (p->backend_auto) {
        char c[600];
        snprintf(c, sizeof c, "auto: the best usable backend; %s", where);
        line(f, 0, "backend", p->backend.info.name, c);
    } else {
        line(f, 0, "backend", p->backend.info.name, where);
    }
    settings_lines(f, 2, p->backend.prov);
    char t[32];
    snprintf(t, sizeof t, "%d", p->threads);
    line(f, 0, "threads", t,
         p->threads == 0 ? "the backend's choice (cpu: PLUME_THREADS, else physical cores)"
                         : NULL);
    fprintf(f, "plugins: [");
    for (size_t i = 0; i < p->n_plugins; i++)
        fprintf(f, "%s%s", i ? ", " : "", p->plugins[i]);
    fprintf(f, "]\n");
    fprintf(f, "kv_cache:\n");
    settings_lines(f, 2, p->kv);
    static const char *const sched_own[] = {"max_num_seqs", "max_batched_tokens",
                                            "prefix_caching"};
    slot_section(f, "scheduler", &p->scheduler, "method", sched_own, 3);
    fprintf(f, "sampling:\n");
    origin(&p->sampler.info, where, sizeof where);
    line(f, 2, "method", p->sampler.info.name, where);
    if (p->seed_given) {
        snprintf(t, sizeof t, "%llu", (unsigned long long)p->seed);
        line(f, 2, "seed", t, NULL);
    } else {
        line(f, 2, "seed", "random", "default: a new seed each run");
    }
    settings_lines(f, 2, p->sampler.prov);
    if (p->proposer.present) {
        static const char *const own[] = {"num_speculative_tokens", "adaptive",
                                          "disable_above_batch"};
        slot_section(f, "speculative", &p->proposer, "method", own, 3);
    } else {
        line(f, 0, "speculative", "off", "no speculative section");
    }
    if (p->kv_connector.present) {
        static const char *const own[] = {"role", "on_failure"};
        slot_section(f, "kv_connector", &p->kv_connector, "method", own, 2);
    } else {
        line(f, 0, "kv_connector", "off", "no kv_connector section");
    }
}
