/* plume bench serve: streams requests to an OpenAI-compatible server
 * (plume serve, llama-server, vLLM) with Poisson/gamma arrivals or a fixed
 * concurrency and reports throughput, TTFT, TPOT, ITL and end-to-end
 * latency as `vllm bench serve` defines them (docs/bench-serve.md).
 *
 * One thread drives every request through libcurl's multi interface
 * (serve/http_client.h); the timestamps are taken in the receive callbacks. */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_stats.h"
#include "cli/cli.h"
#include "serve/http_client.h"
#include "plume/sampler.h"

static const char help[] =
    "usage: plume bench serve --url URL --dataset random|FILE --num-prompts N\n"
    "                         (--request-rate R [--burstiness B] | --max-concurrency C)\n"
    "                         [options]\n"
    "\n"
    "Streams N requests (stream: true, stream_options.include_usage) to the\n"
    "OpenAI-compatible server at URL (plume serve, llama-server, vLLM, ...) and\n"
    "reports request and token throughput and, at mean/p50/p90/p99, the time to\n"
    "first token (TTFT), time per output token after the first (TPOT), the gaps\n"
    "between streamed chunks (ITL) and end-to-end latency, defined as `vllm bench\n"
    "serve` defines them (docs/bench-serve.md).  Requests arrive as a Poisson\n"
    "process at --request-rate per second (gamma-distributed gaps with shape\n"
    "--burstiness: 1 is Poisson, below 1 burstier, above 1 more regular), or are\n"
    "kept --max-concurrency at a time; given both, arrivals wait for a free slot.\n"
    "\n"
    "options:\n"
    "  --url URL               the server, e.g. http://127.0.0.1:8000 (a trailing\n"
    "                          /v1 is accepted); requests go to URL/v1/completions\n"
    "                          or URL/v1/chat/completions\n"
    "  --model NAME            the request's \"model\" (default: the first id that\n"
    "                          URL/v1/models lists)\n"
    "  --dataset random|FILE   random: prompts of random common English words, about\n"
    "                          one token each (--input-len words); FILE: JSONL, one\n"
    "                          {\"prompt\": \"...\"} or {\"messages\": [{\"role\", \"content\"},\n"
    "                          ...]} per line, optional \"max_tokens\" (e.g.\n"
    "                          bench/data/chat-prompts.jsonl); lines are shuffled by\n"
    "                          --seed and reused when N is larger\n"
    "  --input-len MIN-MAX     random prompt lengths in words, uniform (default 128)\n"
    "  --output-len MIN-MAX    max_tokens, uniform (default 128; a FILE line's own\n"
    "                          max_tokens wins)\n"
    "  --num-prompts N         requests to send\n"
    "  --request-rate R        arrivals per second, or inf (all at once)\n"
    "  --burstiness B          shape of the gamma inter-arrival times (default 1)\n"
    "  --max-concurrency C     at most C requests in flight\n"
    "  --endpoint completions|chat\n"
    "                          the API (default: chat when the dataset has\n"
    "                          \"messages\", else completions)\n"
    "  --ignore-eos            send \"ignore_eos\": true (plume serve, vLLM and\n"
    "                          llama-server honour it) so outputs run to max_tokens\n"
    "  --temperature T         send \"temperature\": T (default: the server's)\n"
    "  --api-key KEY           sent as \"Authorization: Bearer KEY\" (default: the\n"
    "                          OPENAI_API_KEY environment variable, when set)\n"
    "  --timeout S             give up on a request after S seconds (default 600;\n"
    "                          0: never)\n"
    "  --seed S                dataset and arrival seed (default 0)\n"
    "  --json                  print one JSON object instead of text\n"
    "\n"
    "Exit status 0 when at least one request succeeded; failed requests are\n"
    "counted in the report with their errors.  1 when every request failed.\n";

#define CMD "plume bench serve"
#define MAX_ERROR_KINDS 8

/* Common English words that are a single token, with their leading space,
 * in the usual BPE vocabularies (GPT-2, Llama, SmolLM2, Qwen, Mistral). */
