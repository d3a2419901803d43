/* bench_structured_mask MODEL.gguf CORPUS.json [STEPS]: the cost of
 * sample-structured's token masks per decoded token, at the model's
 * vocabulary and at a synthetic 152k-token vocabulary (the model's tokens
 * plus deterministic concatenations of pairs of them, Qwen's size).
 *
 * For every schema of the corpus it decodes one document by a seeded random
 * walk (a uniformly drawn allowed token each step, end-of-generation as
 * soon as it is allowed, at most STEPS tokens) and times, per token, what
 * the provider does each step: the mask (cached per automaton state, as in
 * the provider) and the masking of a logits row.  It also times the same
 * masks computed from scratch (no mask cache, warm transitions), the
 * worst case a new state costs.  Prints median and p99 in microseconds.
 * A benchmark: it asserts nothing about time.  With SS_BENCH_VERIFY=1 every
 * mask is also checked against the brute-force walk of every token (slow),
 * exiting 1 on a difference. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "constraint.h"
#include "plume/model.h"
#include "vocab.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct samples {
    double *v;
    size_t n, cap;
} samples;

static void add(samples *s, double x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4096;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = x;
}

static void report(const char *label, samples *s)
{
    if (!s->n) {
        printf("%-44s no samples\n", label);
        return;
    }
    qsort(s->v, s->n, sizeof *s->v, cmp_d);
    double sum = 0;
    for (size_t i = 0; i < s->n; i++)
        sum += s->v[i];
    printf("%-44s median %8.1f us  p99 %8.1f us  mean %8.1f us  (%zu tokens)\n", label,
           s->v[s->n / 2], s->v[(size_t)((double)s->n * 0.99)], sum / (double)s->n, s->n);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* One corpus pass over vocabulary v. */
