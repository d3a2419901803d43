/* Per-position logits over a window, on the model runner. */
#include "eval/window.h"

#include <stdlib.h>

#include "model/single_seq.h"

#define WINDOW_BLOCK 16

struct plume_window {
    const plume_model *m;
    plume_single_seq seq;
    int32_t n_ctx, chunk;
    float *logits; /* chunk x n_vocab */
};

int plume_window_create(const plume_model *m, int32_t n_ctx, int32_t chunk,
                        plume_kv_dtype kv_dtype, plume_window **out, plume_error *err)
{
    if (n_ctx <= 0 || chunk <= 0)
        return plume_err(err, PLUME_ERR_INVALID, "window of %d tokens in chunks of %d", n_ctx,
                         chunk);
    if (chunk > n_ctx)
        chunk = n_ctx;
    plume_window *w = calloc(1, sizeof *w);
    if (!w)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    w->m = m;
    w->n_ctx = n_ctx;
    w->chunk = chunk;
    w->logits = malloc(sizeof(float) * (size_t)chunk * (size_t)plume_model_n_vocab(m));
    if (!w->logits) {
        plume_window_free(w);
        return plume_err(err, PLUME_ERR_NOMEM,
                         "out of memory for logits of %d positions x %d vocabulary", chunk,
                         plume_model_n_vocab(m));
    }
    if (plume_single_seq_init(&w->seq, m, n_ctx, WINDOW_BLOCK, kv_dtype, chunk,
                              "a perplexity window", err)) {
        plume_window_free(w);
        return -1;
    }
    *out = w;
    return 0;
}

void plume_window_free(plume_window *w)
{
    if (!w)
        return;
    plume_single_seq_fini(&w->seq);
    free(w->logits);
    free(w);
}

int32_t plume_window_chunk(const plume_window *w) { return w->chunk; }

const float *plume_window_run(plume_window *w, const int32_t *tokens, int32_t n, int32_t pos0,
                              int32_t n_logits, plume_error *err)
{
    if (n <= 0 || n > w->chunk || pos0 < 0 || pos0 + n > w->n_ctx || n_logits < 0 ||
        n_logits > n) {
        plume_err(err, PLUME_ERR_INVALID,
                  "window chunk of %d tokens at %d with %d logits (chunk %d, window %d)", n, pos0,
                  n_logits, w->chunk, w->n_ctx);
        return NULL;
    }
    if (plume_single_seq_forward(&w->seq, tokens, n, pos0, n_logits, n_logits ? w->logits : NULL,
                                 err))
        return NULL;
    return w->logits;
}
