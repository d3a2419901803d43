/* plume tokenize MODEL TEXT */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "plume/model.h"

static const char usage[] =
    "usage: plume tokenize MODEL TEXT [options]\n"
    "\n"
    "Prints the token ids of TEXT, space-separated, on one line.\n"
    "\n"
    "options:\n";

int cmd_tokenize(int argc, char **argv)
{
    const char *pos[2] = {0};
    bool no_bos = false, no_special = false, pieces = false, as_json = false;
    const cli_option opts[] = {
        CLI_OPT_FLAG("--no-bos", &no_bos,
                     "do not prepend the BOS token (by default it is added when the\n"
                     "model's tokenizer says so: tokenizer.ggml.add_bos_token)"),
        CLI_OPT_FLAG("--no-special", &no_special,
                     "treat special-token texts such as <|im_start|> as plain text"),
        CLI_OPT_FLAG("--pieces", &pieces, "print one token per line: id, tab, the token's text"),
        CLI_OPT_FLAG("--json", &as_json, "print {\"ids\": [...], \"pieces\": [...]}"),
    };
    const cli_command cmd = {"tokenize", usage, NULL, 17, opts, CLI_N_OPTIONS(opts), 2};
    if (cli_parse_options(&cmd, argc, argv, pos) != 2)
        return cli_usage_error(&cmd, NULL);
    plume_error err = {0};
    plume_model *m;
    if (plume_model_load(pos[0], &m, &err)) {
        fprintf(stderr, "plume tokenize: %s\n", err.msg);
        return 1;
    }
    const plume_tokenizer *tok = plume_model_tokenizer(m);
    int32_t *ids;
    size_t n;
    if (plume_tokenize(tok, pos[1], strlen(pos[1]), !no_bos && plume_tokenizer_add_bos(tok),
                       !no_special, &ids, &n, &err)) {
        fprintf(stderr, "plume tokenize: %s\n", err.msg);
        plume_model_free(m);
        return 1;
    }
    json_t *jids = json_array(), *jp = json_array();
    for (size_t i = 0; i < n; i++) {
        char buf[512];
        int len = plume_token_bytes(tok, ids[i], true, buf, sizeof buf);
        if (len < 0)
            len = 0;
        if ((size_t)len > sizeof buf)
            len = sizeof buf;
        if (as_json) {
            json_array_append_new(jids, json_integer(ids[i]));
            json_t *js = json_stringn(buf, (size_t)len);
            if (!js) { /* a partial UTF-8 sequence: spell its bytes */
                char hex[sizeof buf * 6 + 1];
                size_t o = 0;
                for (int b = 0; b < len; b++)
                    o += (size_t)snprintf(hex + o, sizeof hex - o, "<0x%02X>", (unsigned char)buf[b]);
                js = json_string(hex);
            }
            json_array_append_new(jp, js);
        } else if (pieces) {
            printf("%d\t%.*s\n", ids[i], len, buf);
        } else {
            printf(i ? " %d" : "%d", ids[i]);
        }
    }
    if (as_json) {
        json_t *o = json_pack("{s:o,s:o}", "ids", jids, "pieces", jp);
        char *s = json_dumps(o, JSON_ENSURE_ASCII);
        puts(s);
        free(s);
        json_decref(o);
    } else {
        json_decref(jids);
        json_decref(jp);
        if (!pieces)
            putchar('\n');
    }
    free(ids);
    plume_model_free(m);
    return 0;
}
