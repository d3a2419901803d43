/* The core's own providers, used through the registry the way the engine
 * and plugins see them: the gguf format, the native linear method on the
 * cpu backend (against a reference matmul), the standard sampler. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plume/registry.h"

#include "../cpu/matmul_tolerance.h"
#include "../support/engine_fixture.h"

static const char *model_path;

static void test_gguf_format(void **state)
{
    (void)state;
    plume_registry *r;
    plume_error err = {0};
    assert_int_equal(plume_registry_create(&r, &err), 0);
    const plume_weight_format_vtable *f = plume_registry_probe_format(r, model_path, &err);
    assert_non_null(f);
    assert_string_equal(f->name, "gguf");
    assert_int_equal(plume_registry_find_weight_format(r, "safetensors")->probe(model_path), 0);
    plume_checkpoint *ck;
    assert_int_equal(f->open(model_path, NULL, &ck, &err), 0);
    assert_true(f->n_tensors(ck) > 0);
    char buf[64];
    assert_int_equal(f->metadata(ck, "general.architecture", buf, sizeof buf), 5);
    assert_string_equal(buf, "llama");
    assert_int_equal(f->metadata(ck, "no.such.key", buf, sizeof buf), -1);
    const plume_tensor *t0 = f->tensor(ck, 0);
    assert_ptr_equal(f->find(ck, t0->name), t0);
    f->close(ck);
    assert_null(plume_registry_probe_format(r, "/nonexistent.bin", &err));
    assert_non_null(strstr(err.msg, "no weight format recognises /nonexistent.bin (registered "
                                    "formats: gguf, safetensors, dummy)"));
    plume_registry_free(r);
}

static void test_native_linear_on_cpu(void **state)
{
    (void)state;
    plume_registry *r;
    plume_error err = {0};
    assert_int_equal(plume_registry_create(&r, &err), 0);
    const plume_weight_format_vtable *f = plume_registry_find_weight_format(r, "gguf");
    const plume_linear_vtable *lin = plume_registry_find_linear(r, "native");
    const plume_backend_vtable *cpu = plume_registry_find_backend(r, "cpu");
    plume_checkpoint *ck;
    assert_int_equal(f->open(model_path, NULL, &ck, &err), 0);
    plume_weights w = {f, ck};
    assert_int_equal(lin->probe(&w, "blk.0.attn_q"), 1);
    assert_int_equal(lin->probe(&w, "blk.0.no_such_layer"), 0);
    plume_backend *be;
    assert_int_equal(cpu->create(NULL, 2, &be, &err), 0);
    plume_linear *l;
    assert_int_equal(lin->load(&w, "blk.0.attn_q", NULL, cpu, be, &l, &err), 0);
    int64_t in, out;
    lin->shape(l, &in, &out);
    const plume_tensor *t = f->find(ck, "blk.0.attn_q.weight");
    assert_int_equal(in, t->ne[0]);
    assert_int_equal(out, t->ne[1]);
    const int n_tok = 3;
    /* through backend buffers, as the forward pass hands them over */
    float *x = malloc(sizeof(float) * (size_t)(n_tok * in));
    float *y = malloc(sizeof(float) * (size_t)(n_tok * out));
    float *row = malloc(sizeof(float) * (size_t)in);
    plume_buf *bx = cpu->buf_alloc(be, sizeof(float) * (size_t)(n_tok * in), &err);
    plume_buf *by = cpu->buf_alloc(be, sizeof(float) * (size_t)(n_tok * out), &err);
    assert_true(x && y && row && bx && by);
    for (int64_t i = 0; i < n_tok * in; i++)
        x[i] = (float)sin(0.37 * (double)i);
    assert_int_equal(cpu->upload(be, bx, 0, x, sizeof(float) * (size_t)(n_tok * in), &err), 0);
    assert_int_equal(lin->forward(l, cpu, be, bx, n_tok, by, &err), 0);
    assert_int_equal(cpu->download(be, y, by, 0, sizeof(float) * (size_t)(n_tok * out), &err), 0);
    size_t rb = plume_dtype_row_bytes(t->type, in);
    for (int64_t n = 0; n < out; n++) {
        plume_dequantize((plume_dtype)t->type, (const char *)t->data + (size_t)n * rb, row, in);
        for (int k = 0; k < n_tok; k++) {
            const float *xk = x + k * in;
            double ref;
            const double tol = matmul_tolerance(xk, row, in, plume_dtype_block_elems(t->type) > 1,
                                                &ref);
            const double e = fabs(y[k * out + n] - ref);
            if (!(e <= tol))
                fail_msg("%s y[%d][%lld] = %.7g, exact %.7g: error %.3g > %.3g",
                         plume_dtype_name(t->type), k, (long long)n, y[k * out + n], ref, e, tol);
        }
    }
    free(row);
    free(x);
    free(y);
    cpu->buf_free(be, bx);
    cpu->buf_free(be, by);
    lin->destroy(l);
    cpu->destroy(be);
    f->close(ck);
    plume_registry_free(r);
}

static void test_standard_sampler_provider(void **state)
{
    (void)state;
    plume_registry *r;
    plume_error err = {0};
    assert_int_equal(plume_registry_create(&r, &err), 0);
    const plume_sampler_vtable *s = plume_registry_find_sampler(r, "standard");
    plume_settings *set;
    assert_int_equal(plume_settings_new("sampling", &set, &err), 0);
    assert_int_equal(plume_settings_set(set, "temperature", "0", &err), 0);
    assert_int_equal(s->validate(set, &err), 0);
    plume_sampler_state *st;
    assert_int_equal(s->create(set, 5, 1, &st, &err), 0);
    float logits[5] = {0.0f, 1.0f, 4.0f, 2.0f, -1.0f};
    assert_int_equal(s->sample(st, logits, NULL, 0), 2);
    float probs[5];
    assert_int_equal(s->probs(st, logits, NULL, 0, probs), 1);
    assert_true(probs[2] == 1.0f);
    s->destroy(st);
    assert_int_equal(plume_settings_set(set, "top_q", "0.5", &err), 0);
    assert_int_equal(s->validate(set, &err), -1);
    assert_string_equal(err.msg, "(settings): unknown key 'top_q' in sampling; accepted: "
                                 "temperature, top_k, top_p, min_p, repetition_penalty, "
                                 "repeat_last_n, presence_penalty, frequency_penalty");
    plume_settings_free(set);
    plume_registry_free(r);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_format),
        cmocka_unit_test(test_native_linear_on_cpu),
        cmocka_unit_test(test_standard_sampler_provider),
    };
    return test_main_on_model(argc, argv, "test_builtin_providers TINY.gguf", &model_path, tests,
                              sizeof tests / sizeof *tests, NULL, NULL);
}
