/* quant-awq on CUDA, without a GPU: AWQ layers converted by awq_cuda_desc
 * for quant-gptq's CUDA kernels, whose source runs here on the CPU through
 * quant-gptq's emulation harness (tests/gptq/cuda/test_gptq_cuda_emu.c,
 * included with its main renamed: its CUDA shims, launch geometry and
 * check_layer), against the AWQ layer on the CPU reference kernel and
 * W = (q − z)·s dequantized from the AWQ words (awq_dequantize). */
#define main gptq_cuda_emu_main
#include "../gptq/cuda/test_gptq_cuda_emu.c"
#undef main

#include "awq_cuda.h"
#include "awq_linear.h"
#include "awq_pack.h"
#include "awq_random_layer.h"

static void run_awq(int64_t K, int64_t N, int64_t gs, bool with_bias)
{
    char desc[160];
    snprintf(desc, sizeof desc, "awq K=%" PRId64 " N=%" PRId64 " group=%" PRId64 " bias=%d", K, N,
             gs, with_bias);
    const int64_t G = K / gs;
    int32_t *qw = malloc(sizeof *qw * (size_t)(K * N / 8)), *qz = malloc(sizeof *qz * (size_t)(G * N / 8));
    float *sc = malloc(sizeof *sc * (size_t)(G * N)), *bias = malloc(sizeof *bias * (size_t)N);
    float *Wd = malloc(sizeof *Wd * (size_t)(N * K));
    awq_random_layer(qw, qz, sc, bias, K, N, G);
    plume_error err = {0};
    gptq_layer *ref = NULL;
    awq_cuda_host h;
    if (awq_dequantize(qw, qz, sc, K, N, gs, Wd, &err) ||
        awq_layer_build(qw, qz, sc, with_bias ? bias : NULL, K, N, gs, NULL, &ref, &err) ||
        awq_cuda_desc(qw, qz, sc, with_bias ? bias : NULL, K, N, gs, &h, &err)) {
        printf("FAIL %s: %s\n", desc, err.msg);
        failures++;
    } else {
        check_layer(&h.desc, ref, Wd, desc);
        awq_cuda_host_free(&h);
    }
    gptq_layer_free(ref);
    free(qw);
    free(qz);
    free(sc);
    free(bias);
    free(Wd);
}

int main(void)
{
    rng_seed(77);
    run_awq(256, 136, 32, true);
    run_awq(384, 64, 64, false);
    run_awq(640, 144, 128, true);
    /* a shape the conversion refuses */
    awq_cuda_host h;
    plume_error err = {0};
    int32_t w[8] = {0};
    float s[8] = {0};
    if (awq_cuda_desc(w, w, s, NULL, 48, 8, 32, &h, &err) == 0 || !strstr(err.msg, "group_size")) {
        printf("FAIL awq_cuda_desc accepted K = 48 with groups of 32\n");
        failures++;
    }
    printf("3 AWQ layers emulated, %d failures\n", failures);
    return failures ? 1 : 0;
}
