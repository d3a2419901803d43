/* The int4 linear layer (plugins/quant-gptq/int4_linear.c, shared by
 * quant-gptq and quant-awq) on a backend's device through backend.h's
 * device hooks, without a GPU: a fake backend whose "device" memory is
 * host memory (every buffer exactly as large as asked, so ASan sees an
 * overrun; uploads checked against the buffer's size; live buffers and
 * bytes counted) and whose device_gemm is the column-major GEMM cuBLAS
 * computes, with quant-gptq's CUDA kernels emulated on the CPU
 * (gptq_cuda_emu.h) as the kernel table.  Checked: the upload (buffers,
 * their sizes, the device layout gptq_cuda_prepare builds), the forward's
 * glue (device addresses of the backend's activation buffers, row strides,
 * GEMV chunks of 8 tokens, the split-K scratch from device_scratch, the
 * slab GEMM through device_gemm with ldy and column offsets, the bias),
 * every kernel enqueued on the backend's stream, results against the CPU
 * reference kernel, bit-equal rows alone and batched on a batch-invariant
 * instance, every buffer freed at destroy, the refusals (no hooks, a
 * version-3 backend, a non-CUDA api, a build without kernels, another
 * backend instance), and the host path giving the same bits as the CPU
 * kernels it wraps.  What it cannot check: the real launch geometry and
 * stream ordering on a GPU (scripts/gpu-check). */
#define GPTQ_CUDA_EMU 1
#include "gptq_cuda_emu.h"

#include "../../support/check.h"
#include "../gptq_test_rng.h"
#include "gptq_layer.h"
#include "gptq_pack.h"
#include "gptq_rtn.h"
#include "int4_linear.h"
#include "plume/backend.h"

static int failures = 0;

/* ---- the fake backend ---- */

typedef struct fbuf {
    size_t bytes;
    unsigned char *data; /* malloc'd exactly bytes */
} fbuf;

struct plume_backend {
    const char *api;
    int device;          /* selects the emulated SM count (emu_sms) */
    int batch_invariant;
    int stream_token;    /* &stream_token is the "stream" */
    int live;            /* buffers allocated and not freed */
    size_t live_bytes;
    void *scratch;
    size_t scratch_bytes;
    int gemm_calls, scratch_calls;
};

static plume_buf *f_alloc(plume_backend *b, size_t bytes, plume_error *err)
{
    fbuf *f = calloc(1, sizeof *f);
    if (!f || !(f->data = malloc(bytes))) {
        free(f);
        plume_err(err, PLUME_ERR_NOMEM, "fake: out of memory");
        return NULL;
    }
    f->bytes = bytes;
    b->live++;
    b->live_bytes += bytes;
    return (plume_buf *)f;
}

static void f_free(plume_backend *b, plume_buf *buf)
{
    fbuf *f = (fbuf *)buf;
    if (!f)
        return;
    b->live--;
    b->live_bytes -= f->bytes;
    free(f->data);
    free(f);
}

static int f_upload(plume_backend *b, plume_buf *dst, size_t off, const void *src, size_t bytes,
                    plume_error *err)
{
    (void)b;
    fbuf *f = (fbuf *)dst;
    if (off > f->bytes || bytes > f->bytes - off)
        return plume_err(err, PLUME_ERR_INVALID, "fake: upload of %zu bytes at %zu into %zu",
                         bytes, off, f->bytes);
    memcpy(f->data + off, src, bytes);
    return 0;
}

static int f_download(plume_backend *b, void *dst, const plume_buf *src, size_t off,
                      size_t bytes, plume_error *err)
{
    (void)b;
    const fbuf *f = (const fbuf *)src;
    if (off > f->bytes || bytes > f->bytes - off)
        return plume_err(err, PLUME_ERR_INVALID, "fake: download out of bounds");
    memcpy(dst, f->data + off, bytes);
    return 0;
}

static void *f_host_ptr(plume_backend *b, const plume_buf *buf)
{
    (void)b;
    return ((const fbuf *)buf)->data;
}

static int f_device_info(plume_backend *b, plume_device_info *out, plume_error *err)
{
    (void)err;
    *out = (plume_device_info){.api = b->api, .device = b->device, .stream = &b->stream_token,
                               .batch_invariant = b->batch_invariant};
    return 0;
}

static void *f_device_ptr(plume_backend *b, const plume_buf *buf)
{
    return f_host_ptr(b, buf);
}