static const char *const words[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with",
    "be", "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which",
    "but", "have", "an", "they", "you", "were", "her", "she", "there", "one", "all",
    "we", "their", "has", "been", "will", "more", "if", "no", "when", "would", "so",
    "who", "what", "up", "out", "about", "them", "into", "can", "other", "some",
    "time", "could", "these", "two", "may", "first", "then", "do", "any", "like",
    "my", "now", "over", "such", "our", "man", "me", "even", "most", "made", "after",
    "also", "did", "many", "before", "must", "through", "back", "years", "where",
    "much", "your", "way", "well", "down", "should", "because", "each", "just",
    "those", "people", "how", "too", "little", "state", "good", "very", "make",
    "world", "still", "own", "see", "men", "work", "long", "get", "here", "between",
    "both", "life", "being", "under", "never", "day", "same", "another", "know",
    "while", "last", "might", "us", "great", "old", "year", "off", "come", "since",
    "against", "go", "came", "right", "used", "take", "three", "house", "water",
    "small", "found", "part", "place", "city", "light", "river", "green", "night",
    "music", "table", "paper", "window", "garden", "morning", "story", "friend",
    "school", "family", "money", "power", "road", "tree", "book", "home", "word",
};
#define N_WORDS (sizeof words / sizeof words[0])

typedef struct entry {
    char *prompt;      /* completions: the prompt; chat: the user message */
    json_t *messages;  /* a FILE line's conversation, or NULL */
    int max_tokens;    /* 0: from --output-len */
    int est_tokens;    /* the client-side estimate of the prompt's tokens */
} entry;

typedef struct serve_opts {
    const char *url, *model, *dataset, *api_key, *endpoint;
    int in_lo, in_hi, out_lo, out_hi;
    int num_prompts, max_concurrency;
    double rate, burstiness, temperature, timeout;
    bool have_rate, have_temperature, ignore_eos, json;
    uint64_t seed;
} serve_opts;

typedef struct req {
    char *body;
    bool chat;
    int est_input;
    double t_start, t_first, t_last;
    bool got_first, ok;
    int text_chunks;
    long usage_out, usage_in; /* -1: the server gave none */
    bench_vec itl;
    char err[512];
} req;

static int uniform_int(plume_rng *r, int lo, int hi)
{
    return lo + (int)(plume_rng_next(r) % (uint64_t)(hi - lo + 1));
}

static double uniform_open(plume_rng *r)
{
    double u;
    do
        u = plume_rng_uniform(r);
    while (u <= 0.0 || u >= 1.0);
    return u;
}

/* A gamma(shape, scale) variate: Marsaglia and Tsang (2000) for shape >= 1,
 * boosted by U^(1/shape) below 1. */
static double gamma_variate(plume_rng *r, double shape, double scale)
{
    if (shape < 1.0)
        return gamma_variate(r, shape + 1.0, scale) * pow(uniform_open(r), 1.0 / shape);
    const double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            /* a standard normal by Box-Muller */
            x = sqrt(-2.0 * log(uniform_open(r))) * cos(2.0 * M_PI * uniform_open(r));
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = uniform_open(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
            return d * v * scale;
    }
}

static void free_entries(entry *e, int n)
{
    for (int i = 0; e && i < n; i++) {
        free(e[i].prompt);
        json_decref(e[i].messages);
    }
    free(e);
}

static entry *random_entries(const serve_opts *o, plume_rng *rng, int *n_out)
{
    int n = o->num_prompts;
    entry *e = calloc((size_t)n, sizeof *e);
    if (!e)
        return NULL;
    for (int i = 0; i < n; i++) {
        int len = uniform_int(rng, o->in_lo, o->in_hi);
        char *p = malloc((size_t)len * 9 + 1), *w = p;
        if (!p) {
            free_entries(e, i);
            return NULL;
        }
        for (int k = 0; k < len; k++) {
            const char *word = words[plume_rng_next(rng) % N_WORDS];
            w += sprintf(w, "%s%s", k ? " " : "", word);
        }
        e[i].prompt = p;
        e[i].est_tokens = len;
    }
    *n_out = n;
    return e;
}

/* About 4 characters per token: the usual figure for English under BPE. */
static int estimate_tokens(size_t chars) { return (int)((chars + 3) / 4); }

