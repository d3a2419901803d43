/* plume router: the front of a prefill/decode split (serve/router.h,
 * docs/disaggregation.md): argument parsing, the start-up check that sends
 * one request through a prefill and a decode worker (so that workers that
 * cannot exchange KV -- another model, dtype or block size -- are an error
 * at start), and the signal loop. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "serve/http_client.h"
#include "serve/router.h"

static const char help[] =
    "usage: plume router --prefill URL [--prefill URL ...] --decode URL [--decode URL ...]\n"
    "                    [--host 127.0.0.1] [--port 8000] [--timeout SECONDS] [--api-key KEY]\n"
    "                    [--no-check]\n"
    "\n"
    "The OpenAI-compatible front of a prefill/decode split (docs/disaggregation.md).\n"
    "Each POST /v1/completions or /v1/chat/completions goes to a prefill worker (plume\n"
    "serve --pipeline configs/pd-prefill.yaml) with max_tokens 1, then to a decode\n"
    "worker (configs/pd-decode.yaml) with the kv_transfer_params the prefill worker\n"
    "returned; the decode worker's answer, streamed or not, goes to the client.\n"
    "Workers are used round robin; one that refuses connections is skipped.\n"
    "Prints \"plume router: listening on http://HOST:PORT\" once the start-up check\n"
    "passed.\n"
    "\n"
    "  --prefill URL     a prefill worker's base URL, e.g. http://127.0.0.1:8100 (repeatable)\n"
    "  --decode URL      a decode worker's base URL (repeatable)\n"
    "  --host ADDR       the address to bind (default 127.0.0.1)\n"
    "  --port N          the TCP port (default 8000; 0 picks a free port)\n"
    "  --timeout S       a worker silent this long fails the request with a clear error;\n"
    "                    also bounds a prefill call (default 60)\n"
    "  --startup-timeout S  how long the start-up check waits for workers to come up\n"
    "                    (default 120)\n"
    "  --api-key KEY     clients must send 'Authorization: Bearer KEY' on /v1/*, and the\n"
    "                    router sends it to the workers (start them with the same\n"
    "                    --api-key); default: PLUME_API_KEY if set, else none\n"
    "  --no-check        skip the start-up check (one request through both workers)\n";

#define MAX_WORKERS 64

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* One greedy request through the router itself.  0 when it worked; 1 when
 * a worker is not reachable yet (retry); -1 for any other answer (msg). */
static int check_once(int port, const char *api_key, char *msg, size_t cap)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", port);
    http_call_opts o = {5, 60, 120, api_key, NULL, 0};
    http_call *up = http_call_start(url,
                           "{\"prompt\":\"plume router start-up check: one request through "
                           "both workers\",\"max_tokens\":2,\"temperature\":0}",
                           &o);
    if (!up) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    size_t len = 0;
    const char *body = http_call_wait_body(up, &len);
    long st = http_call_wait_headers(up);
    int rc = 0;
    if (!body) {
        snprintf(msg, cap, "the router did not answer its own check: %s", http_call_error(up));
        rc = -1;
    } else if (st != 200) {
        json_t *j = json_loadb(body, len, 0, NULL);
        const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        snprintf(msg, cap, "%s", m ? m : body);
        json_decref(j);
        /* 502 with "failed: ... connect" : a worker not up yet */
        rc = st == 502 && (strstr(msg, "onnect") || strstr(msg, "refused")) ? 1 : -1;
    }
    http_call_free(up);
    return rc;
}

int cmd_router(int argc, char **argv)
{
    const char *prefill[MAX_WORKERS], *decode[MAX_WORKERS];
    router_opts o = {.host = "127.0.0.1", .port = 8000, .prefill = prefill,
                     .decode = decode, .timeout_s = 60, .max_body = 4 << 20};
    double startup = 120;
    bool check = true;
    o.api_key = getenv("PLUME_API_KEY");
    if (o.api_key && !o.api_key[0])
        o.api_key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        cli_exit_if_help(argv, i, help);
        if (cli_opt(argc, argv, &i, "--prefill", &v)) {
            if (o.n_prefill == MAX_WORKERS)
                return fprintf(stderr, "plume router: at most %d --prefill\n", MAX_WORKERS), 2;
            prefill[o.n_prefill++] = v;
        } else if (cli_opt(argc, argv, &i, "--decode", &v)) {
            if (o.n_decode == MAX_WORKERS)
                return fprintf(stderr, "plume router: at most %d --decode\n", MAX_WORKERS), 2;
            decode[o.n_decode++] = v;
        } else if (cli_opt(argc, argv, &i, "--host", &v)) {
            o.host = v;
        } else if (cli_opt(argc, argv, &i, "--port", &v)) {
            o.port = (int)cli_int("--port", v, 0, 65535);
        } else if (cli_opt(argc, argv, &i, "--timeout", &v)) {
            o.timeout_s = (double)cli_int("--timeout", v, 1, 86400);
        } else if (cli_opt(argc, argv, &i, "--startup-timeout", &v)) {
            startup = (double)cli_int("--startup-timeout", v, 0, 86400);
        } else if (cli_opt(argc, argv, &i, "--api-key", &v)) {
            if (!v[0])
                return fprintf(stderr, "plume router: --api-key is empty\n"), 2;
            o.api_key = v;
        } else if (cli_flag(argv, i, "--no-check")) {
            check = false;
        } else {
            cli_unknown("router", argv[i]);
        }
    }
    if (o.n_prefill == 0 || o.n_decode == 0) {
        fprintf(stderr, "plume router: give at least one --prefill URL and one --decode URL "
                        "(see plume router --help)\n");
        return 2;
    }
    char msg[1024];
    if (!http_init(msg, sizeof msg)) {
        fprintf(stderr, "plume router: %s\n", msg);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    router *rt = NULL;
    int port = 0;
    if (router_start(&o, &rt, &port, msg, sizeof msg)) {
        fprintf(stderr, "plume router: %s\n", msg);
        http_cleanup();
        return 1;
    }
    if (check) {
        double t0 = plume_clock_seconds();
        int rc;
        while ((rc = check_once(port, o.api_key, msg, sizeof msg)) == 1 && plume_clock_seconds() - t0 < startup &&
               !g_stop)
            usleep(300000);
        if (rc != 0) {
            fprintf(stderr,
                    "plume router: the start-up check (one request through a prefill and a "
                    "decode worker) failed: %s\n",
                    msg);
            router_stop(rt);
            http_cleanup();
            return 1;
        }
    }
    printf("plume router: listening on http://%s:%d (%d prefill, %d decode workers)\n", o.host,
           port, o.n_prefill, o.n_decode);
    fflush(stdout);
    while (!g_stop)
        poll(NULL, 0, 200);
    fprintf(stderr, "plume router: stopped\n");
    router_stop(rt);
    http_cleanup();
    return 0;
}
