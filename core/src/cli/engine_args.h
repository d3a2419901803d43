/* The engine options that `plume generate` and `plume bench throughput`
 * share (--ctx-size, --block-size, --max-num-seqs, --max-batched-tokens,
 * --kv-dtype, --no-prefix-caching, --separate-batches): one matcher into
 * plume_engine_params, one merge of the given ones over a pipeline's, and
 * the KV-cache check that generate and serve share. */
#ifndef PLUME_CLI_ENGINE_ARGS_H
#define PLUME_CLI_ENGINE_ARGS_H

#include <stdbool.h>

#include "plume/engine.h"
#include "plume/error.h"

/* Which engine option was given, one bit each. */
enum {
    CLI_ENGINE_CTX = 1 << 0,
    CLI_ENGINE_BLOCK = 1 << 1,
    CLI_ENGINE_SEQS = 1 << 2,
    CLI_ENGINE_BATCHED = 1 << 3,
    CLI_ENGINE_KVDTYPE = 1 << 4,
    CLI_ENGINE_NOPREFIX = 1 << 5,
    CLI_ENGINE_SEPARATE = 1 << 6,
};

/* Matches argv[*i] against the engine options of `plume <cmd>` (and -c for
 * --ctx-size when short_ctx); stores the value into *ep, advances *i past
 * it and returns the option's CLI_ENGINE_* bit; 0 when argv[*i] is none of
 * them.  A bad value is cli_int's or cli_kv_dtype's error, exit 2. */
unsigned cli_engine_opt(const char *cmd, int argc, char **argv, int *i, bool short_ctx,
                        plume_engine_params *ep);

/* Checks that the KV cache of *ep holds at least one block: 0, or -1
 * with err saying so and which option (--ctx-size, kv_cache.max_tokens)
 * to raise.  generate and serve check before they build the engine. */
int cli_engine_check_kv(const plume_engine_params *ep, plume_error *err);

/* Copies into *to the fields of *from whose CLI_ENGINE_* bits are in set. */
void cli_engine_merge(plume_engine_params *to, const plume_engine_params *from, unsigned set);

#endif
