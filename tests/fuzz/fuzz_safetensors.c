/* libFuzzer target for the safetensors reader (one file).  Any bytes give
 * either tensors or one error line naming the file.  On success the harness
 * re-reads the header with jansson and checks: one tensor per header entry
 * (except __metadata__), each tensor's bytes are exactly the file's bytes at
 * 8 + header size + data_offsets[0], its size is end - begin, and together
 * the tensors end where the file ends. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/safetensors.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("model.safetensors", data, size);
    safetensors *st = NULL;
    plume_error err = {0};
    if (safetensors_open(path, &st, &err)) {
        fuzz_check_error(&err, path);
        return 0;
    }
    FUZZ_CHECK(size >= 8, "opened a %zu-byte file", size);
    uint64_t n;
    memcpy(&n, data, 8);
    FUZZ_CHECK(n <= size - 8, "header size %llu past the file", (unsigned long long)n);
    json_error_t je;
    json_t *root = json_loadb((const char *)data + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    FUZZ_CHECK(json_is_object(root), "accepted a header that is not a JSON object");
    size_t expect = json_object_size(root) - (json_object_get(root, "__metadata__") ? 1 : 0);
    FUZZ_CHECK(safetensors_n_tensors(st) == expect, "%zu tensors for %zu header entries",
               safetensors_n_tensors(st), expect);
    const uint8_t *buf = data + 8 + n;
    uint64_t buf_size = size - 8 - n, covered = 0;
    for (size_t i = 0; i < safetensors_n_tensors(st); i++) {
        const plume_tensor *t = safetensors_tensor(st, i);
        FUZZ_CHECK(safetensors_find(st, t->name) == t, "tensor '%s' not found by name", t->name);
        json_t *offs = json_object_get(json_object_get(root, t->name), "data_offsets");
        json_t *jb = json_array_get(offs, 0), *je_ = json_array_get(offs, 1);
        FUZZ_CHECK(json_is_integer(jb) && json_is_integer(je_), "tensor '%s' offsets", t->name);
        uint64_t b = (uint64_t)json_integer_value(jb), e = (uint64_t)json_integer_value(je_);
        FUZZ_CHECK(b <= e && e <= buf_size, "tensor '%s' [%llu, %llu) outside the buffer",
                   t->name, (unsigned long long)b, (unsigned long long)e);
        FUZZ_CHECK(t->nbytes == e - b, "tensor '%s' nbytes %zu != %llu", t->name, t->nbytes,
                   (unsigned long long)(e - b));
        FUZZ_CHECK(t->nbytes == 0 || memcmp(t->data, buf + b, t->nbytes) == 0,
                   "tensor '%s' data are not the file's bytes", t->name);
        FUZZ_CHECK(safetensors_dtype(st, t) != NULL, "tensor '%s' without a dtype", t->name);
        covered += e - b;
    }
    FUZZ_CHECK(covered == buf_size, "tensors cover %llu of %llu buffer bytes",
               (unsigned long long)covered, (unsigned long long)buf_size);
    json_decref(root);
    safetensors_close(st);
    return 0;
}
