/* RoPE inverse frequencies for every supported scaling, and the per-layer
 * view of a config (which RoPE, which window).  The formulas are those of
 * transformers' modeling_rope_utils.py (_compute_linear_scaling_...,
 * _compute_dynamic_ntk_..., _compute_yarn_..., _compute_llama3_...);
 * llama.cpp's GGUF forms reduce to them (config_gguf.c says how). */
#include <math.h>
#include <stdio.h>

#include "model/config.h"

const char *plume_rope_scaling_name(plume_rope_scaling t)
{
    switch (t) {
    case PLUME_ROPE_SCALING_NONE: return "none";
    case PLUME_ROPE_SCALING_LINEAR: return "linear";
    case PLUME_ROPE_SCALING_DYNAMIC: return "dynamic";
    case PLUME_ROPE_SCALING_YARN: return "yarn";
    case PLUME_ROPE_SCALING_LLAMA3: return "llama3";
    }
    return "?";
}

int plume_config_nope_layers(const plume_model_config *cfg, bool *every4)
{
    int n = 0;
    *every4 = true;
    for (int l = 0; l < cfg->n_layer && l < PLUME_MAX_LAYERS; l++) {
        n += cfg->nope_layer[l];
        *every4 &= cfg->nope_layer[l] == ((l + 1) % 4 == 0);
    }
    return n;
}

int32_t plume_config_layer_window(const plume_model_config *cfg, int l)
{
    if (cfg->sliding_window <= 0 || l < 0 || l >= PLUME_MAX_LAYERS)
        return 0;
    return cfg->swa_layer[l] ? cfg->sliding_window : 0;
}

/* yarn's get_mscale. */
static double yarn_mscale(double scale, double m)
{
    return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

/* yarn's find_correction_dim. */
static double yarn_corr_dim(double rotations, double dim, double base, double max_pos)
{
    return dim * log(max_pos / (rotations * 2.0 * M_PI)) / (2.0 * log(base));
}

void plume_rope_inv_freq(const plume_rope_cfg *r, int32_t head_dim, int32_t n_ctx_train,
                         float *inv_freq, float *attn_mult)
{
    const int half = head_dim / 2;
    const double d = head_dim;
    double base = r->theta, factor = r->factor > 0 ? r->factor : 1.0;
    *attn_mult = 1.0f;
    if (r->type == PLUME_ROPE_SCALING_DYNAMIC) {
        /* transformers recomputes the base for seq_len = max(position)+1
         * on every forward; plume fixes seq_len = factor x
         * max_position_embeddings (vLLM's choice) so that a position's
         * rotation never depends on the batch, the chunk or the cache. */
        double seq_len = factor * n_ctx_train;
        base *= pow(factor * seq_len / n_ctx_train - (factor - 1.0), d / (d - 2.0));
    }
    double low = 0, high = 0;
    if (r->type == PLUME_ROPE_SCALING_YARN) {
        double bf = r->beta_fast > 0 ? r->beta_fast : 32.0;
        double bs = r->beta_slow > 0 ? r->beta_slow : 1.0;
        low = yarn_corr_dim(bf, d, base, r->orig_ctx);
        high = yarn_corr_dim(bs, d, base, r->orig_ctx);
        if (r->truncate) {
            low = floor(low);
            high = ceil(high);
        }
        low = low > 0 ? low : 0;
        high = high < d - 1 ? high : d - 1;
        if (low == high)
            high += 0.001; /* transformers: "prevent singularity" */
        double af = r->attn_factor;
        if (!(af > 0)) {
            if (r->mscale > 0 && r->mscale_all_dim > 0)
                af = yarn_mscale(factor, r->mscale) / yarn_mscale(factor, r->mscale_all_dim);
            else
                af = yarn_mscale(factor, 1.0);
        }
        *attn_mult = (float)(af * af); /* cos and sin both carry af: q.k gets af^2 */
    }
    for (int i = 0; i < half; i++) {
        double f = 1.0 / pow(base, 2.0 * i / d);
        switch (r->type) {
        case PLUME_ROPE_SCALING_NONE:
        case PLUME_ROPE_SCALING_DYNAMIC:
            break;
        case PLUME_ROPE_SCALING_LINEAR:
            f /= factor;
            break;
        case PLUME_ROPE_SCALING_YARN: {
            double ramp = ((double)i - low) / (high - low);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            double extra = 1.0 - ramp; /* inv_freq_extrapolation_factor */
            f = f / factor * (1.0 - extra) + f * extra;
            break;
        }
        case PLUME_ROPE_SCALING_LLAMA3: {
            double old = r->orig_ctx, lo = r->low_freq_factor, hi = r->high_freq_factor;
            double wavelen = 2.0 * M_PI / f;
            if (wavelen > old / lo) {
                f /= factor;
            } else if (!(wavelen < old / hi)) {
                double smooth = (old / wavelen - lo) / (hi - lo);
                f = (1.0 - smooth) * f / factor + smooth * f;
            }
            break;
        }
        }
        inv_freq[i] = (float)f;
    }
}

int plume_rope_cfg_validate(const plume_rope_cfg *r, const char *what, plume_error *err)
{
    if (!(r->theta > 0.0f) || !isfinite(r->theta))
        return plume_err(err, PLUME_ERR_RANGE, "%s: rope_theta must be positive, got %g", what,
                         (double)r->theta);
    if (r->type == PLUME_ROPE_SCALING_NONE)
        return 0;
    if (!(r->factor >= 1.0f) || !isfinite(r->factor))
        return plume_err(err, PLUME_ERR_RANGE,
                         "%s: rope scaling %s needs a factor >= 1, got %g; fix the model's "
                         "config or metadata",
                         what, plume_rope_scaling_name(r->type), (double)r->factor);
    if ((r->type == PLUME_ROPE_SCALING_YARN || r->type == PLUME_ROPE_SCALING_LLAMA3) &&
        r->orig_ctx <= 0)
        return plume_err(err, PLUME_ERR_RANGE,
                         "%s: rope scaling %s needs original_max_position_embeddings > 0", what,
                         plume_rope_scaling_name(r->type));
    if (r->type == PLUME_ROPE_SCALING_LLAMA3 &&
        !(r->low_freq_factor > 0 && r->high_freq_factor > r->low_freq_factor))
        return plume_err(err, PLUME_ERR_RANGE,
                         "%s: rope scaling llama3 needs 0 < low_freq_factor < high_freq_factor "
                         "(got %g, %g)",
                         what, (double)r->low_freq_factor, (double)r->high_freq_factor);
    if (r->type == PLUME_ROPE_SCALING_YARN &&
        (r->beta_fast < 0 || r->beta_slow < 0 || r->attn_factor < 0 || !isfinite(r->attn_factor)))
        return plume_err(err, PLUME_ERR_RANGE,
                         "%s: rope scaling yarn needs non-negative beta_fast, beta_slow and "
                         "attention_factor",
                         what);
    return 0;
}
