/* The registry: provider storage, registration checks, lookups, listings. */
#include "plume/registry.h"
#include "plume/struct_size.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/plume_config.h"
#include "runtime/registry_internal.h"

typedef void (*any_fn)(void);

/* What the registry knows about each kind's vtable in this plume. */
typedef struct kind_info {
    const char *name;
    size_t size;            /* sizeof the vtable in this build */
    size_t min_size;        /* the size of the oldest interface version accepted */
    uint32_t version;       /* the interface version this plume implements */
    size_t required[24];    /* offsets of required slots, 0-terminated */
    const char *required_names[24];
    uint32_t min_version;   /* the oldest interface version accepted (0: 1) */
    const char *why_min;    /* what changed at min_version */
} kind_info;

#define OFF(T, f) offsetof(T, f)
#define END(T, f) (offsetof(T, f) + sizeof(((T *)0)->f))

static const kind_info kinds[PLUME_KIND_COUNT] = {
    [PLUME_KIND_WEIGHT_FORMAT] = {"weight-format", sizeof(plume_weight_format_vtable),
        END(plume_weight_format_vtable, metadata), PLUME_WEIGHT_FORMAT_INTERFACE_VERSION,
        {OFF(plume_weight_format_vtable, probe), OFF(plume_weight_format_vtable, open),
         OFF(plume_weight_format_vtable, close), OFF(plume_weight_format_vtable, n_tensors),
         OFF(plume_weight_format_vtable, tensor)},
        {"probe", "open", "close", "n_tensors", "tensor"}},
    [PLUME_KIND_LINEAR] = {"linear", sizeof(plume_linear_vtable),
        END(plume_linear_vtable, forward), PLUME_LINEAR_INTERFACE_VERSION,
        {OFF(plume_linear_vtable, probe), OFF(plume_linear_vtable, load),
         OFF(plume_linear_vtable, destroy), OFF(plume_linear_vtable, shape),
         OFF(plume_linear_vtable, forward)},
        {"probe", "load", "destroy", "shape", "forward"}, 2,
        "version 2's forward takes backend buffers, not host pointers"},
    [PLUME_KIND_BACKEND] = {"backend", sizeof(plume_backend_vtable),
        END(plume_backend_vtable, matmul), PLUME_BACKEND_INTERFACE_VERSION,
        {OFF(plume_backend_vtable, create), OFF(plume_backend_vtable, destroy),
         OFF(plume_backend_vtable, supports), OFF(plume_backend_vtable, buf_alloc),
         OFF(plume_backend_vtable, buf_free), OFF(plume_backend_vtable, upload),
         OFF(plume_backend_vtable, download), OFF(plume_backend_vtable, weight_prepare),
         OFF(plume_backend_vtable, weight_free), OFF(plume_backend_vtable, kv_alloc),
         OFF(plume_backend_vtable, kv_free), OFF(plume_backend_vtable, embed),
         OFF(plume_backend_vtable, rmsnorm), OFF(plume_backend_vtable, rope),
         OFF(plume_backend_vtable, kv_store), OFF(plume_backend_vtable, attention),
         OFF(plume_backend_vtable, swiglu), OFF(plume_backend_vtable, add),
         OFF(plume_backend_vtable, add_bias), OFF(plume_backend_vtable, gather_out_rows),
         OFF(plume_backend_vtable, matmul)},
        {"create", "destroy", "supports", "buf_alloc", "buf_free", "upload", "download",
         "weight_prepare", "weight_free", "kv_alloc", "kv_free", "embed", "rmsnorm", "rope",
         "kv_store", "attention", "swiglu", "add", "add_bias", "gather_out_rows", "matmul"},
        3, "version 3's attention takes plume_attn_params (scale, sliding window); version 2 "
           "owns buffers, weights, the KV cache and the layer ops"},
    [PLUME_KIND_SAMPLER] = {"sampler", sizeof(plume_sampler_vtable),
        END(plume_sampler_vtable, probs), PLUME_SAMPLER_INTERFACE_VERSION,
        {OFF(plume_sampler_vtable, create), OFF(plume_sampler_vtable, destroy),
         OFF(plume_sampler_vtable, sample)},
        {"create", "destroy", "sample"}},
    [PLUME_KIND_SCHEDULER] = {"scheduler", sizeof(plume_scheduler_vtable),
        END(plume_scheduler_vtable, plan), PLUME_SCHEDULER_INTERFACE_VERSION, {0}, {0}},
    [PLUME_KIND_PROPOSER] = {"proposer", sizeof(plume_proposer_vtable),
        END(plume_proposer_vtable, release), PLUME_PROPOSER_INTERFACE_VERSION,
        {OFF(plume_proposer_vtable, create), OFF(plume_proposer_vtable, destroy),
         OFF(plume_proposer_vtable, propose)},
        {"create", "destroy", "propose"}, 2,
        "version 2's create takes the host (plume_proposer_host) and each plume_propose_seq "
        "carries the request's sampling parameters"},
    [PLUME_KIND_KV_CONNECTOR] = {"kv-connector", sizeof(plume_kv_connector_vtable),
        END(plume_kv_connector_vtable, request_finished), PLUME_KV_CONNECTOR_INTERFACE_VERSION,
        {OFF(plume_kv_connector_vtable, create), OFF(plume_kv_connector_vtable, destroy),
         OFF(plume_kv_connector_vtable, register_kv), OFF(plume_kv_connector_vtable, start_load),
         OFF(plume_kv_connector_vtable, save), OFF(plume_kv_connector_vtable, get_finished),
         OFF(plume_kv_connector_vtable, n_remote_tokens),
         OFF(plume_kv_connector_vtable, update_after_alloc),
         OFF(plume_kv_connector_vtable, request_finished)},
        {"create", "destroy", "register_kv", "start_load", "save", "get_finished",
         "n_remote_tokens", "update_after_alloc", "request_finished"}, 2,
        "version 2 has a scheduler half and a worker half over the backend's KV pool"},
};

