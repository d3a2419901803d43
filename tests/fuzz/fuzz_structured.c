/* libFuzzer target for sample-structured's compilers (JSON Schema, regex,
 * choice list, GBNF grammar, required tool calls) and the automaton they
 * feed.  The first byte
 * picks the compiler, the rest is its text.  Any bytes give either one
 * error line, or a grammar whose automaton then runs over the input's own
 * bytes and computes token masks over a small vocabulary, every mask equal
 * to the brute-force check of each token, within bounded memory. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "constraint.h"
#include "fuzz_util.h"
#include "vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ss_vocab *small_vocab(void)
{
    static ss_vocab v;
    static int made;
    if (!made) {
        static const char *const pieces[] = {"{", "}", "\"", "\":", ",", " ", "[", "]", "a",
                                             "ab", "1", "12", "-", ".", "e", "true", "null",
                                             "\\", "\n", "x\"", "0", "é", "\xc3", "yes", "no", ""};
        size_t n = sizeof pieces / sizeof *pieces;
        uint32_t lens[32];
        bool eog[32] = {0};
        for (size_t i = 0; i < n; i++)
            lens[i] = (uint32_t)strlen(pieces[i]);
        eog[n - 1] = true;
        plume_error err = {0};
        if (ss_vocab_build_raw(&v, pieces, lens, eog, (int32_t)n, &err))
            abort();
        made = 1;
    }
    return &v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const ss_kind kinds[] = {SS_JSON_SCHEMA, SS_REGEX, SS_CHOICE, SS_GRAMMAR};
    ss_kind kind = data[0] >= 0xF0 ? SS_TOOL_CALLS : kinds[data[0] % 4];
    ss_compiled *c = NULL;
    plume_error err = {0};
    if (ss_compile(kind, (const char *)data + 1, size - 1, &c, &err)) {
        fuzz_check_error(&err, NULL);
        return 0;
    }
    ss_vocab *v = small_vocab();
    uint8_t a[8], b[8];
    int32_t d = ss_pda_start(&c->pda);
    FUZZ_CHECK(d >= 0, "start state failed after a successful compile: %s", c->pda.err.msg);
    for (size_t i = 1; i < size && d >= 0; i++) {
        if (i % 7 == 1) {
            int ra = ss_mask_compute(v, &c->pda, d, a), rb = ss_mask_brute(v, &c->pda, d, b);
            FUZZ_CHECK(ra == rb, "mask %d vs brute force %d", ra, rb);
            if (ra == 0)
                FUZZ_CHECK(!memcmp(a, b, ss_mask_bytes(v)), "mask differs from brute force");
        }
        d = ss_pda_step(&c->pda, d, data[i]);
    }
    if (d == -2)
        fuzz_check_error(&c->pda.err, NULL);
    ss_compiled_free(c);
    return 0;
}
