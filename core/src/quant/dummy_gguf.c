/* The dummy GGUF writer (dummy_gguf.h): metadata from the config and a
 * borrowed GGUF tokenizer, then every tensor of the dummy plan, made row
 * by row into a bounded buffer and streamed to the file. */
#include "plume/dummy_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "model/config.h"
#include "model/dummy.h"
#include "quant/gguf_hparams.h"

#define CHUNK_BYTES ((size_t)32 << 20) /* rows made per write, at most */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* HF row of GGUF row r under llama's permutation (formats.md §3.5). */
static int64_t hf_row(int64_t r, int32_t d)
{
    if (d <= 0)
        return r;
    int64_t h = r / d, i = r % d;
    return h * d + (i % 2 == 0 ? i / 2 : i / 2 + d / 2);
}

static int write_hparams(gguf_writer *w, const plume_model_config *c, const char *dir,
                         uint32_t file_type, plume_error *err)
{
    bool every4;
    const int n_nope = plume_config_nope_layers(c, &every4);
    if (n_nope > 0 && !every4)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s/config.json: its layers without RoPE are not every 4th layer, which "
                         "is all a GGUF (llama.cpp's smollm3) can say",
                         dir);
    /* the dummy plan's families all have a GGUF name; SmolLM3 is llama's with NoPE */
    const char *a = n_nope > 0 ? "smollm3" : plume_config_gguf_arch(c->arch);
    if (!a)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s/config.json: architecture %s has no GGUF name plume knows", dir,
                         c->arch_name);
    if (c->rope.type != PLUME_ROPE_SCALING_NONE && c->rope.type != PLUME_ROPE_SCALING_LLAMA3)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s/config.json: rope scaling %s is not written to GGUF by the dummy "
                         "writer yet (none and llama3 are); drop rope_scaling from the config",
                         dir, plume_rope_scaling_name(c->rope.type));
    gguf_writer_kv_str(w, "general.architecture", a, strlen(a));
    const char *base = strrchr(dir, '/');
    base = base && base[1] ? base + 1 : dir;
    char name[256];
    snprintf(name, sizeof name, "%s (dummy weights)", base);
    gguf_writer_kv_str(w, "general.name", name, strlen(name));
    gguf_write_hparams(w, a, c);
    if (c->n_expert > 0) { /* the keys llama.cpp's converter writes */
        char k[128];
        const struct {
            const char *suffix;
            int32_t v;
        } u32s[] = {{"expert_count", c->n_expert},
                    {"expert_used_count", c->n_expert_used},
                    {"expert_feed_forward_length", c->n_ff_exp},
                    {"expert_shared_feed_forward_length", c->n_ff_shexp}};
        for (size_t i = 0; i < 4; i++)
            if (i < 3 || c->n_ff_shexp > 0) {
                snprintf(k, sizeof k, "%s.%s", a, u32s[i].suffix);
                gguf_writer_kv_u32(w, k, (uint32_t)u32s[i].v);
            }
        snprintf(k, sizeof k, "%s.expert_weights_norm", a);
        gguf_writer_kv_bool(w, k, c->moe_norm_topk);
    }
    gguf_writer_kv_u32(w, "general.file_type", file_type);
    gguf_writer_kv_u32(w, "general.quantization_version", 2);
    return 0;
}

