/* Mixture-of-experts models on the cuda backend against the cpu backend:
 * test_cuda_moe MODEL... (directories or GGUF files; test_cuda_moe.py
 * makes tiny Mixtral, Qwen3-MoE, Qwen2-MoE, OLMoE and gpt-oss checkpoints
 * with transformers and passes them).  For each model:
 *   - an 80-token prompt's last logits within 0.1% of the cpu's logit
 *     range, and 8 greedy tokens equal (a step whose cpu top-2 margin lies
 *     inside the tolerance may diverge: said, and the comparison stops
 *     there).  Both backends hold the same weights (the cuda backend keeps
 *     each matrix's dtype) and compute with f32 activations (the cpu with
 *     PLUME_CPU_ACTIVATIONS=f32); what differs is the summation order, the
 *     device's expf and the f16 KV rounding of values that differ in their
 *     last bits.  The tolerance is chosen, not derived: a flipped expert
 *     choice moves logits by a few % of the range (measured on an H100),
 *     so it tells a routing difference from rounding;
 *   - on the GPU, the prompt's logits the same bits in one prefill (more
 *     rows than the grouped-expert limit: one matmul per expert), in
 *     chunks of 5 (the experts as matmul_segments jobs) and one token at a
 *     time.
 * Exits 77 (skipped) with the reason when no usable CUDA device exists.
 * PLUME_CUDA_TEST_STANDIN=cpu runs it with a cpu backend standing in for
 * the GPU: that proves the harness, nothing about the cuda backend. */
#include <math.h>
#include <string.h>

#include "../support/check.h"
#include "cuda_test_util.h"
#include "plume/model.h"
#include "runtime/builtin.h"

static int failures;
static plume_error err;

#define MUST(call) CT_MUST(call, err)

enum { NPOS = 80, NGREEDY = 8 };

static void test_model(const char *path, const plume_backend_vtable *gpu)
{
    plume_model *mc, *mg;
    plume_load_params lp = plume_load_defaults();
    MUST(plume_model_load_ex(path, &lp, &mc, &err));
    lp.backend_vt = gpu;
    MUST(plume_model_load_ex(path, &lp, &mg, &err));
    const int32_t V = plume_model_n_vocab(mc);
    int32_t ids[NPOS];
    uint32_t s = 12345;
    for (int i = 0; i < NPOS; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = (int32_t)((s >> 8) % (uint32_t)V);
    }
    float *lc = malloc(sizeof(float) * V), *lg = malloc(sizeof(float) * V);
    float *lk = malloc(sizeof(float) * V);
    plume_context *cc, *cg;
    MUST(plume_context_create(mc, NPOS + NGREEDY + 1, &cc, &err));
    MUST(plume_context_create(mg, NPOS + NGREEDY + 1, &cg, &err));
    MUST(plume_decode(cc, ids, NPOS, lc, &err));
    MUST(plume_decode(cg, ids, NPOS, lg, &err));
    double md, range;
    ct_logit_diff(lc, lg, V, &md, &range);
    const double tol = 1e-3 * range;
    printf("# %s: max |logit gpu - cpu| %.4g (%.3g%% of the range %.4g)\n", path, md,
           100 * md / range, range);
    CHECK(range > 0 && md <= tol, "%s: max |logit gpu - cpu| %.4g > %.4g", path, md, tol);
    const int g = ct_greedy(path, cc, cg, lc, lg, V, NGREEDY, tol, &err);
    MUST(g < 0);
    failures += g;
    /* the same bits whatever the chunking: one prefill, 5 at a time, 1 at a time */
    const int chunks[] = {NPOS, 5, 1};
    for (int ci = 0; ci < 3; ci++) {
        plume_context_reset(cg);
        for (int i = 0; i < NPOS; i += chunks[ci])
            MUST(plume_decode(cg, ids + i, NPOS - i < chunks[ci] ? NPOS - i : chunks[ci],
                              ci ? lk : lg, &err));
        if (ci)
            CHECK(memcmp(lg, lk, sizeof(float) * V) == 0,
                  "%s: logits differ between one prefill and chunks of %d on the GPU", path,
                  chunks[ci]);
    }
    plume_context_free(cc);
    plume_context_free(cg);
    free(lc), free(lg), free(lk);
    plume_model_free(mc);
    plume_model_free(mg);
}

int main(int argc, char **argv)
{
    /* before any cpu kernel runs: the dispatcher reads it once */
    setenv("PLUME_CPU_ACTIVATIONS", "f32", 1);
    plume_registry *reg;
    int harness;
    const plume_backend_vtable *gpu = ct_device_backend(&reg, &plume_builtin_cpu, &harness);
    if (argc < 2) {
        printf("usage: test_cuda_moe MODEL... (test_cuda_moe.py makes the models)\n");
        plume_registry_free(reg);
        return 2;
    }
    for (int i = 1; i < argc; i++)
        test_model(argv[i], gpu);
    plume_registry_free(reg);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf(harness ? "ok: the harness runs (no GPU was tested)\n"
                   : "ok: %d mixture-of-experts models on the cuda backend match the cpu backend\n",
           argc - 1);
    return 0;
}
