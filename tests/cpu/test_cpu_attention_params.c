/* The cpu backend's attention op with plume_attn_params: softmax scales
 * other than 1/sqrt(head_dim) and sliding windows, over f32, f16 and int8
 * caches written by kv_store, against a float64 reference over the values
 * the cache holds (read back through the pool's layout fields, which are
 * checked against the stored values: f16 rounding, int8 within half a
 * step); every row's result the same bits in a step of prefill runs of two
 * sequences as alone in a one-row step (split-K), at 1-3 threads; bad
 * parameters refused with an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "cpu_test_util.h"
#include "plume/backend.h"
#include "runtime/builtin.h"

enum { NKV = 2, HD = 64, BS = 16, NB = 48, NA = 300, NBQ = 151, NROW = NA + NBQ, MAXH = 8 };

/* The cache as the kernels see it (f16: rounded), for the reference. */
static float kref[NB * BS][NKV * HD], vref[NB * BS][NKV * HD];

static int32_t slot_of(const int32_t *table, int p) { return table[p / BS] * BS + p % BS; }

/* Row at position pos of the sequence with this table, query head qh of
 * kv head g: softmax(q·k·scale)·v over lo .. pos, in double. */
static void reference(const int32_t *table, int pos, int g, const float *qh, double scale,
                      int window, double *want)
{
    const int lo = window > 0 && pos + 1 > window ? pos + 1 - window : 0;
    tu_attn_ref(qh, &kref[0][g * HD], &vref[0][g * HD], NKV * HD, table, BS, lo, pos + 1, HD,
                scale, -INFINITY, want);
}

/* Reads layer 1 of the cache back through the pool's layout into kref /
 * vref, checking each value against what was stored (k, v rows at slots):
 * f32 exact, f16 the rounded value, int8 within half a step of its scale
 * (max |x| / 127 over the head). */
static void read_cache(const plume_backend_vtable *B, plume_backend *b, const plume_kv_pool *kv,
                       const float *k, const float *v, const int32_t *slots)
{
    plume_error err;
    uint8_t *kc = malloc(kv->layer_stride), *vc = malloc(kv->layer_stride);
    assert_int_equal(B->download(b, kc, kv->k, kv->layer_stride, kv->layer_stride, &err), 0);
    assert_int_equal(B->download(b, vc, kv->v, kv->layer_stride, kv->layer_stride, &err), 0);
    for (int r = 0; r < NROW; r++)
        for (int w = 0; w < 2; w++) {
            const uint8_t *c = w ? vc : kc;
            const float *src = (w ? v : k) + (size_t)r * NKV * HD;
            float(*ref)[NKV * HD] = w ? vref : kref;
            for (int h = 0; h < NKV; h++) {
                const uint8_t *head = c + (size_t)slots[r] * kv->slot_stride + h * kv->head_stride;
                float amax = 0, scale = 0;
                if (kv->dtype == PLUME_KV_INT8) {
                    memcpy(&scale, head + kv->scale_offset, 4);
                    for (int d = 0; d < HD; d++)
                        amax = fmaxf(amax, fabsf(src[h * HD + d]));
                    assert_true(fabsf(scale - amax / 127) <= 1e-6f * amax);
                }
                for (int d = 0; d < HD; d++) {
                    const float x = src[h * HD + d];
                    float got;
                    if (kv->dtype == PLUME_KV_F32) {
                        memcpy(&got, head + d * 4, 4);
                        assert_true(got == x);
                    } else if (kv->dtype == PLUME_KV_F16) {
                        uint16_t hv;
                        memcpy(&hv, head + d * 2, 2);
                        got = plume_fp16_to_fp32(hv);
                        assert_true(got == plume_fp16_to_fp32(plume_fp32_to_fp16(x)));
                    } else {
                        got = (float)(int8_t)head[d] * scale;
                        assert_true(fabsf(got - x) <= 0.5f * scale * 1.0001f);
                    }
                    ref[slots[r]][h * HD + d] = got;
                }
            }
        }
    free(kc);
    free(vc);
}

typedef struct rows {
    int32_t pos[NROW], slots[NROW], tokens[NROW];
    plume_step_seq seqs[2];
} rows;

