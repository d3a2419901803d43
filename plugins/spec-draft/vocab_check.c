/* The draft's vocabulary against the target's, as llama.cpp checks it
 * (common/speculative.cpp, common_speculative_are_compatible): drafts are
 * token ids, so both models must give every id the same text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draft_proposer.h"
#include "plume/tokenizer.h"

/* token id's text, quoted and escaped, into out (cap >= 8) */
static void token_text(const plume_tokenizer *t, int32_t id, char *out, size_t cap)
{
    char raw[128];
    int n = plume_token_bytes(t, id, true, raw, sizeof raw);
    size_t o = 0;
    out[o++] = '"';
    for (int i = 0; i < n && i < (int)sizeof raw && o + 6 < cap; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(out + o, cap - o, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        else
            out[o++] = (char)c;
    }
    if (n > (int)sizeof raw && o + 5 < cap)
        o += (size_t)snprintf(out + o, cap - o, "...");
    out[o++] = '"';
    out[o] = '\0';
}

static int differ(const plume_tokenizer *tt, const plume_tokenizer *td, int32_t id)
{
    char a[256], b[256];
    int na = plume_token_bytes(tt, id, true, a, sizeof a);
    int nb = plume_token_bytes(td, id, true, b, sizeof b);
    if (na != nb)
        return 1;
    if (na < 0)
        return 0;
    size_t n = (size_t)na < sizeof a ? (size_t)na : sizeof a;
    return memcmp(a, b, n) != 0 ||
           plume_tokenizer_is_special(tt, id) != plume_tokenizer_is_special(td, id);
}

int spec_draft_vocab_check(const plume_model *target, const plume_model *draft,
                           const char *draft_path, plume_error *err)
{
    const plume_tokenizer *tt = plume_model_tokenizer(target), *td = plume_model_tokenizer(draft);
    if (!tt || !td)
        return plume_err(err, PLUME_ERR_INVALID,
                         "draft model %s: %s has no tokenizer, so its vocabulary cannot be "
                         "checked against the %s's",
                         draft_path, tt ? "it" : "the target", tt ? "target" : "draft");
    const char *mt = plume_tokenizer_model(tt), *md = plume_tokenizer_model(td);
    if (strcmp(mt, md) != 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "draft model %s has a '%s' tokenizer but the target a '%s' one; the "
                         "draft must share the target's tokenizer",
                         draft_path, md, mt);
    if (plume_tokenizer_bos(tt) != plume_tokenizer_bos(td) ||
        plume_tokenizer_add_bos(tt) != plume_tokenizer_add_bos(td))
        return plume_err(err, PLUME_ERR_INVALID,
                         "draft model %s has BOS token %d (add_bos %s) but the target %d "
                         "(add_bos %s); the draft must share the target's tokenizer",
                         draft_path, plume_tokenizer_bos(td),
                         plume_tokenizer_add_bos(td) ? "true" : "false", plume_tokenizer_bos(tt),
                         plume_tokenizer_add_bos(tt) ? "true" : "false");
    if (plume_tokenizer_eos(tt) != plume_tokenizer_eos(td))
        return plume_err(err, PLUME_ERR_INVALID,
                         "draft model %s has EOS token %d but the target %d; the draft must "
                         "share the target's tokenizer",
                         draft_path, plume_tokenizer_eos(td), plume_tokenizer_eos(tt));
    int32_t nt = plume_model_n_vocab(target), nd = plume_model_n_vocab(draft);
    if (abs(nt - nd) > SPEC_DRAFT_VOCAB_MAX_DIFF)
        return plume_err(err, PLUME_ERR_INVALID,
                         "draft model %s has %d tokens but the target %d: more than %d apart; "
                         "the draft must share the target's tokenizer",
                         draft_path, nd, nt, SPEC_DRAFT_VOCAB_MAX_DIFF);
    int32_t n = plume_tokenizer_n_vocab(tt) < plume_tokenizer_n_vocab(td)
                    ? plume_tokenizer_n_vocab(tt)
                    : plume_tokenizer_n_vocab(td);
    for (int32_t id = SPEC_DRAFT_VOCAB_CHECK_START; id < n; id++)
        if (differ(tt, td, id)) {
            char a[96], b[96];
            token_text(tt, id, a, sizeof a);
            token_text(td, id, b, sizeof b);
            return plume_err(err, PLUME_ERR_INVALID,
                             "draft model %s has another vocabulary than the target: token %d "
                             "is %s%s in the target but %s%s in the draft; the draft must share "
                             "the target's tokenizer",
                             draft_path, id, a, plume_tokenizer_is_special(tt, id) ? " (special)" : "",
                             b, plume_tokenizer_is_special(td, id) ? " (special)" : "");
        }
    return 0;
}
