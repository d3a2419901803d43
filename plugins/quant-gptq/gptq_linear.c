/* quant-gptq: the "gptq" linear provider (formats.md §1): its config, and
 * probe/load of a GPTQ Linear from its qweight/qzeros/scales[/g_idx][/bias]
 * tensors into the shared int4 layer (int4_linear.h: the repacked host
 * layer on backend cpu, the CUDA kernels' layout on backend cuda).
 * Modelled on the built-in "native" provider
 * (core/src/runtime/native_linear.c). */
#include "gptq_linear.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gptq_tensors.h"
#include "int4_linear.h"


/* ---- config ---- */

static const char *const k_formats[] = {"gptq", "gptq_v2"};
static const char *const k_keys[] = {"method", "bits", "group_size", "sym", "desc_act",
                                     "checkpoint_format"};

int gptq_config_from_settings(const plume_settings *s, gptq_load_config *c, plume_error *err)
{
    c->bits = 4;
    c->group_size = 128;
    c->sym = true;
    c->desc_act = false;
    c->fmt = GPTQ_ZERO_V1;
    if (!s)
        return 0;
    int64_t bits, gs;
    size_t fi;
    if (plume_settings_int(s, "bits", 4, 2, 8, &bits, err) ||
        plume_settings_int(s, "group_size", 128, -1, INT32_MAX, &gs, err) ||
        plume_settings_bool(s, "sym", true, &c->sym, err) ||
        plume_settings_bool(s, "desc_act", false, &c->desc_act, err) ||
        plume_settings_choice(s, "checkpoint_format", k_formats, 2, 0, &fi, err))
        return -1;
    if (gptq_check_bits((int)bits, NULL))
        return plume_settings_error(s, "bits", err,
                                    "bits = %" PRId64 " is not supported by the gptq provider "
                                    "(supported: 2, 3, 4, 8)",
                                    bits);
    if (gs == 0)
        return plume_settings_error(s, "group_size", err,
                                    "group_size must be -1 (one group) or positive, got 0");
    c->bits = (int)bits;
    c->group_size = gs;
    c->fmt = fi == 1 ? GPTQ_ZERO_V2 : GPTQ_ZERO_V1;
    return 0;
}

static int gptq_validate(const plume_settings *s, plume_error *err)
{
    gptq_load_config c;
    if (gptq_config_from_settings(s, &c, err))
        return -1;
    return plume_settings_check_keys(s, k_keys, sizeof k_keys / sizeof k_keys[0], err);
}

/* ---- tensors through the weight-format interface ---- */


static int gptq_probe(const plume_weights *w, const char *prefix)
{
    if (!gptq_layer_tensors_present(w, prefix))
        return 0;
    return plume_weights_find(w, prefix, "qweight")->n_dims == 2 ? 10 : 0;
}



static int gptq_load(const plume_weights *w, const char *prefix, const plume_settings *s,
                     const plume_backend_vtable *bvt, plume_backend *b, plume_linear **out,
                     plume_error *err)
{
    gptq_load_config cfg;
    if (gptq_config_from_settings(s, &cfg, err))
        return -1;
    gptq_layer_tensors t;
    if (gptq_layer_tensors_find(w, "gptq", prefix, &t, err) ||
        gptq_layer_tensors_check_types(&t, "gptq", prefix, err))
        return -1;
    const plume_tensor *qw = t.qw, *qz = t.qz, *sc = t.sc, *gi = t.gi;
    /* ggml order: ne[0] is the PyTorch last dim (formats.md §1.1 shapes:
     * qweight [K·b/32, N], qzeros [G, N·b/32], scales [G, N]). */
    int64_t N = qw->ne[0], K = qw->ne[1] * 32 / cfg.bits, G = sc->ne[1];
    if ((qw->ne[1] * 32) % cfg.bits)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: %s.qweight has %" PRId64 " rows, not a whole number of %d-bit "
                         "blocks (check bits)",
                         prefix, qw->ne[1], cfg.bits);
    if (sc->ne[0] != N)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: %s.scales is [%" PRId64 ", %" PRId64 "] but qweight has %" PRId64
                         " output columns",
                         prefix, sc->ne[1], sc->ne[0], N);
    if (qz->ne[1] != G || qz->ne[0] * 32 != N * cfg.bits)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: %s.qzeros is [%" PRId64 ", %" PRId64 "]; with bits = %d it must be"
                         " [%" PRId64 ", %" PRId64 "] (check bits)",
                         prefix, qz->ne[1], qz->ne[0], cfg.bits, G, N * cfg.bits / 32);
    if (gi && (!gptq_tensor_is_i32(gi) || gi->n_dims != 1 || gi->ne[0] != K))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: %s.g_idx must be a 1-D int32 tensor of %" PRId64
                         " entries (in_features with bits = %d)",
                         prefix, K, cfg.bits);
    if (gptq_layer_tensors_check_bias(&t, "gptq", prefix, N, err))
        return -1;
    gptq_layer_copy c;
    int rc = -1;
    if (gptq_layer_copy_make(&t, "gptq", prefix, &c, err))
        goto done;
    /* Without desc_act the checkpoint's g_idx is k // group_size by
     * construction; it is still used as given (the kernels take any g_idx). */
    const gptq_cuda_layer_desc d = {.qweight = c.qweight, .qzeros = c.qzeros, .scales = c.scales,
                                    .g_idx = c.g_idx, .bias = c.bias, .K = K, .N = N, .G = G,
                                    .bits = cfg.bits, .group_size = cfg.group_size, .fmt = cfg.fmt};
    rc = int4_linear_load("gptq", prefix, &d, &cfg, int4_linear_dev_kernels(), bvt, b, out, err);
done:
    gptq_layer_copy_free(&c);
    return rc;
}

static const plume_linear_vtable k_gptq_linear = {
    .struct_size = sizeof(plume_linear_vtable),
    .interface_version = PLUME_LINEAR_INTERFACE_VERSION,
    .name = "gptq",
    .validate = gptq_validate,
    .probe = gptq_probe,
    .load = gptq_load,
    .destroy = int4_linear_destroy,
    .shape = int4_linear_shape,
    .forward = int4_linear_forward,
};

const plume_linear_vtable *gptq_linear_vtable(void) { return &k_gptq_linear; }
