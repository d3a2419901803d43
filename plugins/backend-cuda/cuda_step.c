/* backend-cuda: packing a step's metadata (cuda_step.h). */
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
