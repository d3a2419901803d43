/* probe_sampler: prints plume_sampler_probs for cases read from stdin, for
 * tests/sample/test_sampler_numpy.py.  One case per line:
 *   temperature top_k top_p min_p repetition_penalty repeat_last_n
 *   presence_penalty frequency_penalty n_prompt nv n_hist
 *   logit_0 .. logit_{nv-1} hist_0 .. hist_{n_hist-1}
 * (the first n_prompt history entries are the prompt, which the presence and
 * frequency penalties do not count)
 * and one output line per case: the kept count, then nv probabilities. */
#include <stdio.h>
#include <stdlib.h>

#include "plume/sampler.h"

int main(void)
{
    plume_sampling_params p = plume_sampling_defaults();
    int nv, nh, np;
    while (scanf("%f %d %f %f %f %d %f %f %d %d %d", &p.temperature, &p.top_k, &p.top_p,
                 &p.min_p, &p.repetition_penalty, &p.repeat_last_n, &p.presence_penalty,
                 &p.frequency_penalty, &np, &nv, &nh) == 11) {
        if (nv <= 0 || nh < 0 || np < 0)
            return 2;
        float *logits = malloc(sizeof(float) * (size_t)nv);
        float *probs = malloc(sizeof(float) * (size_t)nv);
        int32_t *hist = malloc(sizeof(int32_t) * (size_t)(nh + 1));
        if (!logits || !probs || !hist)
            return 2;
        for (int i = 0; i < nv; i++)
            if (scanf("%f", &logits[i]) != 1)
                return 2;
        for (int i = 0; i < nh; i++)
            if (scanf("%d", &hist[i]) != 1)
                return 2;
        plume_sampler *s;
        plume_error err = {0};
        if (plume_sampler_create(&p, nv, &s, &err)) {
            fprintf(stderr, "probe_sampler: %s\n", err.msg);
            return 2;
        }
        plume_sampler_set_prompt_len(s, (size_t)np);
        int32_t kept = plume_sampler_probs(s, logits, hist, (size_t)nh, probs);
        printf("%d", kept);
        for (int i = 0; i < nv; i++)
            printf(" %.9g", probs[i]);
        printf("\n");
        plume_sampler_free(s);
        free(logits);
        free(probs);
        free(hist);
    }
    return 0;
}
