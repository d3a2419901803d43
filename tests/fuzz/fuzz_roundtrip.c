/* libFuzzer target for text -> ids -> text with a real tokenizer (SmolLM2's,
 * from the GGUF named by PLUME_FUZZ_MODEL).  With special parsing off no id
 * may be a special (control) token, whatever the bytes; for valid UTF-8 the
 * decoded text equals the input byte for byte. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_tokenizer.h"
#include "fuzz_util.h"
#include "plume/tokenizer.h"
#include "tokenizer/tok_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static plume_tokenizer *tok;

/* True when s[0..n) is well-formed UTF-8 (no surrogates, no overlongs, at
 * most U+10FFFF), checked independently of the tokenizer's own decoder. */
static bool valid_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xe0) == 0xc0) { k = 1; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { k = 2; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { k = 3; cp = c & 0x07; min = 0x10000; }
        else return false;
        if (n - i <= k)
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += k + 1;
    }
    return true;
}

/* Loads the tokenizer once; aborts when the model is missing (a broken
 * set-up must not look like a pass). */
static void load_once(void)
{
    if (tok)
        return;
    tok = fuzz_load_tokenizer();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load_once();
    char *text = malloc(size ? size : 1); /* exactly sized: an over-read is reported */
    FUZZ_CHECK(text != NULL, "out of memory");
    memcpy(text, data, size);
    int32_t *ids = NULL;
    size_t n = 0;
    plume_error err = {0};
    FUZZ_CHECK(plume_tokenize(tok, text, size, false, false, &ids, &n, &err) == 0, "%s", err.msg);
    int32_t nv = plume_tokenizer_n_vocab(tok);
    bool valid = valid_utf8(data, size);
    /* A byte whose byte-level character the vocabulary lacks (0x13 in
     * SmolLM2's) is dropped, as Hugging Face tokenizers drops it, and invalid
     * UTF-8 becomes U+FFFD (issue #20 finding 3): neither round-trips, but no
     * input may ever become a special token. */
    bool unmappable = false;
    for (size_t i = 0; i < size && !unmappable; i++)
        unmappable = tok->byte_tok[data[i]] < 0;
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < nv, "id %d outside [0, %d)", ids[i], nv);
        FUZZ_CHECK(!plume_tokenizer_is_special(tok, ids[i]),
                   "special token %d from text with special parsing off", ids[i]);
    }
    if (valid && !unmappable && !memchr(data, '\0', size)) { /* the output is a C string */
        char *out = NULL;
        FUZZ_CHECK(plume_detokenize(tok, ids, n, false, &out, &err) == 0, "%s", err.msg);
        FUZZ_CHECK(strlen(out) == size && memcmp(out, data, size) == 0,
                   "decode(encode(text)) differs from the text (%zu vs %zu bytes)", strlen(out),
                   size);
        free(out);
    }
    free(ids);
    free(text);
    return 0;
}