/* Every vtable starts with these three fields. */
typedef struct vt_head {
    uint32_t struct_size;
    uint32_t interface_version;
    const char *name;
} vt_head;

const char *plume_kind_name(plume_provider_kind kind)
{
    return kind < PLUME_KIND_COUNT ? kinds[kind].name : "unknown";
}

const char *plume_version(void) { return PLUME_VERSION_STRING; }

void plume_abi_version(uint32_t *major, uint32_t *minor)
{
    if (major)
        *major = PLUME_ABI_MAJOR;
    if (minor)
        *minor = PLUME_ABI_MINOR;
}

int plume_registry_create(plume_registry **out, plume_error *err)
{
    plume_registry *r = calloc(1, sizeof *r);
    if (!r)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating the plugin registry");
    if (registry_add_builtins(r, err)) {
        plume_registry_free(r);
        return -1;
    }
    *out = r;
    return 0;
}

void plume_registry_free(plume_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_prov; i++)
        free(r->prov[i].vt);
    free(r->prov);
    for (size_t i = 0; i < r->n_stage; i++)
        free(r->stage[i].vt);
    free(r->stage);
    /* Close plugins last, newest first: nothing of theirs is referenced now. */
    for (size_t i = r->n_plugins; i-- > 0;) {
        plugin_rec *p = &r->plugins[i];
        free(p->name);
        free(p->version);
        free(p->description);
        free(p->license);
        free(p->file);
        if (p->handle)
            dlclose_plugin(p->handle);
    }
    free(r->plugins);
    for (size_t i = 0; i < r->n_dirs; i++)
        free(r->dirs[i]);
    free(r->dirs);
    free(r);
}

static bool valid_name(const char *s)
{
    if (!s || !s[0] || strlen(s) > 63)
        return false;
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
        return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' ||
              *c == '.'))
            return false;
    return true;
}

static const provider_rec *find_rec(const provider_rec *a, size_t n, plume_provider_kind kind,
                                    const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].kind == kind && strcmp(((const vt_head *)a[i].vt)->name, name) == 0)
            return &a[i];
    return NULL;
}

/* Records the first registration failure of the plugin being loaded. */
static int reject(plume_registry *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int reject(plume_registry *r, const char *fmt, ...)
{
    if (r->stage_err[0])
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->stage_err, sizeof r->stage_err, fmt, ap);
    va_end(ap);
    return -1;
}