/* Reads a JSONL dataset; NULL after printing "<path>:<line>: ..." */
static entry *file_entries(const char *path, int *n_out, bool *has_messages)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, CMD ": cannot open the dataset %s: %m (give --dataset random or a JSONL "
                        "file)\n", path);
        return NULL;
    }
    entry *e = NULL;
    int n = 0, cap = 0, lineno = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    *has_messages = false;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        size_t k = 0;
        while (k < (size_t)len && (line[k] == ' ' || line[k] == '\t' || line[k] == '\n' ||
                                   line[k] == '\r'))
            k++;
        if (k == (size_t)len)
            continue;
        json_error_t jerr;
        json_t *obj = json_loadb(line, (size_t)len, 0, &jerr);
        const char *why = NULL;
        entry en = {0};
        if (!obj || !json_is_object(obj)) {
            why = obj ? "not a JSON object" : jerr.text;
        } else {
            json_t *p = json_object_get(obj, "prompt"), *m = json_object_get(obj, "messages");
            json_t *mt = json_object_get(obj, "max_tokens");
            if ((p != NULL) == (m != NULL)) {
                why = "give exactly one of \"prompt\" (a string) and \"messages\" (a list)";
            } else if (p && !json_is_string(p)) {
                why = "\"prompt\" must be a string";
            } else if (m && (!json_is_array(m) || json_array_size(m) == 0)) {
                why = "\"messages\" must be a non-empty list of {\"role\", \"content\"}";
            } else if (mt && (!json_is_integer(mt) || json_integer_value(mt) < 1 ||
                              json_integer_value(mt) > (1 << 20))) {
                why = "\"max_tokens\" must be an integer in [1, 1048576]";
            } else if (p) {
                en.prompt = strdup(json_string_value(p));
                en.est_tokens = estimate_tokens(json_string_length(p));
            } else {
                size_t i, chars = 0;
                json_t *msg;
                json_array_foreach(m, i, msg) {
                    json_t *r = json_object_get(msg, "role"), *c = json_object_get(msg, "content");
                    if (!json_is_string(r) || !json_is_string(c)) {
                        why = "each message needs a string \"role\" and a string \"content\"";
                        break;
                    }
                    chars += json_string_length(c);
                }
                en.messages = json_incref(m);
                en.est_tokens = estimate_tokens(chars);
                *has_messages = true;
            }
            if (mt && !why)
                en.max_tokens = (int)json_integer_value(mt);
        }
        json_decref(obj);
        if (!why && n == cap) {
            cap = cap ? 2 * cap : 64;
            entry *ne = realloc(e, (size_t)cap * sizeof *e);
            if (!ne)
                why = "out of memory";
            else
                e = ne;
        }
        if (why) {
            fprintf(stderr, CMD ": %s:%d: %s\n", path, lineno, why);
            free(en.prompt);
            json_decref(en.messages);
            free_entries(e, n);
            free(line);
            fclose(f);
            return NULL;
        }
        e[n++] = en;
    }
    free(line);
    fclose(f);
    if (n == 0) {
        fprintf(stderr, CMD ": the dataset %s has no lines (one JSON object per line)\n", path);
        free(e);
        return NULL;
    }
    *n_out = n;
    return e;
}

/* The request body for entry en. */
static char *make_body(const serve_opts *o, const char *model, bool chat, const entry *en,
                       int max_tokens)
{
    json_t *b = json_object();
    if (model)
        json_object_set_new(b, "model", json_string(model));
    if (chat) {
        json_t *msgs = en->messages ? json_deep_copy(en->messages) : json_array();
        if (!en->messages)
            json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "user", "content",
                                                  en->prompt));
        json_object_set_new(b, "messages", msgs);
    } else {
        json_object_set_new(b, "prompt", json_string(en->prompt));
    }
    json_object_set_new(b, "max_tokens", json_integer(max_tokens));
    json_object_set_new(b, "stream", json_true());
    json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
    if (o->ignore_eos)
        json_object_set_new(b, "ignore_eos", json_true());
    if (o->have_temperature)
        json_object_set_new(b, "temperature", json_real(o->temperature));
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

