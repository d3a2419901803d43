/* quant-awq: `plume quantize` writing AWQ GEMM checkpoints. */
#include "awq_quantizer.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awq_pack.h"
#include "gptq_tensors.h"
#include "plume/int4_group.h"

static const char *const k_methods[] = {"awq"};

static int read_opts(const plume_settings *s, int64_t *group_size, plume_error *err)
{
    size_t mi;
    int64_t bits;
    if (plume_settings_choice(s, "method", k_methods, 1, 0, &mi, err) ||
        plume_settings_int(s, "bits", 4, 2, 8, &bits, err) ||
        plume_settings_int(s, "group_size", 128, -1, INT32_MAX, group_size, err))
        return -1;
    if (bits != 4)
        return plume_settings_error(s, "bits", err,
                                    "awq writes 4-bit checkpoints only (AutoAWQ GEMM), got %" PRId64,
                                    bits);
    if (*group_size <= 0 || *group_size % 32)
        return plume_settings_error(s, "group_size", err,
                                    "awq needs a group size that is a positive multiple of 32 (32, "
                                    "64, 128, ...), got %" PRId64,
                                    *group_size);
    return 0;
}

int awq_quant_begin(const plume_settings *s, bool *needs_hessian, char *config_json, size_t cap,
                    plume_error *err)
{
    int64_t gs;
    if (read_opts(s, &gs, err))
        return -1;
    *needs_hessian = true;
    /* AutoAWQ's to_transformers_dict (formats.md §2.4); vLLM reads bits /
     * group_size / zero_point, AutoAWQ w_bit / q_group_size: both written */
    int n = snprintf(config_json, cap,
                     "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": %" PRId64
                     ", \"zero_point\": true, \"version\": \"gemm\", "
                     "\"modules_to_not_convert\": null, \"w_bit\": 4, \"q_group_size\": %" PRId64
                     ", \"meta\": {\"quantizer\": [\"plume:" PLUME_AWQ_VERSION "\"]}}",
                     gs, gs);
    if (n < 0 || (size_t)n >= cap)
        return plume_err(err, PLUME_ERR_INTERNAL, "awq: quantization_config too long");
    return 0;
}

void awq_rtn(const float *w, int64_t N, int64_t K, int64_t group_size, uint8_t *codes,
             uint8_t *zeros, float *scales, float *deq)
{
    const int64_t G = K / group_size;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            const float *v = w + n * K + g * group_size;
            const plume_int4_group p = plume_int4_group_of(v, group_size);
            zeros[n * G + g] = (uint8_t)p.zero;
            scales[n * G + g] = p.scale;
            for (int64_t i = 0; i < group_size; i++) {
                const float q = plume_int4_group_code(v[i], p);
                codes[n * K + g * group_size + i] = (uint8_t)q;
                if (deq)
                    deq[n * K + g * group_size + i] = plume_int4_group_value(q, p);
            }
        }
}

/* Σ_n d_n H d_nᵀ, d = w − deq ([N][K]); d, v [K] scratch.  H d is summed
 * from H's rows (H is symmetric), which vectorizes. */
static double output_error(const float *w, const float *deq, int64_t N, int64_t K,
                           const double *H, double *d, double *v)
{
    double loss = 0;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++) {
            d[k] = (double)w[n * K + k] - (double)deq[n * K + k];
            v[k] = 0;
        }
        for (int64_t a = 0; a < K; a++) {
            if (d[a] == 0)
                continue;
            const double da = d[a], *row = H + a * K;
            for (int64_t b = 0; b < K; b++)
                v[b] += da * row[b];
        }
        for (int64_t k = 0; k < K; k++)
            loss += d[k] * v[k];
    }
    return loss;
}

int awq_quantize_job(const plume_settings *s, const plume_quant_job *job,
                     plume_quant_result *out, plume_error *err)
{
    int64_t gs;
    if (read_opts(s, &gs, err))
        return -1;
    const int64_t N = job->out_features, K = job->in_features, G = K / gs;
    if (K % gs || N % 8)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "awq: %s is %" PRId64 " x %" PRId64 "; AWQ GEMM needs in_features a "
                         "multiple of the group size %" PRId64 " and out_features a multiple of 8",
                         job->prefix, N, K, gs);
    if (gptq_quant_check_finite(job, "awq", err))
        return -1;
    uint8_t *codes = malloc((size_t)(N * K)), *zeros = malloc((size_t)(N * G));
    uint8_t *ct = malloc((size_t)(N * K)), *zt = malloc((size_t)(N * G));
    float *sc = malloc(sizeof *sc * (size_t)(N * G)), *sct = malloc(sizeof *sct * (size_t)(N * G));
    int32_t *qw = malloc(sizeof *qw * (size_t)(K * N / 8)), *qz = malloc(sizeof *qz * (size_t)(G * N / 8));
    double *d = malloc(sizeof *d * (size_t)K * 2);
    int rc = -1;
    if (!codes || !zeros || !ct || !zt || !sc || !sct || !qw || !qz || !d) {
        plume_err(err, PLUME_ERR_NOMEM, "awq: out of memory quantizing %s", job->prefix);
        goto done;
    }
    awq_rtn(job->w, N, K, gs, codes, zeros, sc, out->w_deq);
    /* to the checkpoint's [in][out] order (formats.md §2.1) */
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++)
            ct[k * N + n] = codes[n * K + k];
        for (int64_t g = 0; g < G; g++) {
            zt[g * N + n] = zeros[n * G + g];
            sct[g * N + n] = sc[n * G + g];
        }
    }
    if (awq_pack(ct, K, N, qw, err) || awq_pack(zt, G, N, qz, err))
        goto done;
    out->loss = job->hessian ? output_error(job->w, out->w_deq, N, K, job->hessian, d, d + K) : -1;
    gptq_quant_put(out, "qweight", "I32", K, N / 8, 2, qw);
    gptq_quant_put(out, "qzeros", "I32", G, N / 8, 2, qz);
    gptq_quant_put(out, "scales", "F16", G, N, 2, sct);
    qw = qz = NULL;
    sct = NULL;
    rc = 0;
done:
    free(codes);
    free(zeros);
    free(ct);
    free(zt);
    free(sc);
    free(sct);
    free(qw);
    free(qz);
    free(d);
    return rc;
}
