/* libFuzzer target for the tokenizer.json loader.  Any bytes give either a
 * tokenizer or one error line naming the file.  A tokenizer that loads
 * encodes a fixed text (special parsing off and on) into ids inside its
 * vocabulary, and decodes them again without failing. */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "plume/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Issue #20 known findings 1 (an id near 2^31 allocates per-id arrays of that
 * length) and 4 (an empty merge ["", ""] passes NULL to memcpy) are fixed on
 * another branch; until that merges, PLUME_FUZZ_SKIP_KNOWN (set by the meson
 * test and scripts/fuzz) skips exactly the inputs with a vocab or
 * added_tokens id above 2^22 or a merge of two empty strings.  Inputs:
 * tests/fuzz/known/tokenizer_json/. */
static bool known_finding(const uint8_t *data, size_t size)
{
    static int skip = -1;
    if (skip < 0)
        skip = getenv("PLUME_FUZZ_SKIP_KNOWN") != NULL;
    if (!skip)
        return false;
    json_error_t je;
    json_t *root = json_loadb((const char *)data, size, 0, &je);
    bool huge = false;
    const char *k;
    json_t *v;
    size_t i;
    json_object_foreach(json_object_get(json_object_get(root, "model"), "vocab"), k, v)
        huge = huge || json_integer_value(v) > (1 << 22);
    json_array_foreach(json_object_get(root, "added_tokens"), i, v)
        huge = huge || json_integer_value(json_object_get(v, "id")) > (1 << 22);
    json_array_foreach(json_object_get(json_object_get(root, "model"), "merges"), i, v)
        huge = huge || (json_array_size(v) == 2 &&
                        json_string_length(json_array_get(v, 0)) == 0 &&
                        json_string_length(json_array_get(v, 1)) == 0 &&
                        json_is_string(json_array_get(v, 0)) && json_is_string(json_array_get(v, 1)));
    json_decref(root);
    return huge;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (known_finding(data, size))
        return 0;
    const char *path = fuzz_file("tokenizer.json", data, size);
    plume_tokenizer *tok = NULL;
    plume_error err = {0};
    if (plume_tokenizer_from_hf(path, NULL, &tok, &err)) {
        fuzz_check_error(&err, path);
        return 0;
    }
    int32_t nv = plume_tokenizer_n_vocab(tok);
    FUZZ_CHECK(nv > 0, "a tokenizer with %d tokens", nv);
    static const char text[] = "Hello, world! 123 <|im_start|>user\n caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd";
    for (int special = 0; special < 2; special++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (plume_tokenize(tok, text, sizeof text - 1, special, special, &ids, &n, &err)) {
            fuzz_check_error(&err, NULL);
            continue;
        }
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK(ids[i] >= 0 && ids[i] < nv, "id %d outside [0, %d)", ids[i], nv);
        char *out = NULL;
        if (plume_detokenize(tok, ids, n, special, &out, &err) == 0)
            free(out);
        else
            fuzz_check_error(&err, NULL);
        free(ids);
    }
    plume_tokenizer_free(tok);
    return 0;
}
