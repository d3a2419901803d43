/* The engine options of generate and bench throughput (engine_args.h). */
#include "cli/engine_args.h"

#include "cli/cli.h"

unsigned cli_engine_opt(const char *cmd, int argc, char **argv, int *i, bool short_ctx,
                        plume_engine_params *ep)
{
    const char *v;
    if (cli_opt(argc, argv, i, "--ctx-size", &v) || (short_ctx && cli_opt(argc, argv, i, "-c", &v))) {
        ep->kv_max_tokens = cli_int("--ctx-size", v, 1, 1 << 30);
        return CLI_ENGINE_CTX;
    }
    if (cli_opt(argc, argv, i, "--block-size", &v)) {
        ep->block_size = (int32_t)cli_int("--block-size", v, 1, 1024);
        return CLI_ENGINE_BLOCK;
    }
    if (cli_opt(argc, argv, i, "--max-num-seqs", &v)) {
        ep->max_num_seqs = (int32_t)cli_int("--max-num-seqs", v, 1, 65536);
        return CLI_ENGINE_SEQS;
    }
    if (cli_opt(argc, argv, i, "--max-batched-tokens", &v)) {
        ep->max_batched_tokens = (int32_t)cli_int("--max-batched-tokens", v, 1, 1 << 20);
        return CLI_ENGINE_BATCHED;
    }
    if (cli_opt(argc, argv, i, "--kv-dtype", &v)) {
        ep->kv_dtype = (plume_kv_dtype)cli_kv_dtype(cmd, v);
        return CLI_ENGINE_KVDTYPE;
    }
    if (cli_flag(argv, *i, "--no-prefix-caching")) {
        ep->prefix_caching = false;
        return CLI_ENGINE_NOPREFIX;
    }
    if (cli_flag(argv, *i, "--separate-batches")) {
        ep->mixed_batches = false;
        return CLI_ENGINE_SEPARATE;
    }
    return 0;
}

void cli_engine_merge(plume_engine_params *to, const plume_engine_params *from, unsigned set)
{
    if (set & CLI_ENGINE_CTX)
        to->kv_max_tokens = from->kv_max_tokens;
    if (set & CLI_ENGINE_BLOCK)
        to->block_size = from->block_size;
    if (set & CLI_ENGINE_SEQS)
        to->max_num_seqs = from->max_num_seqs;
    if (set & CLI_ENGINE_BATCHED)
        to->max_batched_tokens = from->max_batched_tokens;
    if (set & CLI_ENGINE_NOPREFIX)
        to->prefix_caching = false;
    if (set & CLI_ENGINE_KVDTYPE)
        to->kv_dtype = from->kv_dtype;
    if (set & CLI_ENGINE_SEPARATE)
        to->mixed_batches = false;
}

int cli_engine_check_kv(const plume_engine_params *ep, plume_error *err)
{
    if (ep->block_size > ep->kv_max_tokens)
        return plume_err(err, PLUME_ERR_INVALID, "the KV cache (%lld tokens) is smaller than one "
                         "block (%d); raise --ctx-size or kv_cache.max_tokens",
                         (long long)ep->kv_max_tokens, ep->block_size);
    return 0;
}
