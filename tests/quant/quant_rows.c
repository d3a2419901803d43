/* Test driver: quantizes rows of float32 with plume's GGUF reference
 * quantizers (core/src/quant/gguf_quant.h).
 *
 *     quant_rows TYPE_ID N_PER_ROW IN.f32 OUT.bin
 *
 * IN.f32 holds rows of N_PER_ROW little-endian floats; OUT.bin receives the
 * block bytes of every row.  Exit 0 on success, 2 on bad arguments. */
#include <stdio.h>
#include <stdlib.h>

#include "plume/tensor.h"
#include "quant/gguf_quant.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: quant_rows TYPE_ID N_PER_ROW IN.f32 OUT.bin\n");
        return 2;
    }
    uint32_t type = (uint32_t)atoi(argv[1]);
    int64_t n = atoll(argv[2]);
    size_t rb = plume_dtype_row_bytes(type, n);
    if (!gguf_quant_supported(type) || !rb) {
        fprintf(stderr, "quant_rows: type %u cannot take rows of %lld\n", type, (long long)n);
        return 2;
    }
    FILE *f = fopen(argv[3], "rb");
    if (!f || fseek(f, 0, SEEK_END)) {
        fprintf(stderr, "quant_rows: cannot read %s\n", argv[3]);
        return 2;
    }
    long sz = ftell(f);
    rewind(f);
    int64_t rows = sz / (long)(4 * n);
    float *x = malloc((size_t)sz + 1);
    uint8_t *y = malloc(rb * (size_t)rows + 1);
    if (!x || !y || fread(x, 1, (size_t)sz, f) != (size_t)sz)
        return 2;
    fclose(f);
    size_t w = gguf_quantize_rows(type, x, y, rows, n);
    FILE *o = fopen(argv[4], "wb");
    if (!o || fwrite(y, 1, w, o) != w || fclose(o))
        return 2;
    free(x);
    free(y);
    return 0;
}