/* One SSE event of request r (http_sse_fn). */
static int on_event(void *user, const char *data, size_t len, double t, char *err,
                    size_t errsize)
{
    req *r = user;
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0)
        return 0;
    json_t *root = json_loadb(data, len, 0, NULL);
    if (!json_is_object(root)) {
        snprintf(err, errsize, "malformed SSE: a data line that is not a JSON object: %.120s",
                 data);
        json_decref(root);
        return 1;
    }
    json_t *error = json_object_get(root, "error");
    if (error && !json_is_null(error)) {
        json_t *m = json_is_object(error) ? json_object_get(error, "message") : NULL;
        char *dump = m ? NULL : json_dumps(error, JSON_COMPACT);
        snprintf(err, errsize, "the server reported an error mid-stream: %.300s",
                 m ? (json_string_value(m) ? json_string_value(m) : "?") : (dump ? dump : "?"));
        free(dump);
        json_decref(root);
        return 1;
    }
    json_t *choices = json_object_get(root, "choices");
    if (json_is_array(choices) && json_array_size(choices) > 0) {
        /* as vLLM: every chunk with choices is a token's arrival, even an
         * empty one (a chat role delta, a final finish_reason chunk) */
        json_t *c0 = json_array_get(choices, 0), *text;
        if (r->chat)
            text = json_object_get(json_object_get(c0, "delta"), "content");
        else
            text = json_object_get(c0, "text");
        if (!r->got_first) {
            r->got_first = true;
            r->t_first = t;
        } else if (!bench_vec_push(&r->itl, t - r->t_last)) {
            snprintf(err, errsize, "out of memory recording inter-token latencies");
            json_decref(root);
            return 1;
        }
        r->t_last = t;
        if (json_is_string(text) && json_string_length(text) > 0)
            r->text_chunks++;
    }
    json_t *usage = json_object_get(root, "usage");
    if (json_is_object(usage)) {
        json_t *ct = json_object_get(usage, "completion_tokens");
        json_t *pt = json_object_get(usage, "prompt_tokens");
        if (json_is_integer(ct) && json_integer_value(ct) >= 0)
            r->usage_out = (long)json_integer_value(ct);
        if (json_is_integer(pt) && json_integer_value(pt) >= 0)
            r->usage_in = (long)json_integer_value(pt);
    }
    json_decref(root);
    return 0;
}

/* The base URL without its trailing slashes and /v1; NULL (printed) when
 * it is not http(s). */
static char *base_url(const char *url)
{
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        fprintf(stderr, CMD ": --url %s is not an http:// or https:// URL (e.g. "
                        "http://127.0.0.1:8000)\n", url);
        return NULL;
    }
    char *b = strdup(url);
    size_t n = strlen(b);
    while (n > 0 && b[n - 1] == '/')
        b[--n] = '\0';
    if (n >= 3 && strcmp(b + n - 3, "/v1") == 0)
        b[n - 3] = '\0';
    return b;
}

/* The first model id of GET base/v1/models, or NULL (with a warning). */
static char *discover_model(const char *base, const char *api_key)
{
    char url[2048], err[512];
    snprintf(url, sizeof url, "%s/v1/models", base);
    char *body = http_get(url, api_key, 30, err, sizeof err);
    char *id = NULL;
    if (body) {
        json_t *root = json_loads(body, 0, NULL);
        json_t *v = json_object_get(json_array_get(json_object_get(root, "data"), 0), "id");
        if (json_is_string(v))
            id = strdup(json_string_value(v));
        else
            snprintf(err, sizeof err, "no data[0].id in its answer");
        json_decref(root);
        free(body);
    }
    if (!id)
        fprintf(stderr, CMD ": warning: could not read the model name from %s (%s); sending "
                        "requests without \"model\" (give --model NAME to set it)\n", url, err);
    return id;
}

typedef struct error_kind {
    char msg[512];
    int count;
} error_kind;

static void note_error(error_kind *kinds, int *n_kinds, int *other, const char *msg)
{
    for (int i = 0; i < *n_kinds; i++)
        if (strcmp(kinds[i].msg, msg) == 0) {
            kinds[i].count++;
            return;
        }
    if (*n_kinds < MAX_ERROR_KINDS) {
        snprintf(kinds[*n_kinds].msg, sizeof kinds[0].msg, "%s", msg);
        kinds[(*n_kinds)++].count = 1;
    } else {
        (*other)++;
    }
}