/* The header that declares each kind's vtable (plume/<name>.h). */
static const char *const kind_header[PLUME_KIND_COUNT] = {
    [PLUME_KIND_WEIGHT_FORMAT] = "weight_format", [PLUME_KIND_LINEAR] = "linear",
    [PLUME_KIND_BACKEND] = "backend",             [PLUME_KIND_SAMPLER] = "sampler_provider",
    [PLUME_KIND_SCHEDULER] = "scheduler",         [PLUME_KIND_PROPOSER] = "proposer",
    [PLUME_KIND_KV_CONNECTOR] = "kv_connector",
};

static int register_vt(plume_registry *r, plume_provider_kind kind, const void *vtable)
{
    const kind_info *k = &kinds[kind];
    if (!r)
        return -1;
    if (!r->staging)
        return reject(r, "%s provider registered outside a plugin's init; register providers from "
                         "the init function named in PLUME_PLUGIN_DEFINE", k->name);
    if (!vtable)
        return reject(r, "a NULL %s vtable was registered; pass the address of a filled vtable",
                      k->name);
    vt_head h;
    memcpy(&h, vtable, sizeof h);
    const char *nm = h.struct_size >= sizeof h && h.name ? h.name : "?";
    if (h.struct_size < k->min_size)
        return reject(r, "%s provider '%s': vtable struct_size %u is smaller than the %zu bytes of "
                         "%s interface version %u; set struct_size = sizeof(the vtable) and rebuild "
                         "against plume's headers",
                      k->name, nm, h.struct_size, k->min_size, k->name,
                      k->min_version ? k->min_version : 1);
    uint32_t lo = k->min_version ? k->min_version : 1;
    if (h.interface_version >= 1 && h.interface_version < lo)
        return reject(r, "%s provider '%s': interface_version %u is older than this plume "
                         "accepts (%u..%u: %s); port the plugin to the current "
                         "plume/%s.h and rebuild",
                      k->name, nm, h.interface_version, lo, k->version, k->why_min,
                      kind_header[kind]);
    if (h.interface_version < 1 || h.interface_version > k->version)
        return reject(r, "%s provider '%s': interface_version %u is not one this plume knows "
                         "(%u..%u); rebuild the plugin against this plume's headers",
                      k->name, nm, h.interface_version, lo, k->version);
    if (!valid_name(h.name))
        return reject(r, "%s provider name '%s' is not valid: use 1-63 characters of a-z, 0-9, "
                         "'_', '-', '.', starting with a letter or digit",
                      k->name, h.name ? h.name : "(null)");
    for (int i = 0; i < 24 && k->required_names[i]; i++) {
        any_fn f;
        memcpy(&f, (const char *)vtable + k->required[i], sizeof f);
        if (!f)
            return reject(r, "%s provider '%s': required slot %s is NULL; implement it", k->name,
                          h.name, k->required_names[i]);
    }
    if (kind == PLUME_KIND_SCHEDULER) {
        const plume_scheduler_vtable *s = vtable;
        if (!s->create != !s->destroy)
            return reject(r, "scheduler provider '%s': create and destroy must both be set or "
                             "both be NULL", h.name);
        if (s->plan && !s->create)
            return reject(r, "scheduler provider '%s': a plan slot needs create and destroy",
                          h.name);
    }
    const provider_rec *dup = find_rec(r->prov, r->n_prov, kind, h.name);
    if (dup) {
        const plugin_rec *o = &r->plugins[dup->plugin];
        return reject(r, "%s provider '%s' is already registered by plugin '%s' (%s); rename the "
                         "provider or load only one of the two plugins",
                      k->name, h.name, o->name, o->file);
    }
    if (find_rec(r->stage, r->n_stage, kind, h.name))
        return reject(r, "%s provider '%s' is registered twice by this plugin; register each name "
                         "once", k->name, h.name);
    void *copy = calloc(1, k->size);
    provider_rec *st = realloc(r->stage, sizeof *st * (r->n_stage + 1));
    if (st)
        r->stage = st;
    if (!copy || !st) {
        free(copy);
        return reject(r, "out of memory registering %s provider '%s'", k->name, h.name);
    }
    plume_struct_copy(copy, k->size, vtable);
    ((vt_head *)copy)->struct_size = (uint32_t)k->size;
    r->stage[r->n_stage++] = (provider_rec){kind, copy, h.interface_version, SIZE_MAX};
    return 0;
}

