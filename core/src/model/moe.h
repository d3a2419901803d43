/* The mixture-of-experts MLP of the forward pass: routing on the host,
 * then the experts grouped by expert across the step's rows. */
#ifndef PLUME_MODEL_MOE_H
#define PLUME_MODEL_MOE_H

#include "model/model_internal.h"

/* Host scratch for one step's routing, sized for max_tokens rows. */
typedef struct plume_moe_plan {
    int32_t max_tokens, n_expert, k;
    float *logits;   /* [max_tokens][n_expert] the router's output, downloaded */
    int32_t *ids;    /* [max_tokens][k] each row's experts */
    float *w;        /* [max_tokens][k] their weights */
    int32_t *count;  /* [n_expert] rows routed to each expert */
    int32_t *offset; /* [n_expert + 1] where each expert's rows start in rows/rw */
    int32_t *rows;   /* [max_tokens * k] rows grouped by expert, ascending within one */
    float *rw;       /* [max_tokens * k] the weight of each entry of rows */
    int32_t *iota;   /* [max_tokens] 0, 1, 2, ...: every row (the shared expert) */
    /* the backend's matmul_segments path (steps of at most grouped_tokens
     * rows): each expert's gate and up ([2 * n_expert], interleaved) and
     * down ([n_expert]) prepared matrices, filled per step */
    int32_t grouped_tokens;
    const plume_bweight **seg_gu, **seg_down;
} plume_moe_plan;

/* Steps of at most this many rows run a layer's experts as one job
 * (matmul_segments) when the backend has it: decode batches.  Longer
 * steps (prefill) loop over the experts, which needs no extra buffers. */
#define PLUME_MOE_GROUPED_TOKENS 64

/* Rows of the grouped path's buffers (xg, y, gate, up) for a runner of
 * max_tokens positions: min(max_tokens, PLUME_MOE_GROUPED_TOKENS) times
 * the experts per token. */
int32_t plume_moe_grouped_rows(const plume_model_config *c, int32_t max_tokens);

/* The backend buffers the MoE MLP works in, [max_tokens][...]. */
typedef struct plume_moe_bufs {
    plume_buf *logits; /* n_expert wide */
    plume_buf *xg;     /* n_embd: the rows routed to one expert (grouped path: to every
                          expert, plume_moe_grouped_rows of them) */
    plume_buf *gate, *up; /* n_ff_exp */
    plume_buf *y;      /* n_embd: one expert's output rows */
} plume_moe_bufs;

/* Allocates p for c (n_expert > 0) and max_tokens rows; 0, or -1 with err
 * (out of memory).  plume_moe_plan_free releases it (zeroed: no-op). */
int plume_moe_plan_init(plume_moe_plan *p, const plume_model_config *c, int32_t max_tokens,
                        plume_error *err);
void plume_moe_plan_free(plume_moe_plan *p);

/* Host bytes plume_moe_plan_init allocates. */
int64_t plume_moe_plan_bytes(const plume_model_config *c, int32_t max_tokens);

/* Routes n rows of router logits ([n][c->n_expert]): row r's k =
 * c->n_expert_used experts are those of highest logit (a tie goes to the
 * lower index), ids[r*k + j] in descending order of logit, and w[r*k + j]
 * their softmax probability over all experts, or, with c->moe_norm_topk,
 * over the k chosen (computed in double, rounded once).  A row's result
 * depends on its logits only. */
void plume_moe_route(const plume_model_config *c, const float *logits, int32_t n, int32_t *ids,
                     float *w);

/* x[r] += Σ over row r's experts e (ascending e) of w_e · down_e(silu(gate_e(xn[r])) ·
 * up_e(xn[r])) (gpt-oss: the clamped SwiGLU, backend op swiglu_oai, and
 * each linear's bias), then (Qwen2-MoE) + sigmoid(shared_gate · xn[r]) · shared(xn[r]),
 * for the n rows of the step: the router's logits come back
 * to the host, rows are grouped by expert, and each active expert's
 * linears run once over its rows (a step reads an active expert's weights
 * once).  Every row's bits are independent of the other rows (the backend's
 * matmul contract and the fixed order of the adds).  xn, x: [n][n_embd]. */
int plume_moe_forward(const plume_backend_vtable *B, plume_backend *b, const plume_model_config *c,
                      const plume_moe *moe, plume_moe_plan *p, const plume_moe_bufs *bufs,
                      const plume_buf *xn, plume_buf *x, int32_t n, plume_error *err);

#endif
