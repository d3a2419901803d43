/* GGUF reader on a real file: models/SmolLM2-135M-Instruct.Q4_1.gguf under
 * $PLUME_SOURCE_ROOT.  Skipped when the file is absent.  The expected facts
 * were read with gguf-py's GGUFReader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "../smollm2_path.h"

#define DATA_SECTION 1785664 /* absolute offset of token_embd.weight (gguf-py data_offset) */

static int open_model(void **state)
{
    char path[4096];
    *state = NULL;
    if (!smollm2_path(path, sizeof path))
        return -1; /* main checked; the file went away since */
    gguf_file *f;
    plume_error err;
    if (gguf_open(path, &f, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    *state = f;
    return 0;
}

static int close_model(void **state)
{
    gguf_close(*state);
    return 0;
}

static gguf_file *model_or_skip(void **state)
{
    assert_non_null(*state);
    return *state;
}

static void test_header_and_metadata(void **state)
{
    gguf_file *f = model_or_skip(state);
    assert_int_equal(gguf_version(f), 3);
    assert_int_equal(gguf_alignment(f), 32);
    assert_int_equal(gguf_n_tensors(f), 272);
    assert_int_equal(gguf_n_kv(f), 33);
    uint32_t u;
    assert_true(gguf_get_u32(f, "llama.block_count", &u) && u == 30);
    assert_true(gguf_get_u32(f, "llama.embedding_length", &u) && u == 576);
    assert_true(gguf_get_u32(f, "llama.attention.head_count", &u) && u == 9);
    assert_true(gguf_get_u32(f, "llama.attention.head_count_kv", &u) && u == 3);
    assert_true(gguf_get_u32(f, "general.file_type", &u) && u == 3);
    float eps, base;
    assert_true(gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &eps) && eps == 1e-5f);
    assert_true(gguf_get_f32(f, "llama.rope.freq_base", &base) && base == 100000.0f);
    gguf_str s;
    assert_true(gguf_get_str(f, "general.architecture", &s));
    assert_true(s.len == 5 && memcmp(s.ptr, "llama", 5) == 0);
    assert_true(gguf_get_str(f, "tokenizer.ggml.model", &s));
    assert_true(s.len == 4 && memcmp(s.ptr, "gpt2", 4) == 0);
    bool b = true;
    assert_true(gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b) && !b);

    gguf_type et;
    uint64_t n;
    const gguf_value *items;
    assert_true(gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &n, &items));
    assert_int_equal(et, GGUF_TYPE_STRING);
    assert_int_equal(n, 49152);
    assert_true(gguf_get_arr(f, "tokenizer.ggml.token_type", &et, &n, &items));
    assert_true(et == GGUF_TYPE_INT32 && n == 49152);
    assert_true(gguf_get_arr(f, "tokenizer.ggml.merges", &et, &n, &items));
    assert_true(et == GGUF_TYPE_STRING && n == 48900);
}

static void test_tensors(void **state)
{
    gguf_file *f = model_or_skip(state);
    const plume_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    assert_non_null(t);
    assert_ptr_equal(t, gguf_tensor(f, 0));
    assert_int_equal(t->type, PLUME_DTYPE_Q8_0);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 576);
    assert_int_equal(t->ne[1], 49152);
    assert_int_equal(t->ne[2], 1);
    assert_int_equal(t->ne[3], 1);
    assert_int_equal(t->nbytes, 576 / 32 * 34 * 49152);

    /* the view points at the bytes gguf-py places at DATA_SECTION */
    FILE *fp = fopen(gguf_path(f), "rb");
    assert_non_null(fp);
    uint8_t head[64];
    assert_int_equal(fseek(fp, DATA_SECTION, SEEK_SET), 0);
    assert_int_equal(fread(head, 1, sizeof head, fp), sizeof head);
    fclose(fp);
    assert_memory_equal(t->data, head, sizeof head);

    t = gguf_find_tensor(f, "blk.0.ffn_down.weight");
    assert_non_null(t);
    assert_int_equal(t->type, PLUME_DTYPE_Q4_1);
    assert_true(t->ne[0] == 1536 && t->ne[1] == 576);
    assert_int_equal(t->nbytes, 1536 / 32 * 20 * 576);
    t = gguf_find_tensor(f, "blk.29.attn_norm.weight");
    assert_non_null(t);
    assert_int_equal(t->type, PLUME_DTYPE_F32);
    assert_int_equal(t->n_dims, 1);
    assert_int_equal(t->ne[0], 576);
    assert_null(gguf_find_tensor(f, "blk.30.attn_norm.weight"));

    /* every tensor: supported type, whole within the file, findable by name */
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        const plume_tensor *ti = gguf_tensor(f, i);
        assert_true(plume_dtype_supported(ti->type));
        assert_ptr_equal(gguf_find_tensor(f, ti->name), ti);
        assert_int_equal(ti->nbytes, plume_dtype_row_bytes(ti->type, ti->ne[0]) * ti->ne[1] *
                                         ti->ne[2] * ti->ne[3]);
    }

    /* norm weights are finite and mostly positive; a dequantized Q4_1 row is finite */
    t = gguf_find_tensor(f, "output_norm.weight");
    assert_non_null(t);
    float row[1536];
    plume_dequantize(PLUME_DTYPE_F32, t->data, row, 576);
    for (int i = 0; i < 576; i++)
        assert_true(isfinite(row[i]));
    t = gguf_find_tensor(f, "blk.0.ffn_down.weight");
    plume_dequantize(PLUME_DTYPE_Q4_1, t->data, row, 1536);
    double sum = 0;
    for (int i = 0; i < 1536; i++) {
        assert_true(isfinite(row[i]) && fabsf(row[i]) < 100.0f);
        sum += fabs(row[i]);
    }
    assert_true(sum > 0);
}

int main(void)
{
    char path[4096];
    if (!smollm2_path(path, sizeof path))
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_and_metadata),
        cmocka_unit_test(test_tensors),
    };
    return cmocka_run_group_tests_name("gguf_model", tests, open_model, close_model);
}
