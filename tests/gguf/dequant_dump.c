/* Test tool for dequant_check.py: dequantizes the first rows of one tensor of
 * a GGUF file with plume and writes them to stdout as raw little-endian f32.
 * Usage: dequant_dump FILE TENSOR [MAX_ROWS] */
#include <stdio.h>
#include <stdlib.h>

#include "formats/gguf.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s FILE TENSOR [MAX_ROWS]\n", argv[0]);
        return 2;
    }
    gguf_file *f;
    plume_error err;
    if (gguf_open(argv[1], &f, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const plume_tensor *t = gguf_find_tensor(f, argv[2]);
    if (!t || !plume_dtype_supported(t->type)) {
        fprintf(stderr, "%s: no tensor '%s' of a supported type\n", argv[1], argv[2]);
        gguf_close(f);
        return 1;
    }
    int64_t rows = plume_tensor_nelements(t) / t->ne[0];
    if (argc > 3 && atoll(argv[3]) < rows)
        rows = atoll(argv[3]);
    size_t rb = plume_dtype_row_bytes(t->type, t->ne[0]);
    float *row = malloc((size_t)t->ne[0] * sizeof *row);
    int rc = row ? 0 : 1;
    for (int64_t r = 0; r < rows && rc == 0; r++) {
        plume_dequantize((plume_dtype)t->type, (const char *)t->data + r * rb, row, t->ne[0]);
        if (fwrite(row, sizeof *row, (size_t)t->ne[0], stdout) != (size_t)t->ne[0])
            rc = 1;
    }
    free(row);
    gguf_close(f);
    return rc;
}
