/* tokenize_tool MODEL [--special] [--bos] [--hex] [--config tokenizer_config.json]
 *
 * MODEL is a .gguf file or an HF tokenizer.json.  Reads one JSON string per
 * line on stdin and writes one line per input:
 *   {"ids": [...], "text": "<detokenized ids>"}
 * --special parses special-token texts (and renders them when decoding);
 * --bos adds BOS; --hex reads each string as hex digits of the bytes to
 * encode (so that the input may be any bytes, invalid UTF-8 included).
 * Used by compare_hf.py. */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "plume/tokenizer.h"
#include "tokenizer/gguf_vocab.h"

/* Decodes the hex digits of s (n of them) into out; false when s is not
 * an even number of hex digits. */
static bool unhex(const char *s, size_t n, char *out)
{
    if (n % 2)
        return false;
    for (size_t i = 0; i < n; i += 2) {
        unsigned v;
        char pair[3] = {s[i], s[i + 1], '\0'};
        char *end;
        v = (unsigned)strtoul(pair, &end, 16);
        if (*end || !isxdigit((unsigned char)s[i]) || !isxdigit((unsigned char)s[i + 1]))
            return false;
        out[i / 2] = (char)v;
    }
    return true;
}

static int usage(void)
{
    fprintf(stderr, "usage: tokenize_tool MODEL.gguf|tokenizer.json [--special] [--bos] [--hex] "
                    "[--config tokenizer_config.json] < lines of JSON strings\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    bool special = false, bos = false, hex = false;
    const char *config = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--special") == 0)
            special = true;
        else if (strcmp(argv[i], "--bos") == 0)
            bos = true;
        else if (strcmp(argv[i], "--hex") == 0)
            hex = true;
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
        const char *src = json_string_value(in);
        size_t src_len = json_string_length(in);
        char *bytes = NULL;
        if (hex) {
            bytes = malloc(src_len / 2 + 1);
            if (!bytes || !unhex(src, src_len, bytes)) {
                fprintf(stderr, "tokenize_tool: --hex input line is not hex digits\n");
                free(bytes);
                json_decref(in);
                status = 1;
                break;
            }
            src = bytes;
            src_len /= 2;
        }
        int32_t *ids = NULL;
        size_t nids = 0;
        char *text = NULL;
        int trc = plume_tokenize(t, src, src_len, bos, special, &ids, &nids, &err);
        free(bytes);
        if (trc != 0 ||
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
