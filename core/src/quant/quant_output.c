/* Collecting and writing the tensors and files of a quantized checkpoint. */
#include "quant/quant_output.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plume/grow.h"
#include "plume/fp16.h"
#include "convert/convert_internal.h"
#include "convert/st_writer.h"

static int grow(quant_output *out, plume_error *err)
{
    quant_out_tensor *t = plume_grow(out->t, &out->cap, out->n + 1, 64, sizeof *t);
    if (!t)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory collecting tensors");
    out->t = t;
    return 0;
}

int quant_output_copy(quant_output *out, const plume_tensor *src, plume_error *err)
{
    if (src->type != PLUME_DTYPE_F32 && src->type != PLUME_DTYPE_F16 &&
        src->type != PLUME_DTYPE_BF16)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "tensor %s has type %s; the quantizer copies only float tensors "
                         "(F32, F16, BF16)",
                         src->name, plume_dtype_name(src->type));
    if (grow(out, err))
        return -1;
    quant_out_tensor *t = &out->t[out->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", src->name);
    t->src = src;
    return 0;
}

int quant_output_take(quant_output *out, const char *prefix, plume_quant_tensor *q,
                      plume_error *err)
{
    if (grow(out, err)) {
        free(q->data);
        q->data = NULL;
        return -1;
    }
    quant_out_tensor *t = &out->t[out->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s.%s", prefix, q->suffix);
    t->q = *q;
    q->data = NULL;
    return 0;
}

void quant_output_free(quant_output *out)
{
    for (size_t i = 0; i < out->n; i++)
        free(out->t[i].q.data);
    free(out->t);
    memset(out, 0, sizeof *out);
}

static int64_t n_elems(const quant_out_tensor *t)
{
    if (t->src)
        return plume_tensor_nelements(t->src);
    int64_t n = 1;
    for (int i = 0; i < t->q.n_dims; i++)
        n *= t->q.shape[i];
    return n;
}

/* Float values, as f32, into dst stored as F16 or F32. */
static void put_floats(const float *v, int64_t n, bool f16, void *dst)
{
    if (!f16) {
        memcpy(dst, v, sizeof(float) * (size_t)n);
        return;
    }
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = plume_fp32_to_fp16(v[i]);
}

typedef struct fill_ctx {
    const quant_out_tensor *t;
    bool f16;
} fill_ctx;

static int fill(void *user, void *dst, size_t nbytes, plume_error *err)
{
    const fill_ctx *c = user;
    const quant_out_tensor *t = c->t;
    int64_t n = n_elems(t);
    if (!t->src && strcmp(t->q.dtype, "I32") == 0) {
        memcpy(dst, t->q.data, nbytes);
        return 0;
    }
    const float *v = t->q.data;
    float *tmp = NULL;
    if (t->src) {
        tmp = malloc(sizeof(float) * (size_t)(n ? n : 1));
        if (!tmp)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory writing %s", t->name);
        plume_dequantize((plume_dtype)t->src->type, t->src->data, tmp, n);
        v = tmp;
    }
    put_floats(v, n, c->f16, dst);
    free(tmp);
    return 0;
}

int quant_output_write(quant_output *out, const char *out_dir, uint64_t *bytes,
                       plume_error *err)
{
    st_writer *w = st_writer_new();
    fill_ctx *ctx = calloc(out->n ? out->n : 1, sizeof *ctx);
    int rc = -1;
    if (!w || !ctx) {
        plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (st_writer_meta(w, "format", "pt", err))
        goto done;
    for (size_t i = 0; i < out->n; i++) {
        const quant_out_tensor *t = &out->t[i];
        int64_t shape[4];
        int nd;
        const char *dtype;
        bool f16 = out->float_f16;
        if (t->src) { /* PyTorch order: ggml ne reversed */
            nd = t->src->n_dims;
            for (int d = 0; d < nd; d++)
                shape[d] = t->src->ne[nd - 1 - d];
            dtype = f16 ? "F16" : "F32";
        } else {
            nd = t->q.n_dims;
            memcpy(shape, t->q.shape, sizeof shape);
            dtype = t->q.dtype;
            f16 = strcmp(dtype, "F16") == 0;
            if (strcmp(dtype, "I32") != 0 && strcmp(dtype, "F16") != 0 &&
                strcmp(dtype, "F32") != 0) {
                plume_err(err, PLUME_ERR_UNSUPPORTED,
                          "tensor %s: dtype %s is not one the writer stores (I32, F16, F32)",
                          t->name, dtype);
                goto done;
            }
        }
        ctx[i] = (fill_ctx){t, f16};
        if (st_writer_add(w, t->name, dtype, shape, nd, fill, &ctx[i], err))
            goto done;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
    if (st_writer_write(w, path, NULL, NULL, err))
        goto done;
    struct stat sb;
    *bytes = stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
    rc = 0;
done:
    st_writer_free(w);
    free(ctx);
    return rc;
}

/* Copies in_dir/name to out_dir/name when it exists. */
static int copy_file(const char *in_dir, const char *out_dir, const char *name, plume_error *err)
{
    char src[4096], dst[4096];
    snprintf(src, sizeof src, "%s/%s", in_dir, name);
    snprintf(dst, sizeof dst, "%s/%s", out_dir, name);
    FILE *in = fopen(src, "rb");
    if (!in)
        return 0;
    FILE *o = fopen(dst, "wb");
    if (!o) {
        fclose(in);
        return plume_err(err, PLUME_ERR_IO, "cannot write %s", dst);
    }
    char buf[65536];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, o) != n) {
            rc = plume_err(err, PLUME_ERR_IO, "write error on %s (disk full?)", dst);
            break;
        }
    fclose(in);
    if (fclose(o) && !rc)
        rc = plume_err(err, PLUME_ERR_IO, "write error on %s (disk full?)", dst);
    return rc;
}

int quant_output_configs(const char *in_dir, const char *out_dir, const char *qconfig,
                         bool float_f16, plume_error *err)
{
    char p[4096];
    json_error_t je;
    snprintf(p, sizeof p, "%s/config.json", in_dir);
    json_t *cfg = json_load_file(p, JSON_PRESERVE_ORDER, &je);
    if (!cfg)
        return plume_err(err, PLUME_ERR_FORMAT, "%s:%d: %s", p, je.line, je.text);
    json_t *qc = json_loads(qconfig, JSON_PRESERVE_ORDER, &je);
    if (!qc || !json_is_object(qc)) {
        json_decref(cfg);
        json_decref(qc);
        return plume_err(err, PLUME_ERR_INTERNAL,
                         "the quantization method wrote an invalid quantization_config: %s",
                         je.text);
    }
    json_object_set(cfg, "quantization_config", qc);
    if (float_f16)
        json_object_set_new(cfg, "torch_dtype", json_string("float16"));
    if (conv_dump_json(cfg, out_dir, "config.json", err)) {
        json_decref(qc);
        return -1;
    }
    if (conv_dump_json(qc, out_dir, "quantize_config.json", err))
        return -1;
    static const char *const copied[] = {"tokenizer.json", "tokenizer_config.json",
                                         "generation_config.json", "special_tokens_map.json"};
    for (size_t i = 0; i < sizeof copied / sizeof copied[0]; i++)
        if (copy_file(in_dir, out_dir, copied[i], err))
            return -1;
    return 0;
}
