/* tokenize_tool MODEL [--special] [--bos] [--config tokenizer_config.json]
 *
 * MODEL is a .gguf file or an HF tokenizer.json.  Reads one JSON string per
 * line on stdin and writes one line per input:
 *   {"ids": [...], "text": "<detokenized ids>"}
 * --special parses special-token texts (and renders them when decoding);
 * --bos adds BOS.  Used by compare_hf.py. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "plume/tokenizer.h"

static int usage(void)
{
    fprintf(stderr, "usage: tokenize_tool MODEL.gguf|tokenizer.json [--special] [--bos] "
                    "[--config tokenizer_config.json] < lines of JSON strings\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    bool special = false, bos = false;
    const char *config = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--special") == 0)
            special = true;
        else if (strcmp(argv[i], "--bos") == 0)
            bos = true;
        else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config = argv[++i];
        else
            return usage();
    }
    plume_error err = {0};
    plume_tokenizer *t = NULL;
    gguf_file *f = NULL;
    size_t plen = strlen(argv[1]);
    int rc;
    if (plen > 5 && strcmp(argv[1] + plen - 5, ".gguf") == 0) {
        rc = gguf_open(argv[1], &f, &err);
        if (rc == 0)
            rc = plume_tokenizer_from_gguf(f, &t, &err);
    } else {
        rc = plume_tokenizer_from_hf(argv[1], config, &t, &err);
    }
    if (rc != 0) {
        fprintf(stderr, "tokenize_tool: %s\n", err.msg);
        gguf_close(f);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int status = 0;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        json_error_t je;
        json_t *in = json_loadb(line, (size_t)n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!json_is_string(in)) {
            fprintf(stderr, "tokenize_tool: input line is not a JSON string: %s\n", je.text);
            json_decref(in);
            status = 1;
            break;
        }
        int32_t *ids = NULL;
        size_t nids = 0;
        char *text = NULL;
        if (plume_tokenize(t, json_string_value(in), json_string_length(in), bos, special, &ids,
                           &nids, &err) != 0 ||
            plume_detokenize(t, ids, nids, special, &text, &err) != 0) {
            fprintf(stderr, "tokenize_tool: %s\n", err.msg);
            free(ids);
            json_decref(in);
            status = 1;
            break;
        }
        json_t *arr = json_array();
        for (size_t i = 0; i < nids; i++)
            json_array_append_new(arr, json_integer(ids[i]));
        json_t *out = json_pack("{s:o, s:s%}", "ids", arr, "text", text, strlen(text));
        char *s = json_dumps(out, JSON_COMPACT | JSON_ENSURE_ASCII);
        printf("%s\n", s);
        fflush(stdout);
        free(s);
        json_decref(out);
        json_decref(in);
        free(ids);
        free(text);
    }
    free(line);
    plume_tokenizer_free(t);
    gguf_close(f);
    return status;
}