static json_t *summary_json(const bench_summary *s)
{
    if (s->n == 0)
        return json_pack("{s:n,s:n,s:n,s:n,s:i}", "mean", "p50", "p90", "p99", "n", 0);
    return json_pack("{s:f,s:f,s:f,s:f,s:I}", "mean", s->mean * 1e3, "p50", s->p50 * 1e3, "p90",
                     s->p90 * 1e3, "p99", s->p99 * 1e3, "n", (json_int_t)s->n);
}

static void summary_text(const char *title, const char *name, const bench_summary *s)
{
    int pad = (50 - (int)strlen(title) - 2) / 2;
    printf("%.*s %s %.*s\n", pad, "--------------------------", title,
           50 - pad - (int)strlen(title) - 2, "--------------------------");
    const char *lbl[4] = {"Mean", "Median", "P90", "P99"};
    double v[4] = {s->mean, s->p50, s->p90, s->p99};
    for (int i = 0; i < 4; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s %s (ms):", lbl[i], name);
        if (s->n)
            printf("%-40s %.2f\n", key, v[i] * 1e3);
        else
            printf("%-40s -\n", key);
    }
}

/* Where a token total came from: the servers' usage, the client's fallback
 * (an estimate of the prompt, the streamed chunks), or both. */
static const char *source_name(int n_usage, int n_total, const char *fallback)
{
    return n_total == 0 ? "none" : n_usage == n_total ? "usage" : n_usage == 0 ? fallback : "mixed";
}

