/* libFuzzer target for the HF config.json reader.  Any bytes give either a
 * configuration that passes plume_config_validate (every size positive,
 * heads divisible, finite positive eps and theta) or one error line naming
 * the file. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_util.h"
#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("config.json", data, size);
    plume_model_config cfg;
    plume_error err = {0};
    if (plume_config_from_hf_json(path, &cfg, &err)) {
        fuzz_check_error(&err, path);
        return 0;
    }
    plume_error again = {0};
    FUZZ_CHECK(plume_config_validate(&cfg, &again) == 0, "accepted an invalid config: %s",
               again.msg);
    FUZZ_CHECK(cfg.n_embd > 0 && cfg.n_layer > 0 && cfg.n_head > 0 && cfg.n_head_kv > 0 &&
                   cfg.n_head % cfg.n_head_kv == 0 && cfg.head_dim > 0 && cfg.n_vocab > 0,
               "sizes");
    return 0;
}
