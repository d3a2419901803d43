/* backend-cuda: packing the kernels' metadata (cuda_step.h). */
#include "cuda_step.h"

#include <string.h>

size_t ck_step_size(const plume_step *st)
{
    size_t tables = 0;
    for (int32_t s = 0; s < st->n_seqs; s++)
        tables += (size_t)st->seqs[s].n_table;
    return 4 * (size_t)st->n_rows + (size_t)st->n_out + tables;
}

void ck_step_pack(const plume_step *st, int32_t *h)
{
    const size_t n = (size_t)st->n_rows;
    memcpy(h, st->tokens, sizeof(int32_t) * n);
    memcpy(h + n, st->pos, sizeof(int32_t) * n);
    memcpy(h + 2 * n, st->slots, sizeof(int32_t) * n);
    int32_t *bt_off = h + 3 * n, *out_rows = h + 4 * n, *tab = out_rows + st->n_out;
    if (st->n_out)
        memcpy(out_rows, st->out_rows, sizeof(int32_t) * (size_t)st->n_out);
    int32_t off = 0;
    for (int32_t s = 0; s < st->n_seqs; s++) {
        const plume_step_seq *q = &st->seqs[s];
        memcpy(tab + off, q->block_table, sizeof(int32_t) * (size_t)q->n_table);
        for (int32_t i = 0; i < q->n; i++)
            bt_off[q->row0 + i] = off;
        off += q->n_table;
    }
}

ck_step ck_step_view(const int32_t *d, const plume_step *st)
{
    const size_t n = (size_t)st->n_rows;
    return (ck_step){d, d + n, d + 2 * n, d + 3 * n, d + 4 * n, d + 4 * n + st->n_out};
}

int32_t ck_scatter_plan(const int32_t *idx, int32_t n, int32_t *at, int32_t *row, int32_t *start,
                        int32_t *list)
{
    int32_t n_u = 0;
    for (int32_t i = 0; i < n; i++) /* counts, and the rows in first-use order */
        if (at[idx[i]]++ == 0)
            row[n_u++] = idx[i];
    start[0] = 0;
    for (int32_t u = 0; u < n_u; u++) {
        start[u + 1] = start[u] + at[row[u]];
        at[row[u]] = start[u]; /* from here: the next free slot of row[u]'s list */
    }
    for (int32_t i = 0; i < n; i++)
        list[at[idx[i]]++] = i;
    return n_u;
}

int32_t ck_seg_plan(const int32_t *off, int32_t n_seg, ck_seg_task *tasks, int32_t *n_act)
{
    int32_t a = 0, t = 0;
    for (int32_t s = 0; s < n_seg; s++) {
        if (off[s + 1] <= off[s])
            continue;
        for (int32_t r = off[s]; r < off[s + 1]; r += CK_GEMV_ROWS, t++)
            if (tasks)
                tasks[t] = (ck_seg_task){a, r,
                                         off[s + 1] - r < CK_GEMV_ROWS ? off[s + 1] - r
                                                                       : CK_GEMV_ROWS};
        a++;
    }
    *n_act = a;
    return t;
}
