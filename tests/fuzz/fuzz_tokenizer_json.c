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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
