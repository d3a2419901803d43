/* libFuzzer target for the pipeline parser: any bytes must give either a
 * pipeline or one error message, never a crash, leak or hang.  The model
 * path is not looked at and the registry has no search path, so no file
 * outside the input is touched. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "plume/pipeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static plume_registry *reg;
    plume_error err = {0};
    if (!reg && plume_registry_create(&reg, &err))
        return 0;
    plume_pipeline *p = NULL;
    if (plume_pipeline_parse(reg, (const char *)data, size, "fuzz.yaml", NULL, false, &p, &err) == 0) {
        FILE *f = fopen("/dev/null", "w");
        if (f) {
            plume_pipeline_print(p, f);
            fclose(f);
        }
        plume_pipeline_free(p);
    } else if (!err.msg[0] || strchr(err.msg, '\n')) {
        __builtin_trap(); /* every failure is exactly one line */
    }
    return 0;
}
