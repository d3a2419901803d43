/* libFuzzer target for one JSONL request line of `plume generate
 * --prompts-file` (cli_jsonl_parse).  Any bytes give a blank-line answer, a
 * request whose numbers lie in their documented ranges and whose strings are
 * the line's, or one error line that names the file and line. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cli/jsonl_request.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const stops[] = {"</s>", "\n\n"};
    cli_jsonl_defaults d = {.rp = plume_request_defaults(), .stop = stops, .n_stop = 2,
                            .chat = false, .system = "sys"};
    cli_jsonl_request q;
    plume_error err = {0};
    int rc = cli_jsonl_parse((const char *)data, size, "prompts.jsonl", 7, &d, &q, &err);
    if (rc < 0) {
        fuzz_check_error(&err, "prompts.jsonl:7");
        return 0;
    }
    if (rc == 1)
        return 0;
    FUZZ_CHECK(rc == 0, "rc %d", rc);
    FUZZ_CHECK(q.prompt != NULL, "no prompt");
    const plume_sampling_params *s = &q.rp.sampling;
    FUZZ_CHECK(q.rp.max_tokens >= 1 && q.rp.max_tokens <= 1 << 24, "max_tokens %d",
               q.rp.max_tokens);
    FUZZ_CHECK(s->temperature >= 0 && s->temperature <= 100, "temperature");
    FUZZ_CHECK(s->top_k >= 0 && s->top_k <= 1 << 30, "top_k");
    FUZZ_CHECK(s->top_p > 0 && s->top_p <= 1, "top_p");
    FUZZ_CHECK(s->min_p >= 0 && s->min_p < 1, "min_p");
    FUZZ_CHECK(s->repetition_penalty > 0 && s->repetition_penalty <= 100, "repeat_penalty");
    FUZZ_CHECK(q.rp.n_stop <= CLI_JSONL_MAX_STOP && q.rp.stop == q.stops, "stops");
    for (size_t i = 0; i < q.rp.n_stop; i++)
        FUZZ_CHECK(q.rp.stop[i] != NULL, "stop %zu is NULL", i);
    cli_jsonl_request_free(&q);
    return 0;
}