static int run(const serve_opts *o)
{
    char err[512];
    char *base = base_url(o->url);
    if (!base)
        return 2;
    plume_rng rng;
    plume_rng_seed(&rng, o->seed);
    entry *entries;
    int n_entries = 0;
    bool has_messages = false;
    if (strcmp(o->dataset, "random") == 0) {
        entries = random_entries(o, &rng, &n_entries);
        if (!entries)
            fprintf(stderr, CMD ": out of memory building %d prompts\n", o->num_prompts);
    } else {
        entries = file_entries(o->dataset, &n_entries, &has_messages);
    }
    if (!entries) {
        free(base);
        return 1;
    }
    bool chat = o->endpoint ? strcmp(o->endpoint, "chat") == 0 : has_messages;
    if (!chat && has_messages) {
        fprintf(stderr, CMD ": %s has \"messages\" conversations, which need --endpoint chat "
                        "(the completions endpoint takes a prompt string)\n", o->dataset);
        free_entries(entries, n_entries);
        free(base);
        return 2;
    }
    if (!http_init(err, sizeof err)) {
        fprintf(stderr, CMD ": %s\n", err);
        free_entries(entries, n_entries);
        free(base);
        return 1;
    }
    char *model = o->model ? strdup(o->model) : discover_model(base, o->api_key);
    char url[2048];
    snprintf(url, sizeof url, "%s/v1/%s", base, chat ? "chat/completions" : "completions");

    /* the workload: a seeded order over the entries, then the arrival times */
    const int n = o->num_prompts;
    int *order = malloc(sizeof(int) * (size_t)n_entries);
    req *reqs = calloc((size_t)n, sizeof *reqs);
    double *arrival = calloc((size_t)n, sizeof *arrival);
    int rc = 1;
    if (!order || !reqs || !arrival) {
        fprintf(stderr, CMD ": out of memory for %d requests\n", n);
        goto out;
    }
    for (int i = 0; i < n_entries; i++)
        order[i] = i;
    for (int i = n_entries - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)(plume_rng_next(&rng) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < n; i++) {
        const entry *en = &entries[order[i % n_entries]];
        int max_tokens = en->max_tokens ? en->max_tokens : uniform_int(&rng, o->out_lo, o->out_hi);
        reqs[i].chat = chat;
        reqs[i].est_input = en->est_tokens;
        reqs[i].usage_in = reqs[i].usage_out = -1;
        reqs[i].body = make_body(o, model, chat, en, max_tokens);
        if (!reqs[i].body) {
            fprintf(stderr, CMD ": out of memory building request bodies\n");
            goto out;
        }
    }
    plume_rng arng;
    plume_rng_seed(&arng, o->seed ^ 0x9e3779b97f4a7c15ULL);
    for (int i = 1; i < n; i++)
        arrival[i] = arrival[i - 1] +
                     (o->have_rate ? gamma_variate(&arng, o->burstiness,
                                                   1.0 / (o->rate * o->burstiness))
                                   : 0.0);

    http_multi *multi = http_multi_new();
    if (!multi) {
        fprintf(stderr, CMD ": libcurl could not make a multi handle\n");
        goto out;
    }
    int next = 0, done = 0, in_flight = 0, peak = 0;
    const double t0 = plume_clock_seconds();
    while (done < n) {
        double now = plume_clock_seconds() - t0;
        while (next < n && arrival[next] <= now &&
               (o->max_concurrency == 0 || in_flight < o->max_concurrency)) {
            req *r = &reqs[next++];
            r->t_start = plume_clock_seconds();
            r->t_last = r->t_start;
            if (!http_post_sse(multi, url, o->api_key, r->body, o->timeout, on_event, r, r->err,
                               sizeof r->err)) {
                done++;
                continue;
            }
            if (++in_flight > peak)
                peak = in_flight;
        }
        int wait_ms = 100;
        if (next < n && (o->max_concurrency == 0 || in_flight < o->max_concurrency)) {
            double dt = arrival[next] - (plume_clock_seconds() - t0);
            wait_ms = dt <= 0 ? 0 : dt < 0.1 ? (int)ceil(dt * 1e3) : 100;
        }
        if (in_flight || wait_ms > 0) /* with nothing in flight: a plain sleep */
            http_multi_wait(multi, wait_ms);
        http_transfer *t;
        while ((t = http_multi_next_done(multi))) {
            req *r = http_transfer_user(t);
            const char *e = http_transfer_error(t);
            if (e) {
                snprintf(r->err, sizeof r->err, "%s", e);
            } else if (!r->got_first) {
                char snip[121];
                snprintf(snip, sizeof snip, "%s", http_transfer_snippet(t));
                for (char *c = snip; *c; c++)
                    if (*c == '\n' || *c == '\r')
                        *c = ' ';
                snprintf(r->err, sizeof r->err,
                         "the 200 answer had no SSE chunk with \"choices\" (not an "
                         "OpenAI-compatible stream?); it began: %s", snip);
            } else {
                r->ok = true;
            }
            http_transfer_free(t);
            in_flight--;
            done++;
        }
    }
    const double duration = plume_clock_seconds() - t0;
    http_multi_free(multi);

    /* the metrics, as vllm/benchmarks/serve.py computes them */
    bench_vec ttft = {0}, tpot = {0}, itl = {0}, e2el = {0};
    long total_in = 0, total_out = 0;
    int completed = 0, in_usage = 0, out_usage = 0, other = 0, n_kinds = 0;
    error_kind kinds[MAX_ERROR_KINDS];
    bool oom = false;
    for (int i = 0; i < n; i++) {
        req *r = &reqs[i];
        if (!r->ok) {
            note_error(kinds, &n_kinds, &other, r->err[0] ? r->err : "unknown error");
            continue;
        }
        completed++;
        long out = r->usage_out >= 0 ? r->usage_out : r->text_chunks;
        long in = r->usage_in >= 0 ? r->usage_in : r->est_input;
        out_usage += r->usage_out >= 0;
        in_usage += r->usage_in >= 0;
        total_out += out;
        total_in += in;
        double latency = r->t_last - r->t_start, first = r->t_first - r->t_start;
        oom |= !bench_vec_push(&ttft, first) || !bench_vec_push(&e2el, latency);
        if (out > 1)
            oom |= !bench_vec_push(&tpot, (latency - first) / (double)(out - 1));
        for (size_t k = 0; k < r->itl.n; k++)
            oom |= !bench_vec_push(&itl, r->itl.v[k]);
    }
    if (oom) {
        fprintf(stderr, CMD ": out of memory summarising the latencies\n");
    } else {
        bench_summary s_ttft = bench_summarize(&ttft), s_tpot = bench_summarize(&tpot);
        bench_summary s_itl = bench_summarize(&itl), s_e2el = bench_summarize(&e2el);
        const int failed = n - completed;
        if (o->json) {
            json_t *errs = json_array();
            for (int i = 0; i < n_kinds; i++)
                json_array_append_new(errs, json_pack("{s:s,s:i}", "message", kinds[i].msg,
                                                      "count", kinds[i].count));
            if (other)
                json_array_append_new(errs, json_pack("{s:s,s:i}", "message", "other errors",
                                                      "count", other));
            json_t *root = json_pack(
                "{s:s,s:s,s:o,s:s,s:i,s:o,s:f,s:o,s:i,s:i,s:f,s:I,s:I,s:s,s:s,s:f,s:f,s:f,"
                "s:i}",
                "url", url, "endpoint", chat ? "chat" : "completions", "model",
                model ? json_string(model) : json_null(), "dataset", o->dataset, "num_prompts",
                n, "request_rate",
                o->have_rate && isfinite(o->rate) ? json_real(o->rate) : json_null(),
                "burstiness", o->burstiness, "max_concurrency",
                o->max_concurrency ? json_integer(o->max_concurrency) : json_null(),
                "completed", completed, "failed", failed, "duration_s", duration,
                "total_input_tokens", (json_int_t)total_in, "total_output_tokens",
                (json_int_t)total_out, "input_tokens_from", source_name(in_usage, completed, "estimate"),
                "output_tokens_from", source_name(out_usage, completed, "chunks"), "request_throughput",
                completed / duration, "output_throughput", (double)total_out / duration,
                "total_token_throughput", (double)(total_in + total_out) / duration,
                "peak_concurrency", peak);
            json_object_set_new(root, "ttft_ms", summary_json(&s_ttft));
            json_object_set_new(root, "tpot_ms", summary_json(&s_tpot));
            json_object_set_new(root, "itl_ms", summary_json(&s_itl));
            json_object_set_new(root, "e2el_ms", summary_json(&s_e2el));
            json_object_set_new(root, "errors", errs);
            char *s = json_dumps(root, JSON_COMPACT);
            puts(s);
            free(s);
            json_decref(root);
        } else {
            char rate[64], conc[32];
            if (o->have_rate && isfinite(o->rate))
                snprintf(rate, sizeof rate, "%g (burstiness %g)", o->rate, o->burstiness);
            else
                snprintf(rate, sizeof rate, "inf");
            if (o->max_concurrency)
                snprintf(conc, sizeof conc, "%d", o->max_concurrency);
            else
                snprintf(conc, sizeof conc, "none");
            printf("============ Serving Benchmark Result ============\n");
            printf("%-40s %s\n", "Endpoint:", url);
            printf("%-40s %s\n", "Request rate (req/s):", rate);
            printf("%-40s %s\n", "Max concurrency:", conc);
            printf("%-40s %d\n", "Successful requests:", completed);
            printf("%-40s %d\n", "Failed requests:", failed);
            printf("%-40s %.2f\n", "Benchmark duration (s):", duration);
            printf("%-40s %ld (%s)\n", "Total input tokens:", total_in,
                   source_name(in_usage, completed, "estimate"));
            printf("%-40s %ld (%s)\n", "Total generated tokens:", total_out,
                   source_name(out_usage, completed, "streamed chunks"));
            printf("%-40s %.2f\n", "Request throughput (req/s):", completed / duration);
            printf("%-40s %.2f\n", "Output token throughput (tok/s):", total_out / duration);
            printf("%-40s %.2f\n", "Total token throughput (tok/s):",
                   (double)(total_in + total_out) / duration);
            printf("%-40s %d\n", "Peak concurrent requests:", peak);
            summary_text("Time to First Token", "TTFT", &s_ttft);
            summary_text("Time per Output Token (excl. 1st token)", "TPOT", &s_tpot);
            summary_text("Inter-token Latency", "ITL", &s_itl);
            summary_text("End-to-end Latency", "E2EL", &s_e2el);
            if (n_kinds) {
                printf("--------------------- Errors ---------------------\n");
                for (int i = 0; i < n_kinds; i++)
                    printf("%5d x %s\n", kinds[i].count, kinds[i].msg);
                if (other)
                    printf("%5d x other errors\n", other);
            }
            printf("==================================================\n");
        }
        if (completed == 0) {
            fprintf(stderr, CMD ": all %d requests to %s failed (%s); check that an "
                            "OpenAI-compatible server is listening there and accepts the "
                            "request\n", n, url, n_kinds ? kinds[0].msg : "?");
        } else {
            if (failed)
                fprintf(stderr, CMD ": %d of %d requests failed; the first error: %s\n", failed,
                        n, kinds[0].msg);
            rc = 0;
        }
    }
    bench_vec_free(&ttft);
    bench_vec_free(&tpot);
    bench_vec_free(&itl);
    bench_vec_free(&e2el);
out:
    for (int i = 0; reqs && i < n; i++) {
        free(reqs[i].body);
        bench_vec_free(&reqs[i].itl);
    }
    free(reqs);
    free(arrival);
    free(order);
    free(model);
    free_entries(entries, n_entries);
    free(base);
    http_cleanup();
    return rc;
}

