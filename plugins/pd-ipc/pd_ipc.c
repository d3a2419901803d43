/* pd-ipc: the kv connector vtable (plume/kv_connector.h) and its settings:
 *   transport: memfd (default: one machine) | ucx (across machines; only in
 *              a build with UCX); the same in both workers
 *   socket:    memfd, prefill: the Unix socket path it listens on (required)
 *   address:   ucx, prefill: HOST:PORT it listens on and gives decode
 *              workers (required; PORT 0 picks a free port)
 *              (decode workers take neither: each request names its
 *              prefill worker)
 *   timeout_s: every wait of a transfer, and how long a prefill worker
 *              keeps a segment nobody claimed (default 30)
 *   log_transfers: decode: log each transfer's bytes, fetch and copy times
 *              to stderr (default false)
 *   read_in_place: ucx, prefill: decode workers read a prompt's KV from its
 *              blocks in the pool, which stay held until then (default
 *              true, where the pool is host memory); false: it is copied
 *              out at once and the blocks are freed */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pd_ipc.h"
#include "plume/clock.h"
#include "plume/plugin.h"

int pd_push_id(int64_t **a, int32_t *n, int32_t *cap, int64_t v)
{
    if (*n == *cap) {
        int32_t nc = *cap ? 2 * *cap : 16;
        int64_t *g = realloc(*a, sizeof *g * (size_t)nc);
        if (!g)
            return -1;
        *a = g;
        *cap = nc;
    }
    (*a)[(*n)++] = v;
    return 0;
}

bool pd_stopping(plume_kv_connector *c)
{
    pthread_mutex_lock(&c->mu);
    bool stop = c->stopping;
    pthread_mutex_unlock(&c->mu);
    return stop;
}

static const char *const keys[] = {"transport", "socket", "address", "timeout_s",
                                   "log_transfers", "read_in_place"};
static const char *const transports[] = {"memfd", "ucx"};

/* The settings, checked: *tp the transport, *where its socket or address
 * (NULL when absent). */
static int ipc_settings(const plume_settings *s, const pd_transport **tp, const char **where,
                        double *t, bool *log, bool *in_place, plume_error *err)
{
    size_t which = 0;
    const char *path = NULL, *addr = NULL;
    *t = 30;
    *log = false;
    *in_place = true;
    *tp = &pd_memfd_transport;
    *where = NULL;
    if (!s)
        return 0;
    if (plume_settings_check_keys(s, keys, sizeof keys / sizeof *keys, err) ||
        plume_settings_choice(s, "transport", transports, 2, 0, &which, err) ||
        plume_settings_float(s, "timeout_s", 30, 0.1, 3600, t, err) ||
        plume_settings_bool(s, "log_transfers", false, log, err) ||
        plume_settings_bool(s, "read_in_place", true, in_place, err) ||
        plume_settings_string(s, "socket", NULL, &path, err) ||
        plume_settings_string(s, "address", NULL, &addr, err))
        return -1;
    if (which == 0 && addr)
        return plume_err(err, PLUME_ERR_INVALID,
                         "kv_connector.address is for transport: ucx; the memfd transport "
                         "listens on kv_connector.socket (a Unix socket path)");
    if (which == 0 && plume_settings_has(s, "read_in_place"))
        return plume_err(err, PLUME_ERR_INVALID,
                         "kv_connector.read_in_place is for transport: ucx; the memfd transport "
                         "always copies a prompt's KV into its segment");
    if (which == 1 && path)
        return plume_err(err, PLUME_ERR_INVALID,
                         "kv_connector.socket is for transport: memfd; the ucx transport "
                         "listens on kv_connector.address (HOST:PORT)");
    if (which == 1) {
#ifdef PD_HAVE_UCX
        *tp = &pd_ucx_transport;
#else
        return plume_err(err, PLUME_ERR_INVALID,
                         "kv_connector.transport: ucx, but this build of the pd-ipc plugin has "
                         "no UCX transport (UCX was not found when it was built); install "
                         "libucx-dev (scripts/install-deps) and rebuild, or use transport: memfd "
                         "on one machine");
#endif
    }
    *where = which == 0 ? path : addr;
    if (*where && strlen(*where) + sizeof PD_UCX_SCHEME >= PLUME_KV_XFER_ADDR_MAX)
        return plume_err(err, PLUME_ERR_INVALID, "kv_connector.%s is too long",
                         which == 0 ? "socket" : "address");
    return 0;
}