static void test_params(void **state)
{
    (void)state;
    const plume_backend_vtable *B = &plume_builtin_cpu;
    int32_t ta[NB / 2], tb[NB / 2]; /* two sequences, interleaved shuffled blocks */
    for (int i = 0; i < NB / 2; i++) {
        ta[i] = (i * 7 + 3) % (NB / 2) * 2;
        tb[i] = (i * 11 + 5) % (NB / 2) * 2 + 1;
    }
    rows R;
    for (int r = 0; r < NROW; r++) {
        const int a = r < NA;
        R.pos[r] = a ? r : r - NA;
        R.slots[r] = slot_of(a ? ta : tb, R.pos[r]);
        R.tokens[r] = 0;
    }
    R.seqs[0] = (plume_step_seq){0, NA, 0, ta, (NA + BS - 1) / BS};
    R.seqs[1] = (plume_step_seq){NA, NBQ, 0, tb, (NBQ + BS - 1) / BS};
    const plume_step all = {NROW, R.tokens, R.pos, R.slots, R.seqs, 2, NULL, 0, NULL};
    float *k = malloc(sizeof(float) * NROW * NKV * HD), *v = malloc(sizeof(float) * NROW * NKV * HD);
    float *q = malloc(sizeof(float) * NROW * MAXH * HD), *o = malloc(sizeof(float) * NROW * MAXH * HD);
    float o1[MAXH * HD];
    tu_fill(k, (size_t)NROW * NKV * HD, -2, 2);
    tu_fill(v, (size_t)NROW * NKV * HD, -1, 1);
    tu_fill(q, (size_t)NROW * MAXH * HD, -2, 2);
    /* (n_head, scale, window) */
    const plume_attn_params ps[] = {{6, 0, 0, NULL},   {6, 0.3f, 0, NULL},   {6, 0, 64, NULL},
                                    {6, 0.05f, 1, NULL}, {6, 0.2f, 100, NULL}, {2, 0, 17, NULL},
                                    {8, 0, 70, NULL},  {2, 0.5f, 300, NULL}};
    static const char *const names[] = {"f32", "f16", "int8"};
    for (int dt = 0; dt < 3; dt++) {
        const char *f16 = names[dt];
        for (int nt = 1; nt <= 3; nt++) {
            plume_backend *b;
            plume_error err = {0};
            assert_int_equal(B->create(NULL, nt, &b, &err), 0);
            plume_kv_pool kv = {.n_layer = 2, .n_blocks = NB, .block_size = BS, .n_head_kv = NKV,
                                .head_dim = HD, .dtype = (plume_kv_dtype)dt};
            assert_int_equal(B->supports(b, PLUME_FEAT_KV_DTYPE, dt), 1);
            assert_int_equal(B->kv_alloc(b, &kv, &err), 0);
            plume_buf *kb = B->buf_alloc(b, sizeof(float) * NROW * NKV * HD, &err);
            plume_buf *vb = B->buf_alloc(b, sizeof(float) * NROW * NKV * HD, &err);
            plume_buf *qb = B->buf_alloc(b, sizeof(float) * NROW * MAXH * HD, &err);
            plume_buf *ob = B->buf_alloc(b, sizeof(float) * NROW * MAXH * HD, &err);
            assert_true(kb && vb && qb && ob);
            assert_int_equal(B->upload(b, kb, 0, k, sizeof(float) * NROW * NKV * HD, &err), 0);
            assert_int_equal(B->upload(b, vb, 0, v, sizeof(float) * NROW * NKV * HD, &err), 0);
            assert_int_equal(B->kv_store(b, &all, &kv, 1, kb, vb, &err), 0);
            read_cache(B, b, &kv, k, v, R.slots);
            for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
                const plume_attn_params *p = &ps[pi];
                const int nh = p->n_head, row = nh * HD, grp = nh / NKV;
                const double scale = p->scale > 0 ? p->scale : 1.0 / sqrt(HD);
                assert_int_equal(B->upload(b, qb, 0, q, sizeof(float) * NROW * row, &err), 0);
                assert_int_equal(B->attention(b, &all, &kv, 1, qb, p, ob, &err), 0);
                assert_int_equal(B->download(b, o, ob, 0, sizeof(float) * NROW * row, &err), 0);
                for (int r = 0; r < NROW; r += (r % 37 == 36 ? 1 : 7)) {
                    const int a = r < NA;
                    /* the row alone, as a decode step */
                    plume_step_seq s1 = {0, 1, R.pos[r], a ? ta : tb, R.pos[r] / BS + 1};
                    const plume_step one = {1, R.tokens, &R.pos[r], &R.slots[r], &s1, 1,
                                            NULL, 0, NULL};
                    assert_int_equal(B->upload(b, qb, 0, q + (size_t)r * row,
                                               sizeof(float) * row, &err), 0);
                    assert_int_equal(B->attention(b, &one, &kv, 1, qb, p, ob, &err), 0);
                    assert_int_equal(B->download(b, o1, ob, 0, sizeof(float) * row, &err), 0);
                    assert_memory_equal(o1, o + (size_t)r * row, sizeof(float) * row);
                    for (int h = 0; h < nh; h++) {
                        double want[HD];
                        reference(a ? ta : tb, R.pos[r], h / grp, q + (size_t)r * row + h * HD,
                                  scale, p->window, want);
                        for (int d = 0; d < HD; d++) {
                            const float got = o[(size_t)r * row + h * HD + d];
                            if (!(fabs(got - want[d]) <= 3e-5))
                                fail_msg("attention %s threads %d n_head %d scale %g window %d "
                                         "row %d head %d dim %d: got %.9g want %.9g",
                                         f16, nt, nh, (double)p->scale,
                                         p->window, r, h, d, got, want[d]);
                        }
                    }
                }
            }
            /* parameters no caller should pass are refused, naming them */
            const plume_attn_params bad[] = {{5, 0, 0, NULL}, {0, 0, 0, NULL}, {6, -1, 0, NULL},
                                             {6, 0, -2, NULL}};
            for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                err = (plume_error){0};
                assert_int_equal(B->attention(b, &all, &kv, 1, qb, &bad[i], ob, &err), -1);
                assert_int_equal(err.code, PLUME_ERR_INVALID);
                assert_non_null(strstr(err.msg, "attention"));
            }
            B->buf_free(b, kb);
            B->buf_free(b, vb);
            B->buf_free(b, qb);
            B->buf_free(b, ob);
            B->kv_free(b, &kv);
            B->destroy(b);
        }
    }
    free(k); free(v); free(q); free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
