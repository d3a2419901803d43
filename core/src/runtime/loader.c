/* The plugin loader: search path, dlopen, descriptor checks, and the
 * one-line rejection messages. */
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plume/registry.h"
#include "runtime/plume_config.h"
#include "runtime/registry_internal.h"

/* The size of the ABI 1.0 descriptor: a smaller one cannot be read. */
#define DESC_MIN_SIZE (offsetof(plume_plugin_desc, init) + sizeof(void (*)(void)))

void dlclose_plugin(void *handle) { dlclose(handle); }

int plume_registry_add_search_dir(plume_registry *r, const char *dir, plume_error *err)
{
    if (!dir || !dir[0])
        return plume_err(err, PLUME_ERR_INVALID, "an empty plugin directory was given");
    char **d = realloc(r->dirs, sizeof *d * (r->n_dirs + 1));
    if (!d)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    r->dirs = d;
    if (!(d[r->n_dirs] = strdup(dir)))
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    r->n_dirs++;
    return 0;
}

/* True when the running program's file lies under the build tree, so the
 * build tree's plugins are the ones that match it. */
static bool running_from_build_tree(void)
{
    char exe[PATH_MAX], root[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0 || !realpath(PLUME_BUILD_ROOT, root))
        return false;
    exe[n] = '\0';
    size_t len = strlen(root);
    return strncmp(exe, root, len) == 0 && exe[len] == '/';
}

int plume_registry_add_default_search_path(plume_registry *r, plume_error *err)
{
    const char *env = getenv("PLUME_PLUGIN_PATH");
    if (env) {
        char *copy = strdup(env), *save = NULL;
        if (!copy)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        for (char *t = strtok_r(copy, ":", &save); t; t = strtok_r(NULL, ":", &save))
            if (t[0] && plume_registry_add_search_dir(r, t, err)) {
                free(copy);
                return -1;
            }
        free(copy);
    }
    if (running_from_build_tree() && plume_registry_add_search_dir(r, PLUME_BUILD_PLUGINDIR, err))
        return -1;
    return plume_registry_add_search_dir(r, PLUME_PLUGINSDIR, err);
}

size_t plume_registry_n_search_dirs(const plume_registry *r) { return r->n_dirs; }