int bench_serve(int argc, char **argv)
{
    serve_opts o = {.in_lo = 128, .in_hi = 128, .out_lo = 128, .out_hi = 128,
                    .burstiness = 1.0, .timeout = 600};
    o.api_key = getenv("OPENAI_API_KEY");
    if (o.api_key && !*o.api_key)
        o.api_key = NULL;
    bool have_conc = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        cli_exit_if_help(argv, i, help);
        if (cli_opt(argc, argv, &i, "--url", &v)) {
            o.url = v;
        } else if (cli_opt(argc, argv, &i, "--model", &v)) {
            o.model = v;
        } else if (cli_opt(argc, argv, &i, "--dataset", &v)) {
            o.dataset = v;
        } else if (cli_opt(argc, argv, &i, "--input-len", &v)) {
            cli_range("bench serve", "--input-len", v, &o.in_lo, &o.in_hi);
        } else if (cli_opt(argc, argv, &i, "--output-len", &v)) {
            cli_range("bench serve", "--output-len", v, &o.out_lo, &o.out_hi);
        } else if (cli_opt(argc, argv, &i, "--num-prompts", &v)) {
            o.num_prompts = (int)cli_int("--num-prompts", v, 1, 10000000);
        } else if (cli_opt(argc, argv, &i, "--request-rate", &v)) {
            o.have_rate = true;
            o.rate = strcmp(v, "inf") == 0 ? INFINITY : cli_float("--request-rate", v, 1e-6, 1e9);
        } else if (cli_opt(argc, argv, &i, "--burstiness", &v)) {
            o.burstiness = cli_float("--burstiness", v, 1e-3, 1e3);
        } else if (cli_opt(argc, argv, &i, "--max-concurrency", &v)) {
            o.max_concurrency = (int)cli_int("--max-concurrency", v, 1, 100000);
            have_conc = true;
        } else if (cli_opt(argc, argv, &i, "--endpoint", &v)) {
            if (strcmp(v, "completions") != 0 && strcmp(v, "chat") != 0) {
                fprintf(stderr, CMD ": --endpoint is completions or chat, got '%s'\n", v);
                return 2;
            }
            o.endpoint = v;
        } else if (cli_opt(argc, argv, &i, "--api-key", &v)) {
            o.api_key = v;
        } else if (cli_opt(argc, argv, &i, "--temperature", &v)) {
            o.temperature = cli_float("--temperature", v, 0, 100);
            o.have_temperature = true;
        } else if (cli_opt(argc, argv, &i, "--timeout", &v)) {
            o.timeout = cli_float("--timeout", v, 0, 1e7);
        } else if (cli_opt(argc, argv, &i, "--seed", &v)) {
            o.seed = (uint64_t)cli_int("--seed", v, 0, INT64_MAX);
        } else if (cli_flag(argv, i, "--ignore-eos")) {
            o.ignore_eos = true;
        } else if (cli_flag(argv, i, "--json")) {
            o.json = true;
        } else {
            cli_unknown("bench serve", argv[i]);
        }
    }
    const char *missing = !o.url ? "--url URL (the server, e.g. http://127.0.0.1:8000)"
                          : !o.dataset ? "--dataset random|FILE"
                          : !o.num_prompts ? "--num-prompts N"
                          : (!o.have_rate && !have_conc)
                              ? "--request-rate R (Poisson arrivals; inf: all at once) or "
                                "--max-concurrency C"
                              : NULL;
    if (missing) {
        fprintf(stderr, CMD ": give %s (see " CMD " --help)\n", missing);
        return 2;
    }
    if (o.have_rate && !isfinite(o.rate))
        o.have_rate = false; /* inf: every arrival at 0 */
    if (o.api_key && strpbrk(o.api_key, "\r\n")) {
        fprintf(stderr, CMD ": the API key has a line break in it\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    return run(&o);
}
