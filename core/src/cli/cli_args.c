#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "plume/sampler.h"
#include "plume/backend.h"

bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return false;
    if (a[n] == '=') {
        *val = a + n + 1;
        return true;
    }
    if (a[n] != '\0')
        return false;
    if (*i + 1 >= argc) {
        fprintf(stderr, "plume: option %s needs a value\n", name);
        exit(2);
    }
    *val = argv[++*i];
    return true;
}

bool cli_flag(char **argv, int i, const char *name) { return strcmp(argv[i], name) == 0; }

void cli_exit_if_help(char **argv, int i, const char *help)
{
    if (cli_flag(argv, i, "--help") || cli_flag(argv, i, "-h")) {
        fputs(help, stdout);
        exit(0);
    }
}

long long cli_int(const char *opt, const char *s, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "plume: %s expects an integer in [%lld, %lld], got '%s'\n", opt, lo, hi, s);
        exit(2);
    }
    return v;
}

double cli_float(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "plume: %s expects a number in [%g, %g], got '%s'\n", opt, lo, hi, s);
        exit(2);
    }
    return v;
}

double cli_sampling(const char *opt, const char *name, const char *v)
{
    const plume_sampling_param *f = plume_sampling_param_find(name);
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!f || errno || end == v || *end != '\0' || !plume_sampling_param_ok(f, x)) {
        char range[64] = "?";
        if (f)
            plume_sampling_param_range(f, range, sizeof range);
        fprintf(stderr, "plume: %s (the sampling parameter %s) expects %s in %s (%s), got '%s'\n",
                opt, name, f && f->integer ? "an integer" : "a number", range,
                f ? f->neutral : "?", v);
        exit(2);
    }
    return x;
}

bool cli_sampling_opt(int argc, char **argv, int *i, const char *opt, const char *name,
                      plume_sampling_params *sp)
{
    const char *v;
    if (!cli_opt(argc, argv, i, opt, &v))
        return false;
    double x = cli_sampling(opt, name, v);
    plume_sampling_param_store(sp, plume_sampling_param_find(name), x);
    return true;
}

void cli_range(const char *cmd, const char *opt, const char *v, int *lo, int *hi)
{
    const char *dash = strchr(v, '-');
    char buf[64];
    if (!dash) {
        *lo = *hi = (int)cli_int(opt, v, 1, 1 << 20);
        return;
    }
    snprintf(buf, sizeof buf, "%.*s", (int)(dash - v), v);
    *lo = (int)cli_int(opt, buf, 1, 1 << 20);
    *hi = (int)cli_int(opt, dash + 1, 1, 1 << 20);
    if (*hi < *lo) {
        fprintf(stderr, "plume %s: %s range %s is empty (give MIN-MAX with MIN <= MAX)\n", cmd,
                opt, v);
        exit(2);
    }
}

void cli_unknown(const char *cmd, const char *arg)
{
    fprintf(stderr, "plume %s: unknown option or extra argument '%s' (see plume %s --help)\n", cmd,
            arg, cmd);
    exit(2);
}

int cli_kv_dtype(const char *cmd, const char *v)
{
    if (strcmp(v, "f32") == 0)
        return PLUME_KV_F32;
    if (strcmp(v, "f16") == 0)
        return PLUME_KV_F16;
    if (strcmp(v, "int8") == 0)
        return PLUME_KV_INT8;
    fprintf(stderr, "plume %s: --kv-dtype is f32, f16 or int8, got '%s'\n", cmd, v);
    exit(2);
}

/* 0: dir exists and is empty; 2: it was created; 1: exists with entries;
 * -1: error (printed). */
int cli_prepare_out_dir(const char *cmd, const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (mkdir(dir, 0777) != 0) {
            fprintf(stderr, "plume %s: cannot create %s: %s\n", cmd, dir, strerror(errno));
            return -1;
        }
        return 2;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "plume %s: %s exists and is not a directory\n", cmd, dir);
        return -1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "plume %s: cannot read %s: %s\n", cmd, dir, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            rc = 1;
    closedir(d);
    return rc;
}
