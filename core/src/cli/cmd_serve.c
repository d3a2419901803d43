/* plume serve: an OpenAI-compatible HTTP server on the engine
 * (docs/serving.md).  The pieces live in core/src/serve/: http.c (routing,
 * libmicrohttpd), openai_api.c (bodies), engine_loop.c (the engine thread
 * and the request channels), sse.c (streaming), metrics.c (/metrics). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/engine_args.h"
#include "cli/pipeline_args.h"
#include "plume/engine.h"
#include "plume/structured_request.h"
#include "plume/model.h"
#include "plume/pipeline.h"
#include "serve/engine_loop.h"
#include "serve/http.h"
#include "serve/metrics.h"
#include "serve/openai_api.h"

static const char help[] =
    "usage: plume serve (--model PATH | --pipeline FILE) [--host 127.0.0.1] [--port 8000]\n"
    "                   [--api-key KEY] [--max-queue N] [options]\n"
    "\n"
    "Serves the model over HTTP with the OpenAI API: POST /v1/completions,\n"
    "/v1/chat/completions (both also streamed as server-sent events), /tokenize,\n"
    "/detokenize; GET /v1/models, /health, /metrics (Prometheus).  One engine thread\n"
    "batches every request continuously.  Prints \"plume serve: listening on\n"
    "http://HOST:PORT\" once it accepts connections.  SIGINT or SIGTERM stops\n"
    "accepting, lets the requests in flight finish and exits 0; a second signal\n"
    "aborts them.  docs/serving.md has every endpoint and field.\n"
    "\n"
    "model and providers:\n"
    CLI_PIPELINE_HELP
    "\n"
    "server:\n"
    "  --host ADDR           the address to bind, IPv4 or IPv6 (default 127.0.0.1: this\n"
    "                        machine only; 0.0.0.0 for every interface)\n"
    "  --port N              the TCP port (default 8000; 0 picks a free port)\n"
    "  --api-key KEY         require 'Authorization: Bearer KEY' on /v1/*, /tokenize and\n"
    "                        /detokenize (default: PLUME_API_KEY if set, else no key)\n"
    "  --max-queue N         requests waiting for the engine at most; more get 429\n"
    "                        (default 256)\n"
    "  --max-body BYTES      request bodies larger than this get 413 (default 4194304)\n"
    "  --served-model-name NAME  the model's name in the API (default: the model file's\n"
    "                        name without its directory)\n"
    "  --chat-template FILE  render chat requests with this Jinja template instead of the\n"
    "                        model's\n"
    "\n"
    "engine (defaults: the pipeline's kv_cache, scheduler and threads, else these):\n"
    "  --threads N           the backend's threads\n"
    "  --ctx-size N          KV cache capacity in tokens (default 16384, or the pipeline's\n"
    "                        kv_cache.max_tokens); also bounds one request's context\n"
    "  --max-num-seqs N      requests the engine runs at once (default 64); the rest wait\n"
    "                        in the server's queue\n"
    "  --kv-dtype f32|f16|int8  KV cache storage (default: the pipeline's kv_cache.dtype,\n"
    "                        else f16, half of f32's memory; f32 is exact, int8 about a\n"
    "                        quarter of f32)\n"
    "\n"
    "Request defaults: sampling fields a request leaves out take the pipeline's\n"
    "`sampling` values (the built-in default: temperature 0.8, top_k 40, top_p 0.95,\n"
    "min_p 0.05); max_tokens left out runs to the end of the context.\n";

/* What signal handling needs, and nothing else. */
static volatile sig_atomic_t g_signals;
static int g_sigpipe[2] = {-1, -1};

static void on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    g_signals = g_signals + 1;
    if (g_sigpipe[1] >= 0) {
        ssize_t w = write(g_sigpipe[1], "x", 1);
        (void)w;
    }
    errno = saved;
}

typedef struct serve_opts {
    cli_pipeline_opts po;
    const char *host, *api_key, *name, *chat_template;
    int port, max_queue, threads;
    int kv_dtype; /* -1: the pipeline's */
    long long max_body, ctx_size, max_num_seqs;
} serve_opts;