/* tokenizer.* of the GGUF tok, the token arrays padded to n_vocab. */
static int write_tokenizer(gguf_writer *w, const char *tok_path, int32_t n_vocab, plume_error *err)
{
    size_t n = strlen(tok_path);
    if (n < 5 || strcmp(tok_path + n - 5, ".gguf") != 0)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "dummy GGUF: the tokenizer must come from a .gguf file (got %s); give "
                         "--tokenizer models/SmolLM2-135M-Instruct.Q4_1.gguf or another GGUF",
                         tok_path);
    gguf_file *g;
    if (gguf_open(tok_path, &g, err))
        return plume_err_prefix(err, "dummy GGUF: the tokenizer");
    const gguf_value *toks = gguf_get(g, "tokenizer.ggml.tokens");
    int rc = 0;
    if (!toks || toks->type != GGUF_TYPE_ARRAY || toks->arr.type != GGUF_TYPE_STRING) {
        rc = plume_err(err, PLUME_ERR_FORMAT, "%s has no tokenizer.ggml.tokens", tok_path);
    } else if (toks->arr.n > (uint64_t)n_vocab) {
        rc = plume_err(err, PLUME_ERR_FORMAT,
                       "%s has %llu tokens, more than the config's vocab_size %d; borrow a "
                       "smaller vocabulary or raise vocab_size",
                       tok_path, (unsigned long long)toks->arr.n, n_vocab);
    }
    for (size_t i = 0; !rc && i < gguf_n_kv(g); i++) {
        gguf_str ks = gguf_kv_key(g, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(ks.len < 255 ? ks.len : 255), ks.ptr);
        if (strncmp(key, "tokenizer.", 10) != 0)
            continue;
        const gguf_value *v = gguf_kv_value(g, i);
        bool padded = strcmp(key, "tokenizer.ggml.tokens") == 0 ||
                      strcmp(key, "tokenizer.ggml.token_type") == 0 ||
                      strcmp(key, "tokenizer.ggml.scores") == 0;
        if (!padded || v->type != GGUF_TYPE_ARRAY) {
            gguf_writer_kv_value(w, ks.ptr, (size_t)ks.len, v);
            continue;
        }
        gguf_writer_kv_arr(w, key, v->arr.type, (uint64_t)n_vocab);
        for (int64_t t = 0; t < n_vocab; t++) {
            bool pad = (uint64_t)t >= v->arr.n;
            if (v->arr.type == GGUF_TYPE_STRING) {
                char pb[32];
                int len = snprintf(pb, sizeof pb, "[PAD%lld]", (long long)t);
                if (pad)
                    gguf_writer_arr_str(w, pb, (size_t)len);
                else
                    gguf_writer_arr_str(w, v->arr.items[t].s.ptr, (size_t)v->arr.items[t].s.len);
            } else if (v->arr.type == GGUF_TYPE_INT32) {
                gguf_writer_arr_i32(w, pad ? 5 /* UNUSED */ : (int32_t)v->arr.items[t].i);
            } else {
                gguf_writer_arr_f32(w, pad ? -10000.0f : (float)v->arr.items[t].f);
            }
        }
    }
    gguf_close(g);
    return rc;
}

/* llama3 rope scaling as llama.cpp applies it: freq_factors, the base
 * inverse frequencies over the scaled ones. */