static void *f_device_scratch(plume_backend *b, size_t bytes, plume_error *err)
{
    /* a fresh area of exactly bytes every time: an overrun or a stale
     * pointer kept past the call is an ASan error */
    free(b->scratch);
    b->scratch_calls++;
    if (!(b->scratch = malloc(bytes ? bytes : 1)))
        plume_err(err, PLUME_ERR_NOMEM, "fake: out of memory (scratch)");
    b->scratch_bytes = bytes;
    return b->scratch;
}

static int f_device_gemm(plume_backend *b, const plume_device_gemm *g, plume_error *err)
{
    if (g->ldy < g->n_out || g->precision == PLUME_GEMM_F16)
        return plume_err(err, PLUME_ERR_INVALID, "fake: unexpected device_gemm arguments");
    b->gemm_calls++;
    /* what cuda_backend.c's device_gemm passes to cublasGemmEx */
    colmajor_gemm(g->n_out, g->n_rows, g->k, g->w, 0, g->n_out, g->x, g->k, g->y, g->ldy);
    return 0;
}

static plume_backend_vtable fake_vt(bool hooks, bool host)
{
    plume_backend_vtable vt = {.struct_size = sizeof(plume_backend_vtable),
                               .interface_version = PLUME_BACKEND_INTERFACE_VERSION,
                               .name = "fake",
                               .buf_alloc = f_alloc,
                               .buf_free = f_free,
                               .upload = f_upload,
                               .download = f_download};
    if (host)
        vt.host_ptr = f_host_ptr;
    if (hooks) {
        vt.device_info = f_device_info;
        vt.device_ptr = f_device_ptr;
        vt.device_scratch = f_device_scratch;
        vt.device_gemm = f_device_gemm;
    }
    return vt;
}

/* ---- the emulated kernel table ---- */

static const int emu_sms[] = {1, 4, 132};
static const void *expected_stream;
static int wrong_stream, gemv_launches, dequant_launches;

static int k_probe(int device, char *why, size_t n)
{
    if (device < 0 || device >= 3) {
        snprintf(why, n, "emulated device %d does not exist", device);
        return -1;
    }
    return 0;
}

static int k_sm_count(int device, int *out, plume_error *err)
{
    (void)err;
    *out = emu_sms[device];
    return 0;
}

static int k_gemv(const gptq_cuda_dev *L, const float *x, int T, float *y, float *partial,
                  int ksplit, int tps, void *stream, plume_error *err)
{
    (void)err;
    wrong_stream += stream != expected_stream;
    gemv_launches++;
    if (T < 1 || T > GPTQ_CUDA_GEMV_MAXTOK || (ksplit > 1 && !partial))
        return plume_err(err, PLUME_ERR_INVALID, "emu: gemv T=%d ksplit=%d partial=%p", T, ksplit,
                         (void *)partial);
    return emu_gemv(L, x, T, y, partial, ksplit, tps);
}

static int k_dequant(const gptq_cuda_dev *L, int64_t n0, int64_t nb, void *w, int f16,
                     void *stream, plume_error *err)
{
    (void)err;
    wrong_stream += stream != expected_stream;
    dequant_launches++;
    emu_dequant(L, n0, nb, w, f16);
    return 0;
}

static int k_add_bias(float *y, const float *bias, int64_t T, int64_t N, void *stream,
                      plume_error *err)
{
    (void)err;
    wrong_stream += stream != expected_stream;
    emu_add_bias(y, bias, T, N);
    return 0;
}

static const gptq_dev_kernels emu_kernels = {k_probe, k_sm_count, k_gemv, k_dequant, k_add_bias};

/* ---- helpers ---- */

static plume_buf *put_rows(const plume_backend_vtable *vt, plume_backend *b, const float *x,
                           size_t n)
{
    plume_error err = {0};
    plume_buf *buf = vt->buf_alloc(b, n * sizeof(float), &err);
    if (buf && x && vt->upload(b, buf, 0, x, n * sizeof(float), &err))
        CHECK(0, "upload: %s", err.msg);
    return buf;
}