const char *plume_registry_search_dir(const plume_registry *r, size_t i)
{
    return i < r->n_dirs ? r->dirs[i] : NULL;
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The plugin name a file name implies: plume-<name>.so -> name; else "". */
static void name_from_file(const char *path, char *out, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    out[0] = '\0';
    if (strncmp(base, "plume-", 6) == 0 && n > 9 && strcmp(base + n - 3, ".so") == 0)
        snprintf(out, cap, "%.*s", (int)(n - 9), base + 6);
}

/* Fills err with "plugin FILE (WHO): WHAT" where WHO names the plugin and
 * both versions. */
static int rejection(plume_error *err, const char *file, const char *who, const char *what)
{
    return plume_err(err, PLUME_ERR_UNSUPPORTED, "plugin %s (%s): %s", file, who, what);
}

static void who_untrusted(char *who, size_t cap, const char *file)
{
    char fname[128];
    name_from_file(file, fname, sizeof fname);
    snprintf(who, cap, "'%s', version unknown; this plume %s has ABI %d.%d",
             fname[0] ? fname : "?", PLUME_VERSION_STRING, PLUME_ABI_MAJOR, PLUME_ABI_MINOR);
}

static void who_trusted(char *who, size_t cap, const plume_plugin_desc *d)
{
    snprintf(who, cap, "'%s' %s, built for plume ABI %u.%u; this plume %s has ABI %d.%d",
             d->name ? d->name : "?", d->version ? d->version : "?", d->abi_major, d->abi_minor,
             PLUME_VERSION_STRING, PLUME_ABI_MAJOR, PLUME_ABI_MINOR);
}

/* Checks the descriptor and runs init.  handle may be NULL (static).  On
 * failure the caller closes the handle. */
static int add_desc(plume_registry *r, const plume_plugin_desc *d, const char *file,
                    const char *expect_name, void *handle, plume_error *err)
{
    char who[512], what[PLUME_ERROR_MSG_MAX];
    who_untrusted(who, sizeof who, file);
    if (!d)
        return rejection(err, file, who, "not a plume plugin: its plume_plugin_entry returned "
                                         "NULL; return the descriptor PLUME_PLUGIN_DEFINE emits");
    if (d->magic != PLUME_PLUGIN_MAGIC) {
        snprintf(what, sizeof what,
                 "not a plume plugin: its descriptor's magic is 0x%08x, expected 0x%08x; "
                 "build it with PLUME_PLUGIN_DEFINE from <plume/plugin.h>",
                 d->magic, PLUME_PLUGIN_MAGIC);
        return rejection(err, file, who, what);
    }
    if (d->abi_major != PLUME_ABI_MAJOR) {
        snprintf(what, sizeof what,
                 "built for plume ABI %u.%u but this plume %s has ABI %d.%d (the major "
                 "versions differ); rebuild the plugin against this plume's SDK "
                 "(pkg-config plume-plugin, abi_version %d.%d)",
                 d->abi_major, d->abi_minor, PLUME_VERSION_STRING, PLUME_ABI_MAJOR,
                 PLUME_ABI_MINOR, PLUME_ABI_MAJOR, PLUME_ABI_MINOR);
        return rejection(err, file, who, what);
    }
    if (d->struct_size < DESC_MIN_SIZE) {
        snprintf(what, sizeof what,
                 "descriptor of %u bytes is smaller than the %zu bytes of plume ABI %u.0 it "
                 "claims; rebuild it with PLUME_PLUGIN_DEFINE from this plume's <plume/plugin.h>",
                 d->struct_size, DESC_MIN_SIZE, d->abi_major);
        return rejection(err, file, who, what);
    }
    if (!d->name || !d->version || !d->init) {
        snprintf(what, sizeof what, "incomplete descriptor (%s is NULL); fill every field "
                                    "of PLUME_PLUGIN_DEFINE",
                 !d->name ? "name" : !d->version ? "version" : "init");
        return rejection(err, file, who, what);
    }
    who_trusted(who, sizeof who, d);
    if (d->abi_minor > PLUME_ABI_MINOR) {
        snprintf(what, sizeof what,
                 "built for plume ABI %u.%u, newer than this plume %s's ABI %d.%d; upgrade "
                 "plume, or rebuild the plugin against this plume's SDK (abi_version %d.%d)",
                 d->abi_major, d->abi_minor, PLUME_VERSION_STRING, PLUME_ABI_MAJOR,
                 PLUME_ABI_MINOR, PLUME_ABI_MAJOR, PLUME_ABI_MINOR);
        return rejection(err, file, who, what);
    }
    if (expect_name && expect_name[0] && strcmp(expect_name, d->name) != 0) {
        snprintf(what, sizeof what,
                 "its descriptor names it '%s' but its file name says '%s'; rename the file to "
                 "plume-%s.so or fix the name in PLUME_PLUGIN_DEFINE",
                 d->name, expect_name, d->name);
        return rejection(err, file, who, what);
    }
    size_t other = registry_plugin_index(r, d->name);
    if (other != SIZE_MAX) {
        snprintf(what, sizeof what,
                 "a plugin named '%s' is already loaded from %s; load only one of the two",
                 d->name, r->plugins[other].file);
        return rejection(err, file, who, what);
    }
    plume_error ierr = {0};
    if (registry_init_plugin(r, d, file, handle, &ierr)) {
        snprintf(what, sizeof what, "%s", ierr.msg);
        if (strncmp(ierr.msg, "init failed", 11) == 0) {
            size_t n = strlen(what);
            snprintf(what + n, sizeof what - n,
                     "; fix what the plugin reports, or leave '%s' out of the plugins to load",
                     d->name);
        }
        return rejection(err, file, who, what);
    }
    return 0;
}

int plume_registry_add_static(plume_registry *r, plume_plugin_entry_fn entry, const char *origin,
                              plume_error *err)
{
    if (!entry)
        return plume_err(err, PLUME_ERR_INVALID, "no entry function given for %s", origin);
    return add_desc(r, entry(), origin, NULL, NULL, err);
}

static int load_path(plume_registry *r, const char *path, const char *expect_name,
                     plume_error *err)
{
    char who[512];
    who_untrusted(who, sizeof who, path);
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        char what[PLUME_ERROR_MSG_MAX];
        const char *e = dlerror();
        snprintf(what, sizeof what,
                 "dlopen failed: %s; check that it is a shared object built for this machine "
                 "and that the libraries it needs are installed",
                 e ? e : "dlopen failed");
        return rejection(err, path, who, what);
    }
    dlerror();
    void *sym = dlsym(h, PLUME_PLUGIN_ENTRY_SYMBOL);
    const char *e = dlerror();
    if (!sym || e) {
        char what[PLUME_ERROR_MSG_MAX];
        snprintf(what, sizeof what,
                 "not a plume plugin (%s); a plume plugin exports plume_plugin_entry, emitted "
                 "by PLUME_PLUGIN_DEFINE from <plume/plugin.h>: rebuild it with that or remove it "
                 "from the plugin path",
                 e ? e : "plume_plugin_entry is NULL");
        dlclose(h);
        return rejection(err, path, who, what);
    }
    plume_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* object -> function pointer, as POSIX allows */
    if (add_desc(r, entry(), path, expect_name, h, err)) {
        dlclose(h);
        return -1;
    }
    return 0;
}