static void run(const ss_vocab *v, json_t *corpus, int steps, const char *label)
{
    samples provider = {0}, cold = {0}, apply_only = {0};
    float *logits = malloc((size_t)v->n_vocab * sizeof *logits);
    float *buf = malloc((size_t)v->n_vocab * sizeof *buf);
    uint8_t *tmp = malloc(ss_mask_bytes(v));
    int32_t *allowed = malloc((size_t)v->n_vocab * sizeof *allowed);
    for (int32_t i = 0; i < v->n_vocab; i++)
        logits[i] = (float)(i % 97) * 0.01f;
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    size_t n_docs = 0, n_ended = 0, n_verified = 0;
    bool verify = getenv("SS_BENCH_VERIFY") && atoi(getenv("SS_BENCH_VERIFY"));
    for (size_t k = 0; k < json_array_size(corpus); k++) {
        json_t *e = json_array_get(corpus, k);
        char *text = json_dumps(json_object_get(e, "schema"), JSON_COMPACT);
        ss_compiled *c;
        plume_error err = {0};
        if (ss_compile(SS_JSON_SCHEMA, text, strlen(text), &c, &err)) {
            fprintf(stderr, "%s: %s\n", json_string_value(json_object_get(e, "name")), err.msg);
            free(text);
            continue;
        }
        free(text);
        n_docs++;
        int32_t d = ss_pda_start(&c->pda);
        for (int step = 0; step < steps && d >= 0; step++) {
            double t0 = now_us();
            const uint8_t *m = ss_mask(v, &c->pda, d);
            double t1 = now_us();
            if (!m)
                break;
            /* the provider's masking of a logits row (structured.c: masked) */
            int32_t full = v->n_vocab & ~7;
            for (int32_t i = 0; i < full; i += 8) {
                uint8_t b = m[i >> 3];
                if (b == 0) {
                    for (int j = 0; j < 8; j++)
                        buf[i + j] = -INFINITY;
                } else if (b == 0xFF) {
                    memcpy(buf + i, logits + i, 8 * sizeof *buf);
                } else {
                    for (int j = 0; j < 8; j++)
                        buf[i + j] = (b >> j) & 1 ? logits[i + j] : -INFINITY;
                }
            }
            for (int32_t j = full; j < v->n_vocab; j++)
                buf[j] = ss_mask_get(m, j) ? logits[j] : -INFINITY;
            double t2 = now_us();
            add(&provider, t2 - t0);
            add(&apply_only, t2 - t1);
            double t3 = now_us();
            ss_mask_compute(v, &c->pda, d, tmp);
            add(&cold, now_us() - t3);
            if (verify) { /* SS_BENCH_VERIFY=1: every mask against brute force */
                uint8_t *bf = malloc(ss_mask_bytes(v));
                if (!bf || ss_mask_brute(v, &c->pda, d, bf) || memcmp(bf, tmp, ss_mask_bytes(v)) ||
                    memcmp(bf, ss_mask(v, &c->pda, d), ss_mask_bytes(v))) {
                    fprintf(stderr, "%s: mask differs from brute force at step %d\n",
                            json_string_value(json_object_get(e, "name")), step);
                    exit(1);
                }
                free(bf);
                n_verified++;
            }
            int32_t n_allowed = 0, eog = -1;
            for (int32_t i = 0; i < v->n_vocab; i++)
                if (ss_mask_get(m, i)) {
                    if (v->eog[i])
                        eog = i;
                    allowed[n_allowed++] = i;
                }
            if (eog >= 0) {
                n_ended++;
                break;
            }
            if (!n_allowed)
                break;
            int32_t t = allowed[rng_next(&seed) % (uint64_t)n_allowed];
            for (uint32_t i = v->tok_off[t]; i < v->tok_off[t + 1] && d >= 0; i++)
                d = ss_pda_step(&c->pda, d, v->bytes[i]);
        }
        ss_compiled_free(c);
    }
    printf("%s: %zu schemas, %zu documents completed within %d tokens\n", label, n_docs, n_ended,
           steps);
    if (verify)
        printf("  %zu masks equal to the brute-force check of every token\n", n_verified);
    report("  per token, as the provider (cached mask + apply)", &provider);
    report("  of which applying the mask to the logits", &apply_only);
    report("  mask from scratch (no mask cache)", &cold);
    free(provider.v);
    free(cold.v);
    free(apply_only.v);
    free(logits);
    free(buf);
    free(tmp);
    free(allowed);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf CORPUS.json [STEPS]\n", argv[0]);
        return 2;
    }
    int steps = argc > 3 ? atoi(argv[3]) : 200;
    plume_error err = {0};
    plume_model *m;
    if (plume_model_load(argv[1], &m, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    json_error_t je;
    json_t *corpus = json_load_file(argv[2], 0, &je);
    if (!json_is_array(corpus)) {
        fprintf(stderr, "%s: %s\n", argv[2], je.text);
        return 1;
    }
    const plume_tokenizer *tok = plume_model_tokenizer(m);
    int32_t nv = plume_model_n_vocab(m);
    ss_vocab v;
    double t0 = now_us();
    if (ss_vocab_build(&v, tok, nv, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("vocabulary index: %d tokens, %u trie nodes, built in %.1f ms\n", v.n_vocab, v.n_nodes,
           (now_us() - t0) / 1000);
    run(&v, corpus, steps, "model vocabulary");

    /* a 152k vocabulary: the model's tokens, then pairs of them */
    const int32_t big = 152064;
    const char **texts = malloc((size_t)big * sizeof *texts);
    uint32_t *lens = malloc((size_t)big * sizeof *lens);
    bool *eog = calloc((size_t)big, 1);
    char *store = malloc((size_t)big * 48);
    size_t used = 0;
    uint64_t seed = 12345;
    for (int32_t t = 0; t < big; t++) {
        char *dst = store + used;
        uint32_t len;
        if (t < nv) {
            len = v.tok_off[t + 1] - v.tok_off[t];
            memcpy(dst, v.bytes + v.tok_off[t], len);
            eog[t] = v.eog[t];
        } else {
            int32_t a, b;
            uint32_t la, lb;
            do {
                a = (int32_t)(rng_next(&seed) % (uint64_t)nv);
                b = (int32_t)(rng_next(&seed) % (uint64_t)nv);
                la = v.tok_off[a + 1] - v.tok_off[a];
                lb = v.tok_off[b + 1] - v.tok_off[b];
            } while (!la || !lb || la + lb > 24);
            memcpy(dst, v.bytes + v.tok_off[a], la);
            memcpy(dst + la, v.bytes + v.tok_off[b], lb);
            len = la + lb;
        }
        texts[t] = dst;
        lens[t] = len;
        used += len;
    }
    ss_vocab v2;
    t0 = now_us();
    if (ss_vocab_build_raw(&v2, texts, lens, eog, big, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("vocabulary index: %d tokens, %u trie nodes, built in %.1f ms\n", v2.n_vocab,
           v2.n_nodes, (now_us() - t0) / 1000);
    run(&v2, corpus, steps, "synthetic 152k vocabulary");
    ss_vocab_free(&v2);
    ss_vocab_free(&v);
    free(texts);
    free(lens);
    free(eog);
    free(store);
    json_decref(corpus);
    plume_model_free(m);
    return 0;
}
