/* quant-awq: the "awq" linear provider.  A layer's AWQ tensors (formats.md
 * §2.1) are checked, unpacked from AWQ's interleaved output-dim packing and
 * handed to gptq_layer_build as the GPTQ 4-bit arrays of the same codes,
 * true zero points (gptq_v2) and scales: the tiles the shared fast kernels
 * read are then built exactly as for a GPTQ layer. */
#include "awq_linear.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "awq_cuda.h"
#include "awq_pack.h"
#include "gptq_layer.h"
#include "gptq_tensors.h"
#include "int4_linear.h"

/* ---- config ---- */

static const char *const k_keys[] = {"quant_method", "bits", "group_size", "zero_point",
                                     "version", "modules_to_not_convert", "backend"};

int awq_config_from_settings(const plume_settings *s, awq_load_config *c, plume_error *err)
{
    c->group_size = 128;
    if (!s)
        return 0;
    int64_t bits, gs;
    bool zp;
    const char *version;
    if (plume_settings_int(s, "bits", 4, INT32_MIN, INT32_MAX, &bits, err) ||
        plume_settings_int(s, "group_size", 128, INT32_MIN, INT32_MAX, &gs, err) ||
        plume_settings_bool(s, "zero_point", true, &zp, err) ||
        plume_settings_string(s, "version", "gemm", &version, err))
        return -1;
    if (bits != 4)
        return plume_settings_error(s, "bits", err,
                                    "awq: bits = %" PRId64 "; AWQ GEMM checkpoints are 4-bit only",
                                    bits);
    if (gs <= 0 || gs % 32)
        return plume_settings_error(s, "group_size", err,
                                    "awq: group_size = %" PRId64 " is not supported; plume runs "
                                    "AWQ with groups of a positive multiple of 32 inputs (32, 64, "
                                    "128, ...)",
                                    gs);
    if (!zp)
        return plume_settings_error(s, "zero_point", err,
                                    "awq: zero_point = false is not supported: the GEMM format "
                                    "stores zero points (AutoAWQ's from_linear requires them)");
    static const char *const other[] = {"gemv", "gemv_fast", "marlin", "exllama", "ipex"};
    if (strcasecmp(version, "gemm") != 0) {
        for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
            if (strcasecmp(version, other[i]) == 0)
                return plume_settings_error(
                    s, "version", err,
                    "awq: version \"%s\" is AutoAWQ's %s layout, which packs the weights "
                    "differently from GEMM; plume reads only version \"gemm\" (re-export the "
                    "model with version GEMM)",
                    version, other[i]);
        return plume_settings_error(s, "version", err,
                                    "awq: unknown version \"%s\"; plume reads only AutoAWQ's "
                                    "version \"gemm\"",
                                    version);
    }
    c->group_size = gs;
    return 0;
}

static int awq_validate(const plume_settings *s, plume_error *err)
{
    awq_load_config c;
    if (awq_config_from_settings(s, &c, err))
        return -1;
    return plume_settings_check_keys(s, k_keys, sizeof k_keys / sizeof k_keys[0], err);
}

/* ---- tensors ---- */


/* The core offers "awq" layers only of checkpoints whose config names awq
 * (model_load.c pick_method), so the tensor names decide; load checks the
 * shapes and says what is wrong with them. */
static int awq_probe(const plume_weights *w, const char *prefix)
{
    return gptq_layer_tensors_present(w, prefix) ? 10 : 0;
}


/* Checks the tensors' shapes against formats.md §2.1 and the config; sets
 * K, N, G.  ggml order: ne[0] is the PyTorch last dim. */