static void parse(int argc, char **argv, serve_opts *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8000;
    o->max_queue = 256;
    o->max_body = 4 << 20;
    o->kv_dtype = -1;
    o->api_key = getenv("PLUME_API_KEY");
    if (o->api_key && !o->api_key[0])
        o->api_key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        cli_exit_if_help(argv, i, help);
        if (cli_pipeline_opt("serve", argc, argv, &i, &o->po)) {
            continue;
        } else if (cli_opt(argc, argv, &i, "--host", &v)) {
            o->host = v;
        } else if (cli_opt(argc, argv, &i, "--port", &v)) {
            o->port = (int)cli_int("--port", v, 0, 65535);
        } else if (cli_opt(argc, argv, &i, "--api-key", &v)) {
            if (!v[0]) {
                fprintf(stderr, "plume serve: --api-key is empty; give a key or leave it out\n");
                exit(2);
            }
            o->api_key = v;
        } else if (cli_opt(argc, argv, &i, "--chat-template", &v)) {
            o->chat_template = v;
        } else if (cli_opt(argc, argv, &i, "--max-queue", &v)) {
            o->max_queue = (int)cli_int("--max-queue", v, 0, 1 << 20);
        } else if (cli_opt(argc, argv, &i, "--max-body", &v)) {
            o->max_body = cli_int("--max-body", v, 1024, 1LL << 30);
        } else if (cli_opt(argc, argv, &i, "--served-model-name", &v)) {
            if (!v[0] || strpbrk(v, "\"\\\n")) {
                fprintf(stderr, "plume serve: --served-model-name must be non-empty, without "
                                "quotes, backslashes or newlines\n");
                exit(2);
            }
            o->name = v;
        } else if (cli_opt(argc, argv, &i, "--threads", &v) || cli_opt(argc, argv, &i, "-t", &v)) {
            o->threads = (int)cli_int("--threads", v, 1, 1024);
        } else if (cli_opt(argc, argv, &i, "--ctx-size", &v) || cli_opt(argc, argv, &i, "-c", &v)) {
            o->ctx_size = cli_int("--ctx-size", v, 1, 1 << 30);
        } else if (cli_opt(argc, argv, &i, "--max-num-seqs", &v)) {
            o->max_num_seqs = cli_int("--max-num-seqs", v, 1, 65536);
        } else if (cli_opt(argc, argv, &i, "--kv-dtype", &v)) {
            o->kv_dtype = cli_kv_dtype("serve", v);
        } else {
            cli_unknown("serve", argv[i]);
        }
    }
    if (!o->po.model && !o->po.pipeline) {
        fprintf(stderr, "plume serve: give --model PATH or --pipeline FILE (see plume serve "
                        "--help)\n");
        exit(2);
    }
}

/* The served name: the model path's last component (a .gguf file's or a
 * directory's), with characters that would need escaping replaced. */
static void model_name(const char *path, char *out, size_t cap)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t start = n;
    while (start > 0 && path[start - 1] != '/')
        start--;
    size_t len = n - start < cap - 1 ? n - start : cap - 1;
    for (size_t i = 0; i < len; i++) {
        char ch = path[start + i];
        out[i] = (ch == '"' || ch == '\\' || (unsigned char)ch < 0x20) ? '_' : ch;
    }
    out[len] = '\0';
}