int plume_registry_load_file(plume_registry *r, const char *path, plume_error *err)
{
    char name[128];
    name_from_file(path, name, sizeof name);
    if (!is_file(path))
        return plume_err(err, PLUME_ERR_IO, "plugin file %s does not exist or is not a file", path);
    char real[PATH_MAX];
    const char *p = realpath(path, real) ? real : path;
    for (size_t i = 0; i < r->n_plugins; i++)
        if (strcmp(r->plugins[i].file, p) == 0)
            return 0; /* already loaded from this very file */
    return load_path(r, p, name, err);
}

int plume_registry_load(plume_registry *r, const char *name, plume_error *err)
{
    if (!name || !name[0])
        return plume_err(err, PLUME_ERR_INVALID, "an empty plugin name was given");
    if (registry_plugin_index(r, name) != SIZE_MAX)
        return 0;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' ||
              *c == '.') || strlen(name) > 63)
            return plume_err(err, PLUME_ERR_INVALID,
                             "'%.64s' is not a plugin name: use up to 63 characters of a-z, 0-9, "
                             "'-', '_', '.', such as spec-ngram (the file plume-spec-ngram.so is "
                             "found on the plugin path)", name);
    char tried[PLUME_ERROR_MSG_MAX / 2] = "";
    for (size_t i = 0; i < r->n_dirs; i++) {
        char path[PATH_MAX];
        for (int layout = 0; layout < 2; layout++) {
            if (layout == 0)
                snprintf(path, sizeof path, "%s/plume-%s.so", r->dirs[i], name);
            else
                snprintf(path, sizeof path, "%s/%s/plume-%s.so", r->dirs[i], name, name);
            if (is_file(path))
                return plume_registry_load_file(r, path, err);
        }
        if (strlen(tried) + strlen(r->dirs[i]) + 3 < sizeof tried) {
            if (tried[0])
                strcat(tried, ":");
            strcat(tried, r->dirs[i]);
        }
    }
    return plume_err(err, PLUME_ERR_IO,
                     "plugin '%s' not found: no plume-%s.so in the plugin path (%s); add its "
                     "directory with --plugin-dir DIR or PLUME_PLUGIN_PATH, or install it into %s",
                     name, name, tried[0] ? tried : "empty", PLUME_PLUGINSDIR);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The plugin names of one directory's files in one layout, sorted; NULL
 * when the directory cannot be read.  *n gets the count. */
static char **dir_plugin_names(const char *dir, int layout, size_t *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char **names = NULL;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[PATH_MAX], name[128];
        if (layout == 0) {
            name_from_file(e->d_name, name, sizeof name);
            if (!name[0])
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        } else {
            if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof name)
                continue;
            snprintf(name, sizeof name, "%s", e->d_name);
            snprintf(path, sizeof path, "%s/%s/plume-%s.so", dir, name, name);
        }
        if (!is_file(path))
            continue;
        if (*n == cap) {
            char **grown = realloc(names, sizeof *names * (cap = cap ? 2 * cap : 8));
            if (!grown)
                break;
            names = grown;
        }
        if (!(names[*n] = strdup(name)))
            break;
        (*n)++;
    }
    closedir(d);
    if (*n)
        qsort(names, *n, sizeof *names, cmp_str);
    return names;
}

size_t plume_registry_scan(const plume_registry *r, plume_plugin_file_fn fn, void *ctx)
{
    char **seen = NULL;
    size_t n_seen = 0, found = 0;
    for (size_t i = 0; i < r->n_dirs; i++)
        for (int layout = 0; layout < 2; layout++) {
            size_t n;
            char **names = dir_plugin_names(r->dirs[i], layout, &n);
            for (size_t k = 0; k < n; k++) {
                char path[PATH_MAX];
                if (layout == 0)
                    snprintf(path, sizeof path, "%s/plume-%s.so", r->dirs[i], names[k]);
                else
                    snprintf(path, sizeof path, "%s/%s/plume-%s.so", r->dirs[i], names[k],
                             names[k]);
                bool shadowed = false;
                for (size_t j = 0; j < n_seen && !shadowed; j++)
                    shadowed = strcmp(seen[j], names[k]) == 0;
                fn(ctx, path, names[k], shadowed);
                found++;
                char **grown = shadowed ? NULL : realloc(seen, sizeof *seen * (n_seen + 1));
                if (grown) {
                    seen = grown;
                    seen[n_seen++] = names[k];
                    names[k] = NULL;
                }
                free(names[k]);
            }
            free(names);
        }
    for (size_t j = 0; j < n_seen; j++)
        free(seen[j]);
    free(seen);
    return found;
}
