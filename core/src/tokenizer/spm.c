/* SentencePiece-style BPE ("llama" vocabularies): spaces become U+2581 '▁',
 * an optional space is prefixed, characters merge by token score (GGUF) or
 * merge rank (tokenizer.json), and characters that end up outside the
 * vocabulary fall back to <0xNN> byte tokens. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

static const char SPM_SPACE[3] = {(char)0xe2, (char)0x96, (char)0x81}; /* U+2581 */

/* Merges one piece of escaped text and appends its ids. */
static int encode_piece(const plume_tokenizer *t, tok_work *w, const char *s, size_t n,
                        int32_t **ids, size_t *nids, size_t *cap)
{
    if (tok_work_load(t, w, s, n, false) < 0 || tok_bpe_merge(t, w, s, t->merge_mode) < 0)
        return -1;
    for (int32_t i = w->n_syms ? 0 : -1; i >= 0; i = w->syms[i].next) {
        const tok_sym *sym = &w->syms[i];
        if (sym->id >= 0) {
            if (tok_ids_push(ids, nids, cap, sym->id) < 0)
                return -1;
            continue;
        }
        bool all_bytes = true;
        for (uint32_t j = 0; j < sym->len; j++)
            all_bytes = all_bytes && t->byte_tok[(uint8_t)s[sym->start + j]] >= 0;
        if (all_bytes) {
            for (uint32_t j = 0; j < sym->len; j++)
                if (tok_ids_push(ids, nids, cap, t->byte_tok[(uint8_t)s[sym->start + j]]) < 0)
                    return -1;
        } else if (tok_text_unk(t) >= 0 && tok_ids_push(ids, nids, cap, tok_text_unk(t)) < 0) {
            return -1;
        }
    }
    return 0;
}

int tok_spm_encode(const plume_tokenizer *t, tok_work *w, const char *text, size_t len,
                   bool prefix_space, int32_t **ids, size_t *n, size_t *cap, plume_error *err)
{
    size_t spaces = prefix_space ? 1 : 0;
    for (size_t i = 0; i < len; i++)
        spaces += text[i] == ' ';
    size_t elen = len + (prefix_space ? 1 : 0) + 2 * spaces;
    char *e = malloc(elen ? elen : 1);
    if (!e)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory encoding %zu bytes", len);
    size_t k = 0;
    if (prefix_space) {
        memcpy(e, SPM_SPACE, 3);
        k = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(e + k, SPM_SPACE, 3);
            k += 3;
        } else {
            e[k++] = text[i];
        }
    }
    int rc = 0;
    if (!t->spm_split_words) {
        rc = encode_piece(t, w, e, k, ids, n, cap);
    } else {
        /* Metaspace(split=true): every '▁' starts a new word */
        size_t start = 0;
        for (size_t i = 1; i <= k && rc == 0; i++) {
            if (i == k || (i + 3 <= k && memcmp(e + i, SPM_SPACE, 3) == 0)) {
                rc = encode_piece(t, w, e + start, i - start, ids, n, cap);
                start = i;
            }
        }
    }
    free(e);
    if (rc < 0)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory encoding %zu bytes", len);
    return 0;
}
