/* quant-gptq: `plume quantize` for GPTQ checkpoints. */
#include "gptq_quantizer.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plume/fp16.h"
#include "gptq_algo.h"
#include "gptq_pack.h"
#include "gptq_rtn.h"
#include "gptq_tensors.h"

typedef struct qopts {
    bool gptq;                /* else rtn */
    gptq_algo_params p;
} qopts;

static const char *const k_methods[] = {"gptq", "rtn"};
static const char *const k_formats[] = {"gptq", "gptq_v2"};

/* The options from s, each error naming its key. */
static int read_opts(const plume_settings *s, qopts *o, plume_error *err)
{
    size_t mi, fi;
    int64_t bits, gs;
    bool sym, desc;
    double damp;
    if (plume_settings_choice(s, "method", k_methods, 2, 0, &mi, err) ||
        plume_settings_int(s, "bits", 4, 2, 8, &bits, err) ||
        plume_settings_int(s, "group_size", 128, -1, INT32_MAX, &gs, err) ||
        plume_settings_bool(s, "sym", true, &sym, err) ||
        plume_settings_bool(s, "desc_act", false, &desc, err) ||
        plume_settings_float_open_lo(s, "damp_percent", 0.01, 0.0, 1.0, &damp, err) ||
        plume_settings_choice(s, "checkpoint_format", k_formats, 2, 0, &fi, err))
        return -1;
    if (gptq_check_bits((int)bits, NULL))
        return plume_settings_error(s, "bits", err,
                                    "bits = %" PRId64 " is not supported (2, 3, 4 or 8)", bits);
    if (gs == 0)
        return plume_settings_error(s, "group_size", err,
                                    "group_size must be -1 (one group) or positive, got 0");
    o->gptq = mi == 0;
    o->p = gptq_algo_defaults((int)bits, gs, sym);
    o->p.desc_act = desc;
    o->p.damp_percent = damp;
    o->p.fmt = fi == 1 ? GPTQ_ZERO_V2 : GPTQ_ZERO_V1;
    return 0;
}

int gptq_quant_begin(const plume_settings *s, bool *needs_hessian, char *config_json, size_t cap,
                     plume_error *err)
{
    qopts o;
    if (read_opts(s, &o, err))
        return -1;
    *needs_hessian = o.gptq || o.p.desc_act;
    /* the fields AutoGPTQ, GPTQModel, transformers and vLLM read (formats.md
     * §1.6); lm_head stays float */
    int n = snprintf(config_json, cap,
                     "{\"quant_method\": \"gptq\", \"bits\": %d, \"group_size\": %" PRId64
                     ", \"desc_act\": %s, \"sym\": %s, \"damp_percent\": %g, "
                     "\"static_groups\": false, \"true_sequential\": true, "
                     "\"checkpoint_format\": \"%s\", \"lm_head\": false, "
                     "\"model_file_base_name\": \"model\", "
                     "\"meta\": {\"quantizer\": [\"plume:" PLUME_GPTQ_VERSION "\"], "
                     "\"method\": \"%s\"}}",
                     o.p.bits, o.p.group_size > 0 ? o.p.group_size : -1,
                     o.p.desc_act ? "true" : "false", o.p.sym ? "true" : "false",
                     o.p.damp_percent, o.p.fmt == GPTQ_ZERO_V2 ? "gptq_v2" : "gptq",
                     o.gptq ? "gptq" : "rtn");
    if (n < 0 || (size_t)n >= cap)
        return plume_err(err, PLUME_ERR_INTERNAL, "gptq: quantization_config too long");
    return 0;
}

/* The act-order of RTN with desc_act: inputs by descending diag(H) (stable),
 * dead inputs (diag 0) counted as 1, as GPTQ's steps 2 and 4 (formats.md
 * §1.7). */
static double diag_key(const double *H, int64_t K, int32_t k)
{
    double d = H[(int64_t)k * K + k];
    return d == 0.0 ? 1.0 : d;
}