int plume_register_weight_format(plume_registry *r, const plume_weight_format_vtable *vt)
{
    return register_vt(r, PLUME_KIND_WEIGHT_FORMAT, vt);
}
int plume_register_linear(plume_registry *r, const plume_linear_vtable *vt)
{
    return register_vt(r, PLUME_KIND_LINEAR, vt);
}
int plume_register_backend(plume_registry *r, const plume_backend_vtable *vt)
{
    return register_vt(r, PLUME_KIND_BACKEND, vt);
}
int plume_register_sampler(plume_registry *r, const plume_sampler_vtable *vt)
{
    return register_vt(r, PLUME_KIND_SAMPLER, vt);
}
int plume_register_scheduler(plume_registry *r, const plume_scheduler_vtable *vt)
{
    return register_vt(r, PLUME_KIND_SCHEDULER, vt);
}
int plume_register_proposer(plume_registry *r, const plume_proposer_vtable *vt)
{
    return register_vt(r, PLUME_KIND_PROPOSER, vt);
}
int plume_register_kv_connector(plume_registry *r, const plume_kv_connector_vtable *vt)
{
    return register_vt(r, PLUME_KIND_KV_CONNECTOR, vt);
}

static void discard_stage(plume_registry *r)
{
    for (size_t i = 0; i < r->n_stage; i++)
        free(r->stage[i].vt);
    r->n_stage = 0;
    r->staging = false;
    r->stage_err[0] = '\0';
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

int registry_init_plugin(plume_registry *r, const plume_plugin_desc *d, const char *file,
                         void *handle, plume_error *err)
{
    r->staging = true;
    r->n_stage = 0;
    r->stage_err[0] = '\0';
    plume_error perr = {0};
    int rc = d->init(r, &perr);
    if (r->stage_err[0]) { /* a refused registration says more than init's -1 */
        plume_err(err, PLUME_ERR_INVALID, "%s", r->stage_err);
        discard_stage(r);
        return -1;
    }
    if (rc != 0) {
        discard_stage(r);
        return plume_err(err, PLUME_ERR_INVALID, "init failed: %s",
                         perr.msg[0] ? perr.msg : "(the plugin gave no message)");
    }
    plugin_rec *pl = realloc(r->plugins, sizeof *pl * (r->n_plugins + 1));
    provider_rec *pv = realloc(r->prov, sizeof *pv * (r->n_prov + r->n_stage + 1));
    if (pl)
        r->plugins = pl;
    if (pv)
        r->prov = pv;
    plugin_rec rec = {dup_or_empty(d->name), dup_or_empty(d->version),
                      dup_or_empty(d->description), dup_or_empty(d->license), dup_or_empty(file),
                      d->abi_major, d->abi_minor, handle, r->n_stage};
    if (!pl || !pv || !rec.name || !rec.version || !rec.description || !rec.license ||
        !rec.file) {
        free(rec.name);
        free(rec.version);
        free(rec.description);
        free(rec.license);
        free(rec.file);
        discard_stage(r);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory registering the plugin");
    }
    for (size_t i = 0; i < r->n_stage; i++) {
        r->stage[i].plugin = r->n_plugins;
        r->prov[r->n_prov++] = r->stage[i];
    }
    r->n_stage = 0;
    r->staging = false;
    r->plugins[r->n_plugins++] = rec;
    return 0;
}

size_t registry_plugin_index(const plume_registry *r, const char *name)
{
    for (size_t i = 0; i < r->n_plugins; i++)
        if (strcmp(r->plugins[i].name, name) == 0)
            return i;
    return SIZE_MAX;
}

size_t plume_registry_n_providers(const plume_registry *r) { return r->n_prov; }

static void fill_info(const plume_registry *r, const provider_rec *p, plume_provider_info *out)
{
    const plugin_rec *pl = &r->plugins[p->plugin];
    *out = (plume_provider_info){p->kind, ((const vt_head *)p->vt)->name, pl->name, pl->version,
                                 pl->file, pl->abi_major, pl->abi_minor, p->interface_version,
                                 p->vt};
}

int plume_registry_provider(const plume_registry *r, size_t i, plume_provider_info *out)
{
    if (i >= r->n_prov)
        return -1;
    fill_info(r, &r->prov[i], out);
    return 0;
}

const void *plume_registry_find(const plume_registry *r, plume_provider_kind kind,
                                const char *name, plume_provider_info *info)
{
    if (!r || !name || kind >= PLUME_KIND_COUNT)
        return NULL;
    const provider_rec *p = find_rec(r->prov, r->n_prov, kind, name);
    if (p && info)
        fill_info(r, p, info);
    return p ? p->vt : NULL;
}

const char *plume_registry_names(const plume_registry *r, plume_provider_kind kind, char *buf,
                                 size_t cap)
{
    if (!cap)
        return buf;
    buf[0] = '\0';
    for (size_t i = 0; i < r->n_prov; i++) {
        if (r->prov[i].kind != kind)
            continue;
        if (buf[0])
            strncat(buf, ", ", cap - strlen(buf) - 1);
        strncat(buf, ((const vt_head *)r->prov[i].vt)->name, cap - strlen(buf) - 1);
    }
    if (!buf[0])
        snprintf(buf, cap, "none");
    return buf;
}

const plume_weight_format_vtable *plume_registry_find_weight_format(const plume_registry *r,
                                                                    const char *name)
{
    return plume_registry_find(r, PLUME_KIND_WEIGHT_FORMAT, name, NULL);
}
const plume_linear_vtable *plume_registry_find_linear(const plume_registry *r, const char *name)
{
    return plume_registry_find(r, PLUME_KIND_LINEAR, name, NULL);
}
const plume_backend_vtable *plume_registry_find_backend(const plume_registry *r, const char *name)
{
    return plume_registry_find(r, PLUME_KIND_BACKEND, name, NULL);
}
const plume_sampler_vtable *plume_registry_find_sampler(const plume_registry *r, const char *name)
{
    return plume_registry_find(r, PLUME_KIND_SAMPLER, name, NULL);
}
const plume_scheduler_vtable *plume_registry_find_scheduler(const plume_registry *r,
                                                            const char *name)
{
    return plume_registry_find(r, PLUME_KIND_SCHEDULER, name, NULL);
}
const plume_proposer_vtable *plume_registry_find_proposer(const plume_registry *r,
                                                          const char *name)
{
    return plume_registry_find(r, PLUME_KIND_PROPOSER, name, NULL);
}
const plume_kv_connector_vtable *plume_registry_find_kv_connector(const plume_registry *r,
                                                                  const char *name)
{
    return plume_registry_find(r, PLUME_KIND_KV_CONNECTOR, name, NULL);
}

const plume_weight_format_vtable *plume_registry_probe_format(const plume_registry *r,
                                                              const char *path, plume_error *err)
{
    const plume_weight_format_vtable *best = NULL;
    int best_score = 0;
    for (size_t i = 0; i < r->n_prov; i++) {
        if (r->prov[i].kind != PLUME_KIND_WEIGHT_FORMAT)
            continue;
        const plume_weight_format_vtable *f = r->prov[i].vt;
        int s = f->probe(path);
        if (s > best_score) {
            best = f;
            best_score = s;
        }
    }
    if (!best) {
        char names[512];
        plume_err(err, PLUME_ERR_UNSUPPORTED,
                  "no weight format recognises %s (registered formats: %s); give a .gguf file, "
                  "a .safetensors file or an HF model directory, or load the plugin for its format",
                  path, plume_registry_names(r, PLUME_KIND_WEIGHT_FORMAT, names, sizeof names));
    }
    return best;
}

const plume_backend_vtable *plume_registry_best_backend(const plume_registry *r)
{
    const plume_backend_vtable *best = NULL;
    int best_score = 0;
    for (size_t i = 0; i < r->n_prov; i++) {
        if (r->prov[i].kind != PLUME_KIND_BACKEND)
            continue;
        const plume_backend_vtable *b = r->prov[i].vt;
        int s = b->score ? b->score() : 1;
        if (s > best_score) {
            best = b;
            best_score = s;
        }
    }
    return best;
}

size_t plume_registry_n_plugins(const plume_registry *r) { return r->n_plugins; }

int plume_registry_plugin(const plume_registry *r, size_t i, plume_plugin_info *out)
{
    if (i >= r->n_plugins)
        return -1;
    const plugin_rec *p = &r->plugins[i];
    *out = (plume_plugin_info){p->name, p->version, p->description, p->license, p->file,
                               p->abi_major, p->abi_minor, p->n_providers};
    return 0;
}
