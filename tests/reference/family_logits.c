/* The logits of every position of one sequence, computed in chunks, alone
 * or batched with another sequence, for the model-family tests.
 *
 *     family_logits MODEL OUT.f32 CHUNK BATCH ID,ID,...
 *
 * Feeds the ids to a plume_seq_runner CHUNK at a time (CHUNK 1: one decode
 * forward per token), asking the logits of every new token, and writes the
 * n rows of n_vocab little-endian float32 to OUT.  BATCH 1: every forward
 * also carries a second sequence (the ids reversed, one token fewer per
 * chunk, placed before it in the batch) whose logits are dropped, so that OUT can be compared bit for bit
 * with a run alone.  Exit 1 with plume's message on stderr on any error. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plume/model.h"
#include "plume/seq_runner.h"

#include "id_list.h"

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: family_logits MODEL OUT.f32 CHUNK BATCH ID,ID,...\n");
        return 2;
    }
    int32_t chunk = atoi(argv[3]), batch = atoi(argv[4]), n;
    int32_t *ids = parse_id_list(argv[5], &n);
    if (!ids)
        return 2;
    if (chunk < 1 || n < 2)
        return fprintf(stderr, "CHUNK must be >= 1 and at least 2 ids given\n"), 2;
    int32_t *rev = malloc(sizeof(int32_t) * (size_t)n);
    for (int32_t i = 0; i < n; i++)
        rev[i] = ids[n - 1 - i];
    plume_error err = {0};
    plume_model *m;
    if (plume_model_load(argv[1], &m, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    const int32_t nv = plume_model_n_vocab(m);
    plume_seq_runner_params p = plume_seq_runner_defaults();
    p.kv_max_tokens = 2 * n + 64;
    p.kv_dtype = PLUME_KV_F32; /* exact, as the float64 oracle it is compared with */
    p.max_batch_tokens = 2 * chunk;
    plume_seq_runner *r;
    if (plume_seq_runner_create(m, &p, &r, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    float *lg = malloc(sizeof(float) * (size_t)nv * (size_t)(2 * chunk));
    FILE *f = fopen(argv[2], "wb");
    if (!f || !lg)
        return perror(argv[2]), 1;
    for (int32_t pos = 0, other = 0; pos < n;) {
        int32_t len = n - pos < chunk ? n - pos : chunk;
        int32_t olen = len > 1 ? len - 1 : 1;
        if (other + olen > n)
            olen = 0;
        /* the other sequence first: the main one's rows start further on */
        plume_seq_run runs[2] = {{1, rev + other, olen, 0}, {0, ids + pos, len, len}};
        bool two = batch && olen > 0;
        if (plume_seq_runner_run(r, two ? runs : runs + 1, two ? 2 : 1, lg, &err))
            return fprintf(stderr, "%s\n", err.msg), 1;
        if (fwrite(lg, sizeof(float), (size_t)nv * (size_t)len, f) != (size_t)nv * (size_t)len)
            return perror(argv[2]), 1;
        pos += len;
        other += batch ? olen : 0;
    }
    fclose(f);
    free(lg);
    plume_seq_runner_free(r);
    plume_model_free(m);
    free(ids);
    free(rev);
    return 0;
}
