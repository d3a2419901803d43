/* One sequence over a private identity-mapped paged cache (see
 * single_seq.h). */
#include "model/single_seq.h"

#include <stdlib.h>

int plume_single_seq_init(plume_single_seq *s, const plume_model *m, int32_t n_ctx,
                          int32_t block_size, plume_kv_dtype dtype, int32_t max_tokens,
                          const char *what, plume_error *err)
{
    int32_t n_blocks = (n_ctx + block_size - 1) / block_size;
    s->block_table = malloc(sizeof(int32_t) * (size_t)n_blocks);
    if (!s->block_table)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating %s", what);
    for (int32_t i = 0; i < n_blocks; i++)
        s->block_table[i] = i;
    if (plume_kv_cache_create(m, n_blocks, block_size, dtype, &s->kv, err) ||
        plume_runner_create(m, s->kv, max_tokens, &s->runner, err))
        return -1;
    return 0;
}

void plume_single_seq_fini(plume_single_seq *s)
{
    plume_runner_free(s->runner);
    plume_kv_cache_free(s->kv);
    free(s->block_table);
}