/* |y - yr| <= 2e-5 * Σ|x||w| + 1e-6 elementwise (f32 sums in another order) */
static void close_to(const char *what, const float *y, const float *yr, const float *x,
                     const float *Wd, int T, int64_t K, int64_t N, const float *bias)
{
    int bad = 0;
    for (int t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double S = bias ? fabs(bias[n]) : 0.0;
            for (int64_t k = 0; k < K; k++)
                S += fabs((double)x[t * K + k] * Wd[n * K + k]);
            const double d = fabs((double)y[t * N + n] - yr[t * N + n]);
            if (!(d <= 2e-5 * S + 1e-6) && bad++ < 3)
                printf("  %s: t=%d n=%" PRId64 ": %.9g vs reference %.9g\n", what, t, n,
                       (double)y[t * N + n], (double)yr[t * N + n]);
        }
    CHECK(!bad, "%s: %d values off the reference", what, bad);
}

/* ---- one layer ---- */

static void run(int bits, bool sym, gptq_zero_format fmt, bool act, int64_t gs, int64_t K,
                int64_t N, bool with_bias, int device)
{
    char desc[160];
    snprintf(desc, sizeof desc, "bits=%d sym=%d v%d act=%d group=%" PRId64 " %" PRId64 "x%" PRId64
             " bias=%d sms=%d", bits, sym, (int)fmt, act, gs, N, K, with_bias, emu_sms[device]);
    plume_error err = {0};
    float *W = malloc(sizeof *W * (size_t)(N * K)), *Wd = malloc(sizeof *Wd * (size_t)(N * K));
    float *bias = malloc(sizeof *bias * (size_t)N);
    int32_t *perm = malloc(sizeof *perm * (size_t)K);
    for (int64_t i = 0; i < N * K; i++)
        W[i] = 0.05f * rndf();
    rnd_fill(bias, N, 1.0f);
    shuffle(perm, K);
    gptq_qconfig qc = {.bits = bits, .group_size = gs, .sym = sym, .fmt = fmt};
    gptq_tensors t = {0};
    gptq_layer *ref = NULL;
    const float *bp = with_bias ? bias : NULL;
    gptq_load_config lc = {.bits = bits, .group_size = gs, .sym = sym, .desc_act = act, .fmt = fmt};
    if (gptq_rtn_quantize(W, N, K, &qc, act ? perm : NULL, &t, &err) ||
        gptq_layer_build(t.qweight, t.qzeros, t.scales, t.g_idx, bp, K, N, t.G, &lc, &ref, &err) ||
        gptq_dequantize(t.qweight, t.qzeros, t.scales, t.g_idx, K, N, t.G, gs, bits, fmt, Wd,
                        &err)) {
        CHECK(0, "%s: reference: %s", desc, err.msg);
        return;
    }
    const gptq_cuda_layer_desc d = {.qweight = t.qweight, .qzeros = t.qzeros, .scales = t.scales,
                                    .g_idx = t.g_idx, .bias = bp, .K = K, .N = N, .G = t.G,
                                    .bits = bits, .group_size = gs, .fmt = fmt};
    const int TMAX = 19;
    float *x = malloc(sizeof *x * (size_t)(TMAX * K));
    float *y = malloc(sizeof *y * (size_t)(TMAX * N)), *yr = malloc(sizeof *yr * (size_t)(TMAX * N));
    float *y1 = malloc(sizeof *y1 * (size_t)N);
    rnd_fill(x, TMAX * K, 1.0f);
    CHECK(!gptq_forward_ref(ref, x, TMAX, yr, &err), "%s: reference forward: %s", desc, err.msg);

    /* ---- device ---- */
    const plume_backend_vtable vt = fake_vt(true, false);
    plume_backend be = {.api = "cuda", .device = device, .batch_invariant = 1};
    expected_stream = &be.stream_token;
    plume_linear *l = NULL;
    if (int4_linear_load("gptq", "blk.0.test", &d, &lc, &emu_kernels, &vt, &be, &l, &err)) {
        CHECK(0, "%s: device load: %s", desc, err.msg);
        goto host;
    }
    size_t dev_bytes = 0;
    CHECK(int4_linear_on_device(l, &dev_bytes), "%s: not on the device", desc);
    const size_t want = (size_t)(gptq_packed_len(K, bits) * N) * 4 + (size_t)(t.G * N) * 6 +
                        (size_t)K * 4 + (size_t)t.G * 4 + (act ? (size_t)K * 4 : 0) +
                        (with_bias ? (size_t)N * 4 : 0);
    CHECK(dev_bytes == want && be.live_bytes == want, "%s: %zu device bytes (%zu live), want %zu",
          desc, dev_bytes, be.live_bytes, want);
    CHECK(be.live == 5 + act + with_bias, "%s: %d buffers live after load", desc, be.live);
    int64_t in = 0, out = 0;
    int4_linear_shape(l, &in, &out);
    CHECK(in == K && out == N, "%s: shape %" PRId64 "x%" PRId64, desc, out, in);

    plume_buf *xb = put_rows(&vt, &be, x, (size_t)(TMAX * K));
    plume_buf *yb = put_rows(&vt, &be, NULL, (size_t)(TMAX * N));
    static const int toks[] = {1, 3, 8, 11, TMAX};
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) {
        const int T = toks[i];
        char what[200];
        snprintf(what, sizeof what, "%s, gemv, %d tokens", desc, T);
        gemv_launches = 0;
        CHECK(!int4_linear_forward(l, &vt, &be, xb, T, yb, &err), "%s: %s", what, err.msg);
        CHECK(gemv_launches == (T + 7) / 8, "%s: %d gemv launches", what, gemv_launches);
        f_download(&be, y, yb, 0, sizeof *y * (size_t)(T * N), &err);
        close_to(what, y, yr, x, Wd, T, K, N, bp);
    }
    /* batch invariance: the last row of the 19-token batch, run alone */
    {
        plume_buf *x1 = put_rows(&vt, &be, x + (TMAX - 1) * K, (size_t)K);
        plume_buf *yb1 = put_rows(&vt, &be, NULL, (size_t)N);
        CHECK(!int4_linear_forward(l, &vt, &be, x1, 1, yb1, &err), "%s: alone: %s", desc, err.msg);
        f_download(&be, y1, yb1, 0, sizeof *y1 * (size_t)N, &err);
        CHECK(!memcmp(y1, y + (TMAX - 1) * N, sizeof *y1 * (size_t)N),
              "%s: a row alone differs in bits from the same row in a batch of %d", desc, TMAX);
        f_free(&be, x1);
        f_free(&be, yb1);
    }
    /* another instance */
    plume_backend other = be;
    CHECK(int4_linear_forward(l, &vt, &other, xb, 1, yb, &err) == -1 &&
              err.code == PLUME_ERR_INVALID,
          "%s: a forward on another backend instance was not refused", desc);
    CHECK(wrong_stream == 0, "%s: %d launches off the backend's stream", desc, wrong_stream);
    int4_linear_destroy(l);
    CHECK(be.live == 2, "%s: %d buffers live after destroy (x and y expected)", desc, be.live);
    /* an instance that is not batch-invariant (cuda's matmul: cublas):
     * more than 8 rows go through device_gemm */
    be.batch_invariant = 0;
    if (int4_linear_load("gptq", "blk.0.test", &d, &lc, &emu_kernels, &vt, &be, &l, &err)) {
        CHECK(0, "%s: device load (not batch-invariant): %s", desc, err.msg);
    } else {
        /* one 128-column slab at a time: N > 128 takes two (a column
         * offset into y, ldy = N) */
        int4_linear_set_slab_limit(l, 1);
        be.gemm_calls = 0;
        dequant_launches = 0;
        CHECK(!int4_linear_forward(l, &vt, &be, xb, TMAX, yb, &err), "%s: gemm: %s", desc,
              err.msg);
        CHECK(be.gemm_calls == 2 && dequant_launches == 2, "%s: %d gemm calls, %d dequants",
              desc, be.gemm_calls, dequant_launches);
        f_download(&be, y, yb, 0, sizeof *y * (size_t)(TMAX * N), &err);
        char what[200];
        snprintf(what, sizeof what, "%s, slab gemm, %d tokens", desc, TMAX);
        close_to(what, y, yr, x, Wd, TMAX, K, N, bp);
        be.gemm_calls = 0;
        CHECK(!int4_linear_forward(l, &vt, &be, xb, 8, yb, &err) && be.gemm_calls == 0,
              "%s: 8 tokens must stay on the gemv", desc);
        int4_linear_destroy(l);
    }
    CHECK(be.live == 2, "%s: %d buffers live after the second destroy", desc, be.live);
    f_free(&be, xb);
    f_free(&be, yb);
    free(be.scratch);
    CHECK(be.live == 0 && be.live_bytes == 0, "%s: leaked buffers", desc);