static int ipc_validate(const plume_settings *s, plume_error *err)
{
    const pd_transport *tp;
    const char *where;
    double t;
    bool log, in_place;
    return ipc_settings(s, &tp, &where, &t, &log, &in_place, err);
}

static int ipc_create(const plume_settings *s, plume_kv_role role, plume_kv_connector **out,
                      plume_error *err)
{
    const pd_transport *tp;
    const char *where;
    double t;
    bool log, in_place;
    if (ipc_settings(s, &tp, &where, &t, &log, &in_place, err))
        return -1;
    bool ucx = tp != &pd_memfd_transport;
    if (role == PLUME_KV_PRODUCER && (!where || !*where))
        return plume_err(err, PLUME_ERR_INVALID,
                         ucx ? "a prefill worker on the ucx transport needs kv_connector.address: "
                               "HOST:PORT its decode workers connect to (e.g. 10.0.0.5:13337)"
                             : "a prefill worker needs kv_connector.socket: the Unix socket path "
                               "its decode workers connect to (e.g. /tmp/plume-pd.sock)");
    plume_kv_connector *c = calloc(1, sizeof *c);
    if (!c)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    c->role = role;
    c->tp = tp;
    c->timeout_s = t;
    c->log_transfers = log;
    c->read_in_place = in_place;
    c->listen_fd = -1;
    if (where)
        snprintf(ucx ? c->address : c->sock_path, sizeof c->address, "%s", where);
    /* transfer ids: unique per process start, so a restarted prefill worker
     * never answers for its predecessor's requests */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(c->nonce, sizeof c->nonce, "%x-%llx", (unsigned)getpid(),
             (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    *out = c;
    return 0;
}

static void ipc_destroy(plume_kv_connector *c)
{
    if (!c)
        return;
    if (c->role == PLUME_KV_PRODUCER)
        pd_producer_stop(c);
    else
        pd_consumer_stop(c);
    for (int32_t i = 0; i < c->n_failed; i++)
        free(c->failed_msg[i]);
    for (int32_t i = 0; i < c->out_cap && c->out_failed_msg; i++)
        free(c->out_failed_msg[i]);
    free(c->sent);
    free(c->received);
    free(c->failed);
    free(c->failed_msg);
    free(c->out_sent);
    free(c->out_received);
    free(c->out_failed);
    free(c->out_failed_msg);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

static int ipc_register_kv(plume_kv_connector *c, const plume_kv_layout *kv, plume_error *err)
{
    if (c->registered)
        return plume_err(err, PLUME_ERR_INVALID, "the KV pool is already registered");
    c->kv = *kv;
    c->ident = pd_ident_of(kv);
    c->registered = true;
    return c->role == PLUME_KV_PRODUCER ? pd_producer_start(c, err) : pd_consumer_start(c, err);
}

static int ipc_start_load(plume_kv_connector *c, const plume_kv_step_meta *meta, plume_error *err)
{
    return c->role == PLUME_KV_CONSUMER ? pd_consumer_load(c, meta, err) : 0;
}

static int ipc_save(plume_kv_connector *c, const plume_kv_step_meta *meta, plume_error *err)
{
    return c->role == PLUME_KV_PRODUCER ? pd_producer_save(c, meta, err) : 0;
}

/* Moves the pending lists into the out_ storage handed to the engine. */
static void ipc_get_finished(plume_kv_connector *c, plume_kv_finished *out)
{
    pthread_mutex_lock(&c->mu);
    for (int32_t i = 0; i < c->out_cap && c->out_failed_msg; i++) {
        free(c->out_failed_msg[i]);
        c->out_failed_msg[i] = NULL;
    }
    int32_t need = c->n_sent > c->n_received ? c->n_sent : c->n_received;
    if (c->n_failed > need)
        need = c->n_failed;
    if (need > c->out_cap) {
        int64_t *a = realloc(c->out_sent, sizeof *a * (size_t)need);
        if (a)
            c->out_sent = a;
        int64_t *b = realloc(c->out_received, sizeof *b * (size_t)need);
        if (b)
            c->out_received = b;
        int64_t *d = realloc(c->out_failed, sizeof *d * (size_t)need);
        if (d)
            c->out_failed = d;
        char **m = realloc(c->out_failed_msg, sizeof *m * (size_t)need);
        if (m) {
            c->out_failed_msg = m;
            for (int32_t i = c->out_cap; i < need; i++)
                m[i] = NULL;
        }
        if (!a || !b || !d || !m) { /* report nothing now; the lists stay for the next call */
            pthread_mutex_unlock(&c->mu);
            memset(out, 0, sizeof *out);
            return;
        }
        c->out_cap = need;
    }
    if (c->n_sent) /* (the lists stay NULL until their first id) */
        memcpy(c->out_sent, c->sent, sizeof *c->sent * (size_t)c->n_sent);
    if (c->n_received)
        memcpy(c->out_received, c->received, sizeof *c->received * (size_t)c->n_received);
    if (c->n_failed)
        memcpy(c->out_failed, c->failed, sizeof *c->failed * (size_t)c->n_failed);
    for (int32_t i = 0; i < c->n_failed; i++)
        c->out_failed_msg[i] = c->failed_msg[i]; /* ownership moves */
    *out = (plume_kv_finished){c->out_sent,     c->n_sent,
                               c->out_received, c->n_received,
                               c->out_failed,   (const char *const *)c->out_failed_msg,
                               c->n_failed};
    c->n_sent = c->n_received = c->n_failed = 0;
    pthread_mutex_unlock(&c->mu);
}

static int32_t ipc_n_remote_tokens(plume_kv_connector *c, int64_t req_id,
                                   const plume_kv_transfer_params *xp, int32_t n_prompt)
{
    (void)req_id;
    /* the prefill worker computed the whole prompt */
    return c->role == PLUME_KV_CONSUMER && xp->do_remote_prefill ? n_prompt : 0;
}

static int ipc_update_after_alloc(plume_kv_connector *c, int64_t req_id,
                                  const plume_kv_transfer_params *xp, int32_t n_tokens,
                                  plume_error *err)
{
    return pd_consumer_enqueue(c, req_id, xp, n_tokens, err);
}

static int ipc_request_finished(plume_kv_connector *c, int64_t req_id,
                                const plume_kv_transfer_params *xp, bool done,
                                plume_kv_transfer_params *out)
{
    if (c->role == PLUME_KV_CONSUMER) {
        pd_consumer_cancel(c, req_id);
        return 0;
    }
    if (!xp->do_remote_decode || !done)
        return 0;
    memset(out, 0, sizeof *out);
    out->do_remote_prefill = true;
    snprintf(out->transfer_id, sizeof out->transfer_id, "%s-%lld", c->nonce, (long long)req_id);
    snprintf(out->remote_addr, sizeof out->remote_addr, "%s", c->advertised);
    return 1;
}

static void ipc_stats(plume_kv_connector *c, plume_kv_connector_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}

static const plume_kv_connector_vtable ipc_vt = {
    .struct_size = sizeof(plume_kv_connector_vtable),
    .interface_version = PLUME_KV_CONNECTOR_INTERFACE_VERSION,
    .name = "ipc",
    .validate = ipc_validate,
    .create = ipc_create,
    .destroy = ipc_destroy,
    .register_kv = ipc_register_kv,
    .start_load = ipc_start_load,
    .save = ipc_save,
    .get_finished = ipc_get_finished,
    .n_remote_tokens = ipc_n_remote_tokens,
    .update_after_alloc = ipc_update_after_alloc,
    .request_finished = ipc_request_finished,
    .stats = ipc_stats,
};

static int pd_ipc_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    return plume_register_kv_connector(reg, &ipc_vt);
}

PLUME_PLUGIN_DEFINE("pd-ipc", "0.1.0",
                    "prefill/decode disaggregation: KV blocks in memfd shared memory, "
                    "descriptors passed over a Unix socket (one machine), or read with UCX "
                    "RMA (across machines, transport: ucx)",
                    "Apache-2.0", pd_ipc_init)