static int check_shapes(const char *prefix, const gptq_layer_tensors *t,
                        const awq_load_config *c, int64_t *K, int64_t *N, int64_t *G, plume_error *err)
{
    if (gptq_layer_tensors_check_types(t, "awq", prefix, err))
        return -1;
    const plume_tensor *qw = t->qw, *qz = t->qz, *sc = t->sc;
    /* qweight [K, N/8], qzeros [G, N/8], scales [G, N] */
    const int64_t k = qw->ne[1], n = sc->ne[0], g = sc->ne[1];
    if (qw->ne[0] * 8 != n) {
        if (qw->ne[1] * 8 == n || qw->ne[0] == n)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "awq: %s.qweight is [%" PRId64 ", %" PRId64 "] and scales [%" PRId64
                             ", %" PRId64 "]: that is GPTQ's layout (qweight [K/8, N], packed "
                             "along the input dim), not AWQ GEMM's [K, N/8]; is quant_method "
                             "wrong in the config?",
                             prefix, qw->ne[1], qw->ne[0], sc->ne[1], sc->ne[0]);
        return plume_err(err, PLUME_ERR_FORMAT,
                         "awq: %s.qweight is [%" PRId64 ", %" PRId64 "] but scales [%" PRId64
                         ", %" PRId64 "] has %" PRId64 " output columns; AWQ GEMM needs qweight "
                         "[K, N/8] = [%" PRId64 ", %" PRId64 "]",
                         prefix, qw->ne[1], qw->ne[0], sc->ne[1], sc->ne[0], n, k, n / 8);
    }
    if (qz->ne[1] != g || qz->ne[0] != qw->ne[0])
        return plume_err(err, PLUME_ERR_FORMAT,
                         "awq: %s.qzeros is [%" PRId64 ", %" PRId64 "]; with scales [%" PRId64
                         ", %" PRId64 "] it must be [%" PRId64 ", %" PRId64 "]",
                         prefix, qz->ne[1], qz->ne[0], g, n, g, n / 8);
    if (k <= 0 || k % c->group_size || g != k / c->group_size)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "awq: %s has %" PRId64 " inputs and %" PRId64 " scale groups, but "
                         "group_size = %" PRId64 " needs in_features a multiple of it and "
                         "in_features / group_size groups (check group_size in the config)",
                         prefix, k, g, c->group_size);
    if (gptq_layer_tensors_check_bias(t, "awq", prefix, n, err))
        return -1;
    *K = k;
    *N = n;
    *G = g;
    return 0;
}

int awq_layer_build(const int32_t *qweight, const int32_t *qzeros, const float *scales,
                    const float *bias, int64_t K, int64_t N, int64_t group_size,
                    const char *name, gptq_layer **out, plume_error *err)
{
    const int64_t G = K / group_size;
    int32_t *gq = malloc(sizeof *gq * (size_t)(K / 8 * N)), *gz = malloc(sizeof *gz * (size_t)(G * N / 8));
    int rc = -1;
    if (!gq || !gz)
        plume_err(err, PLUME_ERR_NOMEM, "awq: out of memory converting a %" PRId64 "x%" PRId64
                  " layer", N, K);
    else if (!awq_to_gptq(qweight, qzeros, K, N, G, gq, gz, err)) {
        const gptq_load_config cfg = {.bits = 4, .group_size = group_size, .sym = false,
                                      .desc_act = false, .fmt = GPTQ_ZERO_V2};
        rc = gptq_layer_build_named(gq, gz, scales, NULL, bias, K, N, G, &cfg, name, out, err);
    }
    free(gq);
    free(gz);
    return rc;
}

static int awq_load(const plume_weights *w, const char *prefix, const plume_settings *s,
                    const plume_backend_vtable *bvt, plume_backend *b, plume_linear **out,
                    plume_error *err)
{
    awq_load_config cfg;
    if (awq_config_from_settings(s, &cfg, err))
        return -1;
    gptq_layer_tensors t;
    if (gptq_layer_tensors_find(w, "awq", prefix, &t, err))
        return -1;
    if (t.gi)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "awq: layer %s has a g_idx tensor, which AWQ checkpoints never have "
                         "(a GPTQ checkpoint? check quant_method in the config)",
                         prefix);
    int64_t K = 0, N = 0, G = 0;
    if (check_shapes(prefix, &t, &cfg, &K, &N, &G, err))
        return -1;
    gptq_layer_copy c;
    int rc = -1;
    awq_cuda_host h = {0};
    if (gptq_layer_copy_make(&t, "awq", prefix, &c, err))
        goto done;
    /* the same codes as GPTQ 4-bit arrays with true zeros (gptq_v2), which
     * both the host layer and the CUDA kernels take */
    if (awq_cuda_desc(c.qweight, c.qzeros, c.scales, c.bias, K, N, cfg.group_size, &h, err)) {
        plume_err_prefix(err, "layer %s", prefix);
        goto done;
    }
    const gptq_load_config gcfg = {.bits = 4, .group_size = cfg.group_size, .sym = false,
                                   .desc_act = false, .fmt = GPTQ_ZERO_V2};
    rc = int4_linear_load("awq", prefix, &h.desc, &gcfg, int4_linear_dev_kernels(), bvt, b, out,
                          err);
done:
    awq_cuda_host_free(&h);
    gptq_layer_copy_free(&c);
    return rc;
}

static const plume_linear_vtable k_awq_linear = {
    .struct_size = sizeof(plume_linear_vtable),
    .interface_version = PLUME_LINEAR_INTERFACE_VERSION,
    .name = "awq",
    .validate = awq_validate,
    .probe = awq_probe,
    .load = awq_load,
    .destroy = int4_linear_destroy,
    .shape = int4_linear_shape,
    .forward = int4_linear_forward,
};

const plume_linear_vtable *awq_linear_vtable(void) { return &k_awq_linear; }
