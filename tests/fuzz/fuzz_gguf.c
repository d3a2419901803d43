/* libFuzzer target for the GGUF reader and the two things that read its
 * metadata (model config, tokenizer).  Any bytes give either a file or one
 * error line naming the file.  On success: the counts equal the header's,
 * every tensor's bytes lie inside the file after the data section start at
 * the alignment, its byte size follows from its dims and type, every key
 * and tensor name finds itself, and a tokenizer built from the metadata only
 * produces ids inside its vocabulary. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/gguf.h"
#include "fuzz_util.h"
#include "model/config.h"
#include "model/model_internal.h"
#include "plume/tensor.h"
#include "plume/tokenizer.h"
#include "tokenizer/gguf_vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The tensor invariants of an opened file. */
static void check_tensors(const gguf_file *f, const uint8_t *data, size_t size)
{
    const uint8_t *base = gguf_map(f);
    size_t doff = gguf_data_offset(f);
    uint32_t align = gguf_alignment(f);
    FUZZ_CHECK(align && (align & (align - 1)) == 0, "alignment %u", align);
    FUZZ_CHECK(doff % align == 0 && doff <= size + align, "data offset %zu", doff);
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        const plume_tensor *t = gguf_tensor(f, i);
        const uint8_t *p = t->data;
        FUZZ_CHECK(p >= base + doff && (size_t)(p - base) <= size, "tensor %zu starts outside", i);
        size_t off = (size_t)(p - base);
        FUZZ_CHECK(t->nbytes <= size - off, "tensor %zu ends past the file", i);
        FUZZ_CHECK((off - doff) % align == 0, "tensor %zu is not aligned", i);
        FUZZ_CHECK(t->n_dims >= 0 && t->n_dims <= PLUME_MAX_DIMS, "n_dims %d", t->n_dims);
        size_t be = plume_dtype_block_elems(t->type), bb = plume_dtype_block_bytes(t->type);
        FUZZ_CHECK(be && bb, "tensor %zu has a type without a block size", i);
        unsigned __int128 bytes = (unsigned __int128)((uint64_t)t->ne[0] / be) * bb;
        for (int d = 1; d < PLUME_MAX_DIMS; d++)
            bytes *= (uint64_t)t->ne[d];
        FUZZ_CHECK(bytes == t->nbytes, "tensor %zu: nbytes %zu does not follow from its dims", i,
                   t->nbytes);
        FUZZ_CHECK(t->nbytes == 0 || memcmp(p, data + off, t->nbytes < 64 ? t->nbytes : 64) == 0,
                   "tensor %zu: the mapping differs from the file", i);
        /* a name with a NUL byte inside is found only by its full bytes */
        const plume_tensor *found = gguf_find_tensor(f, t->name);
        FUZZ_CHECK(!found || strcmp(found->name, t->name) == 0, "tensor %zu '%s' finds '%s'", i,
                   t->name, found->name);
    }
}

/* Keys without NUL bytes find their own value (keys are unique). */
static void check_keys(const gguf_file *f)
{
    char key[512];
    for (size_t i = 0; i < gguf_n_kv(f); i++) {
        gguf_str k = gguf_kv_key(f, i);
        if (k.len >= sizeof key || memchr(k.ptr, '\0', (size_t)k.len))
            continue;
        memcpy(key, k.ptr, (size_t)k.len);
        key[k.len] = '\0';
        FUZZ_CHECK(gguf_get(f, key) == gguf_kv_value(f, i), "key #%zu does not find itself", i);
    }
}

/* A tokenizer from the metadata: ids in range, decoding does not fail. */
static void check_tokenizer(const gguf_file *f)
{
    plume_tokenizer *tok = NULL;
    plume_error err = {0};
    if (plume_tokenizer_from_gguf(f, &tok, &err)) {
        fuzz_check_error(&err, NULL);
        return;
    }
    static const char text[] = "Hello, world! 123 <|im_start|> caf\xc3\xa9";
    int32_t *ids = NULL;
    size_t n = 0;
    int32_t nv = plume_tokenizer_n_vocab(tok);
    for (int special = 0; special < 2; special++) {
        if (plume_tokenize(tok, text, sizeof text - 1, special, special, &ids, &n, &err) == 0) {
            for (size_t i = 0; i < n; i++)
                FUZZ_CHECK(ids[i] >= 0 && ids[i] < nv, "id %d outside [0, %d)", ids[i], nv);
            char *out = NULL;
            if (plume_detokenize(tok, ids, n, true, &out, &err) == 0)
                free(out);
            free(ids);
            ids = NULL;
        } else {
            fuzz_check_error(&err, NULL);
        }
    }
    plume_tokenizer_free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("in.gguf", data, size);
    gguf_file *f = NULL;
    plume_error err = {0};
    if (gguf_open(path, &f, &err)) {
        fuzz_check_error(&err, path);
        return 0;
    }
    FUZZ_CHECK(size >= 24 && gguf_file_size(f) == size, "size");
    FUZZ_CHECK(gguf_n_tensors(f) == le64(data + 8), "tensor count differs from the header");
    FUZZ_CHECK(gguf_n_kv(f) == le64(data + 16), "kv count differs from the header");
    check_tensors(f, data, size);
    check_keys(f);
    plume_model_config cfg;
    if (plume_config_from_gguf(f, &cfg, &err) == 0) {
        if (plume_config_validate(&cfg, &err))
            fuzz_check_error(&err, NULL);
    } else {
        fuzz_check_error(&err, path);
    }
    check_tokenizer(f);
    gguf_close(f);
    return 0;
}