static int install_signals(void)
{
    if (pipe(g_sigpipe) != 0)
        return -1;
    for (int i = 0; i < 2; i++)
        fcntl(g_sigpipe[i], F_SETFL, fcntl(g_sigpipe[i], F_GETFL) | O_NONBLOCK);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

/* Waits up to ms for a signal; true when one came. */
static bool wait_signal(int ms)
{
    struct pollfd p = {.fd = g_sigpipe[0], .events = POLLIN};
    if (poll(&p, 1, ms) > 0) {
        char buf[16];
        while (read(g_sigpipe[0], buf, sizeof buf) > 0)
            ;
        return true;
    }
    return false;
}

int cmd_serve(int argc, char **argv)
{
    serve_opts o;
    parse(argc, argv, &o);
    plume_chat_template *tmpl = NULL;
    plume_error err = {0};
    plume_registry *reg = NULL;
    plume_pipeline *pipe_ = NULL;
    plume_model *m = NULL;
    plume_engine *e = NULL;
    serve_metrics *metrics = NULL;
    serve_loop *loop = NULL;
    serve_http *http = NULL;
    int status = 1;
    if (cli_pipeline_resolve("serve", &o.po, &reg, &pipe_))
        return 1;
    plume_engine_params ep;
    plume_pipeline_engine_params(pipe_, &ep);
    if (o.ctx_size)
        ep.kv_max_tokens = o.ctx_size;
    if (o.max_num_seqs)
        ep.max_num_seqs = (int32_t)o.max_num_seqs;
    if (o.kv_dtype >= 0)
        ep.kv_dtype = (plume_kv_dtype)o.kv_dtype;
    if (cli_engine_check_kv(&ep, &err))
        goto done;
    if (o.chat_template && plume_chat_template_load(o.chat_template, &tmpl, &err))
        goto done;
    plume_build_opts bo = {.engine = &ep, .n_threads = o.threads};
    if (plume_pipeline_build(pipe_, reg, &bo, &m, &e, &err))
        goto done;
    char name[256];
    if (o.name)
        snprintf(name, sizeof name, "%s", o.name);
    else
        model_name(plume_pipeline_model(pipe_), name, sizeof name);
    serve_api_env env = {.tok = plume_model_tokenizer(m), .model_name = name, .chat_template = tmpl,
                         .n_ctx = plume_engine_n_ctx(e)};
    plume_pipeline_sampling_params(pipe_, &env.sampling, NULL);
    /* Structured output (response_format, guided_*, tool_choice required)
     * samples through the sample-structured plugin: loaded now, while no
     * request runs, so that request threads only read the registry.  A
     * server without it still serves; such requests get a 400 saying why. */
    plume_error serr = {0};
    char structured_error[PLUME_ERROR_MSG_MAX];
    env.structured = plume_registry_find_sampler(reg, PLUME_STRUCTURED_SAMPLER);
    if (!env.structured && plume_registry_load(reg, PLUME_STRUCTURED_PLUGIN, &serr) == 0)
        env.structured = plume_registry_find_sampler(reg, PLUME_STRUCTURED_SAMPLER);
    if (!env.structured) {
        snprintf(structured_error, sizeof structured_error, "%s",
                 serr.msg[0] ? serr.msg : "the plugin registers no \"structured\" sampler");
        env.structured_error = structured_error;
    }
    metrics = serve_metrics_new();
    if (!metrics || install_signals()) {
        plume_err(&err, PLUME_ERR_NOMEM, "cannot set up the server (out of memory or file "
                  "descriptors)");
        goto done;
    }
    serve_loop_opts lo = {.engine = e, .max_queue = o.max_queue, .max_running = ep.max_num_seqs,
                          .kv_connector = ep.kv_connector != NULL,
                          .metrics = metrics};
    if (serve_loop_start(&lo, &loop)) {
        plume_err(&err, PLUME_ERR_NOMEM, "cannot start the engine thread");
        goto done;
    }
    serve_http_opts ho = {.host = o.host, .port = o.port, .api_key = o.api_key,
                          .max_body = (size_t)o.max_body, .env = &env, .loop = loop,
                          .metrics = metrics};
    int port = 0;
    char msg[512];
    if (serve_http_start(&ho, &http, &port, msg, sizeof msg)) {
        plume_err(&err, PLUME_ERR_IO, "%s", msg);
        serve_loop_stop(loop, true);
        serve_loop_join(loop);
        loop = NULL;
        goto done;
    }
    int64_t kvb = plume_engine_kv_bytes_per_token(e);
    fprintf(stderr, "plume serve: KV cache %s, %lld tokens, %lld bytes per token (%.1f MiB)\n",
            plume_kv_dtype_name(plume_engine_kv_dtype(e)), (long long)ep.kv_max_tokens,
            (long long)kvb, (double)kvb * (double)ep.kv_max_tokens / (1 << 20));
    bool v6 = strchr(o.host, ':') != NULL;
    printf("plume serve: listening on http://%s%s%s:%d (model %s)\n", v6 ? "[" : "", o.host,
           v6 ? "]" : "", port, name);
    fflush(stdout);
    while (!g_signals)
        wait_signal(1000);
    fprintf(stderr, "plume serve: stopping: no new connections; requests in flight finish "
                    "(signal again to abort them)\n");
    serve_http_quiesce(http);
    serve_loop_stop(loop, false);
    int seen = g_signals;
    while (!serve_loop_stopped(loop)) {
        wait_signal(100);
        if (g_signals > seen) {
            seen = g_signals;
            fprintf(stderr, "plume serve: aborting the requests in flight\n");
            serve_loop_stop(loop, true);
        }
    }
    serve_http_stop(http);
    http = NULL;
    serve_loop_join(loop);
    loop = NULL;
    fprintf(stderr, "plume serve: stopped\n");
    status = 0;
done:
    if (status)
        cli_print_error("serve", plume_pipeline_file(pipe_), err.msg[0] ? err.msg : "failed");
    serve_http_stop(http);
    if (loop) {
        serve_loop_stop(loop, true);
        serve_loop_join(loop);
    }
    plume_engine_free(e);
    serve_metrics_free(metrics);
    plume_model_free(m);
    plume_chat_template_free(tmpl);
    plume_pipeline_free(pipe_);
    plume_registry_free(reg);
    for (int i = 0; i < 2; i++)
        if (g_sigpipe[i] >= 0)
            close(g_sigpipe[i]);
    return status;
}