static int rope_factors(const plume_model_config *c, float *out, plume_error *err)
{
    int half = c->head_dim / 2;
    float *base = malloc(sizeof(float) * (size_t)half), *scaled = malloc(sizeof(float) * (size_t)half);
    if (!base || !scaled) {
        free(base);
        free(scaled);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    plume_rope_cfg none = {.type = PLUME_ROPE_SCALING_NONE, .theta = c->rope.theta};
    float mult;
    plume_rope_inv_freq(&none, c->head_dim, c->n_ctx_train, base, &mult);
    plume_rope_inv_freq(&c->rope, c->head_dim, c->n_ctx_train, scaled, &mult);
    for (int i = 0; i < half; i++)
        out[i] = base[i] / scaled[i];
    free(base);
    free(scaled);
    return 0;
}

int plume_dummy_to_gguf(const char *dir, const plume_settings *s, const char *out_path,
                        plume_dummy_gguf_report *rep, plume_error *err)
{
    memset(rep, 0, sizeof *rep);
    double t0 = now_s();
    plume_dummy *d = NULL;
    gguf_writer *w = NULL;
    uint8_t *buf = NULL;
    float *factors = NULL;
    bool opened = false;
    int rc = -1;
    if (plume_dummy_open(dir, s, &d, err))
        goto done;
    const plume_model_config *c = plume_dummy_config(d);
    for (int l = 0; l < c->n_layer && c->n_expert > 0; l++)
        if (!plume_config_layer_moe(c, l)) {
            /* llama.cpp's MoE graphs have no dense layers (its converter
             * stops at them too) */
            plume_err(err, PLUME_ERR_UNSUPPORTED,
                      "%s/config.json: layer %d is a dense MLP layer of a mixture-of-experts "
                      "model (mlp_only_layers / decoder_sparse_step), which GGUF files cannot "
                      "hold; use load_format: dummy on the config, or drop those keys",
                      dir, l);
            goto done;
        }
    const bool permute = c->arch == PLUME_ARCH_LLAMA;
    const bool llama3 = c->rope.type == PLUME_ROPE_SCALING_LLAMA3;
    if (!(w = gguf_writer_new()) || !(buf = malloc(CHUNK_BYTES))) {
        plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (write_hparams(w, c, dir, plume_dummy_file_type(d), err) ||
        write_tokenizer(w, plume_dummy_tokenizer_path(d), c->n_vocab, err))
        goto done;
    if (llama3) {
        const int64_t ne[1] = {c->head_dim / 2};
        if (!(factors = malloc(sizeof(float) * (size_t)ne[0]))) {
            plume_err(err, PLUME_ERR_NOMEM, "out of memory");
            goto done;
        }
        if (rope_factors(c, factors, err) ||
            gguf_writer_add_tensor(w, "rope_freqs.weight", 1, ne, PLUME_DTYPE_F32, err))
            goto done;
    }
    for (size_t i = 0; i < plume_dummy_n(d); i++) {
        const plume_dummy_tensor *e = plume_dummy_at(d, i);
        if (e->group < 0) /* a later expert of a 3-D tensor declared with its first */
            continue;
        const int64_t ne[3] = {e->t.ne[0], e->t.ne[1], e->group};
        if (gguf_writer_add_tensor(w, e->gguf, e->group > 0 ? 3 : e->t.n_dims,
                                   e->group > 0 ? ne : e->t.ne, e->t.type, err))
            goto done;
        rep->n_tensors++;
    }
    if (gguf_writer_open(w, out_path, err))
        goto done;
    opened = true;
    if (llama3 && gguf_writer_tensor_data(w, factors, sizeof(float) * (size_t)(c->head_dim / 2),
                                          err))
        goto done;
    for (size_t i = 0; i < plume_dummy_n(d); i++) {
        const plume_dummy_tensor *e = plume_dummy_at(d, i);
        const int64_t ne0 = e->t.ne[0], rows = e->t.ne[1];
        const size_t rb = plume_dtype_row_bytes(e->t.type, ne0);
        if (!e->random) { /* a constant f32 vector: one row */
            float *f = (float *)buf;
            for (int64_t k = 0; k < ne0; k++)
                f[k] = e->value;
            if (gguf_writer_tensor_data(w, buf, rb, err))
                goto done;
            continue;
        }
        const int32_t perm = permute && e->qk ? c->head_dim : 0;
        int64_t per = (int64_t)(CHUNK_BYTES / rb);
        if (per < 1) {
            plume_err(err, PLUME_ERR_RANGE, "dummy GGUF: a row of %s is over %zu MiB", e->gguf,
                      CHUNK_BYTES >> 20);
            goto done;
        }
        for (int64_t r0 = 0; r0 < rows; r0 += per) {
            int64_t n = rows - r0 < per ? rows - r0 : per;
            for (int64_t r = 0; r < n; r++)
                plume_fill_row(&e->spec, hf_row(r0 + r, perm), buf + (size_t)r * rb);
            if (gguf_writer_tensor_part(w, buf, (size_t)n * rb, err))
                goto done;
        }
    }
    if (gguf_writer_close(w, &rep->bytes_written, err))
        goto done;
    rep->n_tensors += llama3 ? 1 : 0;
    rep->seconds = now_s() - t0;
    rc = 0;
done:
    gguf_writer_free(w);
    if (rc && opened)
        unlink(out_path);
    free(buf);
    free(factors);
    plume_dummy_close(d);
    return rc;
}