host:
    /* ---- host: the same bits as the CPU kernels the layer wraps ---- */
    {
        const plume_backend_vtable hvt = fake_vt(false, true);
        plume_backend hb = {.api = "cuda"};
        plume_linear *hl = NULL;
        if (int4_linear_load("gptq", "blk.0.test", &d, &lc, NULL, &hvt, &hb, &hl, &err)) {
            CHECK(0, "%s: host load: %s", desc, err.msg);
        } else {
            CHECK(!int4_linear_on_device(hl, NULL) && hb.live == 0,
                  "%s: a host layer went to the device", desc);
            plume_buf *xb2 = put_rows(&hvt, &hb, x, (size_t)(TMAX * K));
            plume_buf *yb2 = put_rows(&hvt, &hb, NULL, (size_t)(TMAX * N));
            CHECK(!int4_linear_forward(hl, &hvt, &hb, xb2, TMAX, yb2, &err), "%s: host: %s", desc,
                  err.msg);
            CHECK(!gptq_forward_level(ref, GPTQ_LEVEL_ACTIVE, NULL, NULL, x, TMAX, y, &err),
                  "%s: cpu kernels: %s", desc, err.msg);
            CHECK(!memcmp(f_host_ptr(&hb, yb2), y, sizeof *y * (size_t)(TMAX * N)),
                  "%s: the host layer differs in bits from the CPU kernels", desc);
            f_free(&hb, xb2);
            f_free(&hb, yb2);
            int4_linear_destroy(hl);
        }
    }
    gptq_layer_free(ref);
    gptq_tensors_free(&t);
    free(W);
    free(Wd);
    free(bias);
    free(perm);
    free(x);
    free(y);
    free(yr);
    free(y1);
}