static int32_t *diag_order(const double *H, int64_t K)
{
    int32_t *perm = malloc(sizeof *perm * (size_t)K);
    if (!perm)
        return NULL;
    for (int64_t i = 0; i < K; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = 1; i < K; i++) { /* insertion sort: stable; once per layer */
        int32_t p = perm[i];
        int64_t j = i;
        while (j > 0 && diag_key(H, K, perm[j - 1]) < diag_key(H, K, p)) {
            perm[j] = perm[j - 1];
            j--;
        }
        perm[j] = p;
    }
    return perm;
}

int gptq_quantize_job(const plume_settings *s, const plume_quant_job *job,
                      plume_quant_result *out, plume_error *err)
{
    qopts o;
    if (read_opts(s, &o, err))
        return -1;
    const int64_t N = job->out_features, K = job->in_features;
    const int align = gptq_pack_align(o.p.bits);
    if (K % align || N % align)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "gptq: %s is %" PRId64 " x %" PRId64 "; %d-bit packing needs both "
                         "dimensions to be multiples of %d",
                         job->prefix, N, K, o.p.bits, align);
    if (gptq_quant_check_finite(job, "gptq", err))
        return -1;
    if ((o.gptq || o.p.desc_act) && !job->hessian)
        return plume_err(err, PLUME_ERR_INVALID,
                         "gptq: %s needs calibration data (a Hessian) for %s", job->prefix,
                         o.gptq ? "the GPTQ algorithm" : "desc_act");
    gptq_tensors t;
    memset(&t, 0, sizeof t);
    if (o.gptq) {
        if (gptq_quantize(job->w, N, K, job->hessian, &o.p, &t, out->w_deq, NULL, err))
            return -1;
    } else {
        gptq_qconfig qc = {o.p.bits, o.p.group_size, o.p.sym, o.p.fmt};
        int32_t *perm = o.p.desc_act ? diag_order(job->hessian, K) : NULL;
        if (o.p.desc_act && !perm)
            return plume_err(err, PLUME_ERR_NOMEM, "gptq: out of memory");
        int rc = gptq_rtn_quantize(job->w, N, K, &qc, perm, &t, err);
        free(perm);
        if (rc)
            return -1;
    }
    /* the checkpoint keeps F16 scales: w_deq is what it computes */
    for (int64_t i = 0; i < t.G * N; i++)
        t.scales[i] = plume_fp16_to_fp32(plume_fp32_to_fp16(t.scales[i]));
    if (gptq_dequantize(t.qweight, t.qzeros, t.scales, t.g_idx, K, N, t.G, o.p.group_size,
                        o.p.bits, o.p.fmt, out->w_deq, err)) {
        gptq_tensors_free(&t);
        return -1;
    }
    /* the loss of the weights the checkpoint holds (F16 scales) */
    out->loss = job->hessian ? gptq_output_error(job->w, out->w_deq, N, K, job->hessian) : -1;
    if (!isfinite(out->loss) && job->hessian) { /* NaN also means out of memory */
        gptq_tensors_free(&t);
        return plume_err(err, PLUME_ERR_RANGE,
                         "gptq: %s: the output error is not finite (a scale overflowed F16, a "
                         "non-finite calibration Hessian, or out of memory)",
                         job->prefix);
    }
    out->n_tensors = 0;
    gptq_quant_put(out, "qweight", "I32", K * o.p.bits / 32, N, 2, t.qweight);
    gptq_quant_put(out, "qzeros", "I32", t.G, N * o.p.bits / 32, 2, t.qzeros);
    gptq_quant_put(out, "scales", "F16", t.G, N, 2, t.scales);
    gptq_quant_put(out, "g_idx", "I32", K, 0, 1, t.g_idx);
    memset(&t, 0, sizeof t); /* the data now belongs to out */
    return 0;
}
