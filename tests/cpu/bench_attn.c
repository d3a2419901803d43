/* One thread's paged attention in thread CPU time (so that a loaded
 * machine's preemption does not count), SmolLM2-135M's shape: 9 query heads
 * over 3 kv heads of 64, 30 layers' caches (each its own memory, blocks of
 * 16 slots in order), best of reps runs.  Modes:
 *   decode  one row at depth D, each kv head's whole depth in turn (the
 *           unsplit path);
 *   split   one row at depth D as split-K partials taken chunk by chunk
 *           (paged_attention.c's order; merges not included);
 *   prefill the last 16-row tile at depth D;
 *   stream  the plain read of the same caches (kernels' read_sum), the
 *           memory bound of decode.
 * Usage: bench_attn [scalar|avx2|avx512] [depth] [f32|f16|int8] [mode] [reps]
 * [sep|nosep] [LAYERS,NKV,GROUP,HD] (defaults: best level, 6144, f16, decode,
 * 7, nosep, 30,3,3,64; OLMoE-1B-7B is 16,16,1,128).  With "sep", split
 * mode reads each kv head's rows from a buffer of its own (a copy), not
 * interleaved with the other heads' as in the pool: what a pool layout
 * with each head's rows contiguous would give.  Prints ms and ns per
 * (query, key) pair.  Not a test: it asserts nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/dispatch.h"
#include "plume/fp16.h"

enum { BS = 16, MAX_LAYERS = 64, MAX_NKV = 64, MAX_GROUP = 16, MAX_HD = 256 };

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    const plume_kernels *k = plume_kernels_active();
    if (argc > 1) {
        int found = 0;
        for (int l = 0; l < PLUME_CPU_LEVEL_COUNT; l++)
            if (!strcmp(argv[1], plume_cpu_level_name((plume_cpu_level)l))) {
                k = plume_kernels_for((plume_cpu_level)l);
                found = 1;
            }
        if (!found || !k) {
            fprintf(stderr, "bench_attn: level '%s' is %s; use scalar, avx2 or avx512\n", argv[1],
                    found ? "not supported by this CPU" : "unknown");
            return 1;
        }
    }
    const int D = argc > 2 ? atoi(argv[2]) : 6144;
    const char *ts = argc > 3 ? argv[3] : "f16";
    const int kvt = !strcmp(ts, "f32") ? PLUME_KV_TYPE_F32 : !strcmp(ts, "int8") ? PLUME_KV_TYPE_I8 : PLUME_KV_TYPE_F16;
    const char *mode = argc > 4 ? argv[4] : "decode";
    if (strcmp(mode, "decode") && strcmp(mode, "split") && strcmp(mode, "prefill") && strcmp(mode, "stream")) {
        fprintf(stderr, "bench_attn: unknown mode '%s'; use decode, split, prefill or stream\n", mode);
        return 1;
    }
    const int reps = argc > 5 ? atoi(argv[5]) : 7;
    if (D < 16 || reps < 1) {
        fprintf(stderr, "bench_attn: depth must be >= 16 and reps >= 1\n");
        return 1;
    }
    int n_layers = 30, n_kv = 3, group = 3, hd = 64;
    if (argc > 7 && (sscanf(argv[7], "%d,%d,%d,%d", &n_layers, &n_kv, &group, &hd) != 4 ||
                     n_layers < 1 || n_layers > MAX_LAYERS || n_kv < 1 || n_kv > MAX_NKV ||
                     group < 1 || group > MAX_GROUP || hd < 16 || hd > MAX_HD || hd % 16)) {
        fprintf(stderr, "bench_attn: shape '%s' is not LAYERS,NKV,GROUP,HD (at most %d,%d,%d,%d; "
                        "HD a multiple of 16)\n", argv[7], MAX_LAYERS, MAX_NKV, MAX_GROUP, MAX_HD);
        return 1;
    }
    const size_t esz = kvt == PLUME_KV_TYPE_F32 ? 4 : kvt == PLUME_KV_TYPE_F16 ? 2 : 1;
    const int64_t head = kvt == PLUME_KV_TYPE_I8 ? (int64_t)PLUME_KV_I8_SCALE_AT(hd) + 4 : hd;
    const int sep = argc > 6 && !strcmp(argv[6], "sep");
    const int64_t stride = sep ? head : n_kv * head;
    const int nb = D / BS + 2;
    const size_t bytes = ((size_t)nb * BS * (size_t)(n_kv * head) * esz + 255) / 256 * 256;
    static char *K[MAX_LAYERS], *V[MAX_LAYERS], *KS[MAX_LAYERS][MAX_NKV], *VS[MAX_LAYERS][MAX_NKV];
    srand(1);
    for (int l = 0; l < n_layers; l++) {
        K[l] = aligned_alloc(64, bytes);
        V[l] = aligned_alloc(64, bytes);
        if (!K[l] || !V[l]) {
            fprintf(stderr, "bench_attn: out of memory\n");
            return 1;
        }
        for (size_t s = 0; s < (size_t)nb * BS * n_kv; s++) /* each (slot, kv head) */
            for (int d = 0; d < hd; d++) {
                const float x = (float)(rand() % 200) / 100.0f - 1.0f, y = (float)(rand() % 200) / 100.0f - 1.0f;
                char *kr = K[l] + s * (size_t)head * esz, *vr = V[l] + s * (size_t)head * esz;
                if (kvt == PLUME_KV_TYPE_F32) {
                    ((float *)kr)[d] = x;
                    ((float *)vr)[d] = y;
                } else if (kvt == PLUME_KV_TYPE_F16) {
                    ((uint16_t *)kr)[d] = plume_fp32_to_fp16(x);
                    ((uint16_t *)vr)[d] = plume_fp32_to_fp16(y);
                } else {
                    kr[d] = (char)(int)(x * 127);
                    vr[d] = (char)(int)(y * 127);
                    const float sc = 1.0f / 127;
                    memcpy(kr + PLUME_KV_I8_SCALE_AT(hd), &sc, 4);
                    memcpy(vr + PLUME_KV_I8_SCALE_AT(hd), &sc, 4);
                }
            }
    }
    if (sep) /* the copies' contents do not matter: only their layout */
        for (int l = 0; l < n_layers; l++)
            for (int h = 0; h < n_kv; h++) {
                KS[l][h] = aligned_alloc(64, bytes);
                VS[l][h] = aligned_alloc(64, bytes);
                if (!KS[l][h] || !VS[l][h]) {
                    fprintf(stderr, "bench_attn: out of memory\n");
                    return 1;
                }
                memcpy(KS[l][h], K[l], bytes);
                memcpy(VS[l][h], V[l], bytes);
            }
    int32_t *table = malloc(sizeof(int32_t) * (size_t)nb);
    for (int b = 0; b < nb; b++)
        table[b] = b;
    const int nr = !strcmp(mode, "prefill") ? 16 : 1, qs = n_kv * group * hd;
    float *q = malloc(sizeof(float) * (size_t)nr * qs), *o = malloc(sizeof(float) * (size_t)nr * qs);
    static float pm[MAX_GROUP], pl[MAX_GROUP], po[MAX_GROUP * MAX_HD];
    for (int i = 0; i < nr * qs; i++)
        q[i] = (float)(rand() % 100) / 100.0f - 0.5f;
    double best = 1e30;
    float sink = 0;
    for (int r = 0; r < reps; r++) {
        const double t0 = cpu_seconds();
        for (int l = 0; l < n_layers; l++) {
            if (!strcmp(mode, "stream")) {
                sink += k->read_sum(K[l], bytes) + k->read_sum(V[l], bytes);
                continue;
            }
            if (!strcmp(mode, "split")) {
                for (int c = 0; c * PLUME_ATTN_CHUNK < D; c++)
                    for (int h = 0; h < n_kv; h++)
                        k->attn_partial(q + h * group * hd, qs, 1, group,
                                        sep ? KS[l][h] : K[l] + (size_t)h * head * esz,
                                        sep ? VS[l][h] : V[l] + (size_t)h * head * esz, stride,
                                        kvt, table, BS, D, hd,
                                        0.125f, 0, c * PLUME_ATTN_CHUNK, pm, pl, po);
                sink += po[0];
                continue;
            }
            for (int h = 0; h < n_kv; h++)
                k->attn_paged_tile(q + h * group * hd, qs, nr, group, K[l] + (size_t)h * head * esz,
                                   V[l] + (size_t)h * head * esz, stride, kvt, table, BS, D - nr + 1,
                                   hd, 0.125f, 0, o + h * group * hd, qs);
            sink += o[0];
        }
        const double t = cpu_seconds() - t0;
        best = t < best ? t : best;
    }
    const double pairs = (double)n_layers * n_kv * group * D * nr;
    printf("%s %s depth %d %s%s, %d layers x %d kv heads x %d queries x %d: %.2f ms",
           plume_cpu_level_name(k->level), ts, D, mode, sep ? " sep" : "", n_layers, n_kv, group, hd,
           best * 1e3);
    if (strcmp(mode, "stream"))
        printf(", %.2f ns per (query, key)", best * 1e9 / pairs);
    printf(" (checksum %g)\n", (double)sink);
    for (int l = 0; l < n_layers; l++) {
        free(K[l]);
        free(V[l]);
        for (int h = 0; sep && h < n_kv; h++) {
            free(KS[l][h]);
            free(VS[l][h]);
        }
    }
    free(table);
    free(q);
    free(o);
    return 0;
}
