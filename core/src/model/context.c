/* plume_context: one sequence over a private paged cache whose block table
 * is the identity — the simple single-stream API, on the same runner as
 * the batched engine. */
#include <stdlib.h>

#include "model/model_internal.h"
#include "model/runner.h"

#define CTX_BLOCK 16
#define CTX_CHUNK 64 /* positions per forward */

struct plume_context {
    const plume_model *m;
    plume_kv_cache *kv;
    plume_runner *runner;
    int32_t *block_table;
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
    int32_t n_blocks = (n_ctx + CTX_BLOCK - 1) / CTX_BLOCK;
    c->block_table = malloc(sizeof(int32_t) * (size_t)n_blocks);
    if (!c->block_table) {
        free(c);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating a context");
    }
    for (int32_t i = 0; i < n_blocks; i++)
        c->block_table[i] = i;
    if (plume_kv_cache_create(m, n_blocks, CTX_BLOCK, PLUME_KV_F32, &c->kv, err) ||
        plume_runner_create(m, c->kv, CTX_CHUNK, &c->runner, err)) {
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
    plume_runner_free(c->runner);
    plume_kv_cache_free(c->kv);
    free(c->block_table);
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
        plume_batch_seq s = {tokens + done, (int32_t)chunk, c->n_past + (int32_t)done,
                             c->block_table, last && logits ? 1 : 0};
        if (plume_runner_forward(c->runner, &s, 1, last ? logits : NULL, err))
            return -1;
        done += chunk;
    }
    c->n_past += (int)n;
    return 0;
}
