/* plume_context: one sequence over a private paged cache whose block table
 * is the identity — the simple single-stream API, on the same runner as
 * the batched engine. */
#include <stdlib.h>

#include "model/model_internal.h"
#include "model/single_seq.h"

#define CTX_BLOCK 16
/* Positions per forward pass: the engine's default (plume_engine_params
 * max_batched_tokens), so a long prompt reads each weight once per 512
 * positions; any chunking gives the same bits. */
#define CTX_CHUNK 512

struct plume_context {
    const plume_model *m;
    plume_single_seq seq;
    int n_ctx;
    int n_past;
};

int plume_context_create(const plume_model *m, int n_ctx, plume_context **out, plume_error *err)
{
    if (n_ctx <= 0)
        n_ctx = m->cfg.n_ctx_train;
    if (n_ctx <= 0)
        return plume_err(err, PLUME_ERR_INVALID, "context size must be positive, got %d", n_ctx);
    plume_context *c = calloc(1, sizeof *c);
    if (!c)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating a context");
    c->m = m;
    c->n_ctx = n_ctx;
    if (plume_single_seq_init(&c->seq, m, n_ctx, CTX_BLOCK, PLUME_KV_F32,
                              n_ctx < CTX_CHUNK ? n_ctx : CTX_CHUNK, "a context", err)) {
        plume_context_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

void plume_context_free(plume_context *c)
{
    if (!c)
        return;
    plume_single_seq_fini(&c->seq);
    free(c);
}

int plume_context_n_ctx(const plume_context *c) { return c->n_ctx; }
int plume_context_n_past(const plume_context *c) { return c->n_past; }
void plume_context_reset(plume_context *c) { c->n_past = 0; }

int plume_decode(plume_context *c, const int32_t *tokens, size_t n, float *logits,
                 plume_error *err)
{
    if (n == 0)
        return plume_err(err, PLUME_ERR_INVALID, "plume_decode needs at least one token");
    if ((size_t)c->n_past + n > (size_t)c->n_ctx)
        return plume_err(err, PLUME_ERR_RANGE,
                         "%zu tokens after %d cached positions exceed the context of %d tokens; "
                         "use a larger --ctx-size or a shorter prompt",
                         n, c->n_past, c->n_ctx);
    for (size_t done = 0; done < n;) {
        size_t chunk = n - done < CTX_CHUNK ? n - done : CTX_CHUNK;
        bool last = done + chunk == n;
        if (plume_single_seq_forward(&c->seq, tokens + done, (int32_t)chunk,
                                     c->n_past + (int32_t)done, last && logits ? 1 : 0,
                                     last ? logits : NULL, err))
            return -1;
        done += chunk;
    }
    c->n_past += (int)n;
    return 0;
}
