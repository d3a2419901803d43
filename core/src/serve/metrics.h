/* plume serve: the /metrics counters, gauges and histograms (Prometheus
 * text exposition format), shared by the engine thread (which records) and
 * the HTTP threads (which render); one mutex guards them. */
#ifndef PLUME_SERVE_METRICS_H
#define PLUME_SERVE_METRICS_H

#include "serve/serve_api.h"

#include <stdbool.h>
#include <stdint.h>

#include "plume/engine.h"

typedef struct serve_metrics serve_metrics;

/* What the engine thread reads from the engine after each step. */
typedef struct serve_engine_gauges {
    int32_t running, waiting;
    bool have_kv;                    /* plume_engine_get_load available */
    int32_t kv_blocks_total, kv_blocks_used;
    bool have_prefix;
    int64_t prefix_queries, prefix_hits;
    int64_t spec_drafted, spec_accepted;
    bool have_kv_connector;          /* prefill/decode disaggregation */
    int32_t kv_waiting_remote, kv_blocks_deferred;
    plume_kv_connector_stats kvc;
} serve_engine_gauges;

PLUME_SERVE_API serve_metrics *serve_metrics_new(void);
PLUME_SERVE_API void serve_metrics_free(serve_metrics *m);
void serve_metrics_observe_ttft(serve_metrics *m, double seconds);
void serve_metrics_observe_itl(serve_metrics *m, double seconds);
/* A request the engine finished: its reason and token counts (prompt tokens
 * and the prompt tokens the prefix cache served count as prefix-cache
 * queries and hits until the engine reports its own). */
void serve_metrics_request_done(serve_metrics *m, plume_finish_reason why, int64_t n_prompt,
                                int64_t n_output, int64_t n_cached);
/* Requests the server refused before the engine saw them, by status. */
void serve_metrics_http_error(serve_metrics *m, int status);
void serve_metrics_set_engine(serve_metrics *m, const serve_engine_gauges *g);
/* The exposition text (malloc'd), model_name labels nothing but the info line. */
char *serve_metrics_render(serve_metrics *m, const char *model_name);

#endif
