/* Teacher-forced logits for the oracle comparisons.
 *
 *     forced_logits MODEL OUT.f32 P ID,ID,...
 *
 * Runs the first P ids as one prefill chunk, then every later id alone (one
 * decode forward each, as generation does), and writes the logits of
 * positions P-1 .. n-1 (n-P+1 rows of n_vocab little-endian float32) to OUT.
 * Being fed given tokens instead of its own, the model can be compared with
 * the oracle at every step even after a greedy divergence.  The CPU
 * activation path follows PLUME_CPU_ACTIVATIONS as everywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/window.h"
#include "plume/model.h"

#include "id_list.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: forced_logits MODEL OUT.f32 P ID,ID,...\n");
        return 2;
    }
    int32_t p = atoi(argv[3]), n;
    int32_t *ids = parse_id_list(argv[4], &n);
    if (!ids)
        return 2;
    if (p < 1 || p > n)
        return fprintf(stderr, "P must be in [1, %d]\n", n), 2;
    plume_error err = {0};
    plume_model *m;
    if (plume_model_load(argv[1], &m, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    const int32_t nv = plume_model_n_vocab(m);
    plume_window *w;
    if (plume_window_create(m, n, p, PLUME_KV_F32, &w, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    FILE *f = fopen(argv[2], "wb");
    if (!f)
        return perror(argv[2]), 1;
    for (int32_t pos = 0; pos < n;) {
        int32_t len = pos == 0 ? p : 1;
        const float *lg = plume_window_run(w, ids + pos, len, pos, 1, &err);
        if (!lg)
            return fprintf(stderr, "%s\n", err.msg), 1;
        if (fwrite(lg, sizeof(float), (size_t)nv, f) != (size_t)nv)
            return perror(argv[2]), 1;
        pos += len;
    }
    fclose(f);
    plume_window_free(w);
    plume_model_free(m);
    free(ids);
    return 0;
}