/* ---- refusals ---- */

static void refuse(const char *what, const plume_backend_vtable *vt, plume_backend *b,
                   const gptq_dev_kernels *k, const char *needle)
{
    int32_t qw[4 * 32] = {0}, qz[4] = {0};
    float sc[32] = {0};
    const gptq_cuda_layer_desc d = {.qweight = qw, .qzeros = qz, .scales = sc, .K = 32, .N = 32,
                                    .G = 1, .bits = 4, .group_size = -1, .fmt = GPTQ_ZERO_V1};
    const gptq_load_config lc = {.bits = 4, .group_size = -1, .sym = true, .fmt = GPTQ_ZERO_V1};
    plume_error err = {0};
    plume_linear *l = NULL;
    const int rc = int4_linear_load("gptq", "blk.1.q", &d, &lc, k, vt, b, &l, &err);
    CHECK(rc == -1 && !l && err.code == PLUME_ERR_UNSUPPORTED && strstr(err.msg, needle) &&
              strstr(err.msg, "blk.1.q"),
          "%s: rc %d, \"%s\" (want \"%s\")", what, rc, err.msg, needle);
    if (rc == -1)
        printf("ok   refused, %s: %s\n", what, err.msg);
    CHECK(b->live == 0, "%s: %d buffers left behind", what, b->live);
    int4_linear_destroy(l);
}

int main(void)
{
    rng_seed(0x5DEECE66Dull);
    run(4, true, GPTQ_ZERO_V1, true, 128, 1568, 136, true, 1);
    run(3, false, GPTQ_ZERO_V2, false, 32, 416, 160, false, 2);
    run(8, true, GPTQ_ZERO_V1, false, -1, 416, 136, true, 0);
    run(2, false, GPTQ_ZERO_V1, true, 32, 1568, 144, false, 0); /* split-K 2 */

    plume_backend b = {.api = "cuda", .batch_invariant = 1};
    plume_backend_vtable none = fake_vt(false, false);
    refuse("a backend with neither host_ptr nor device hooks", &none, &b, &emu_kernels,
           "device hooks");
    plume_backend_vtable v3 = fake_vt(true, false);
    v3.struct_size = (uint32_t)offsetof(plume_backend_vtable, device_info);
    refuse("a version-3 backend (hooks past its struct_size)", &v3, &b, &emu_kernels,
           "device hooks");
    plume_backend_vtable hooks = fake_vt(true, false);
    plume_backend ocl = {.api = "opencl"};
    refuse("a device backend of another api", &hooks, &ocl, &emu_kernels, "CUDA only");
    refuse("a build without the CUDA kernels", &hooks, &b, NULL, "built without CUDA");
    plume_backend missing = {.api = "cuda", .device = 7};
    refuse("a device the kernels cannot run on", &hooks, &missing, &emu_kernels,
           "does not exist");
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
