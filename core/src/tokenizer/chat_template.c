/* Chat templates, recognised by substrings of the Jinja text (as llama.cpp's
 * llm_chat_detect_template does) and rendered by hand; no Jinja engine. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer/tok_internal.h"

static bool has(const char *s, const char *needle)
{
    return strstr(s, needle) != NULL;
}

/* The family name for template text tmpl, or NULL when unrecognised. */
static const char *detect_family(const char *tmpl)
{
    if (has(tmpl, "<|im_start|>") && has(tmpl, "</think>") && has(tmpl, "last_query_index"))
        return "qwen3";
    if (has(tmpl, "<|im_start|>"))
        return "chatml";
    if (strncmp(tmpl, "mistral", 7) == 0 || has(tmpl, "[INST]")) {
        if (has(tmpl, "[SYSTEM_PROMPT]"))
            return "mistral-v7";
        if (has(tmpl, "' [INST] ' + system_message") || has(tmpl, "[AVAILABLE_TOOLS]")) {
            if (has(tmpl, " [INST]"))
                return "mistral-v1";
            if (has(tmpl, "\"[INST]\""))
                return "mistral-v3-tekken";
            return "mistral-v3";
        }
        if (has(tmpl, "content.strip()"))
            return "llama2-sys-strip";
        if (has(tmpl, "bos_token + '[INST]"))
            return "llama2-sys-bos";
        if (has(tmpl, "<<SYS>>"))
            return "llama2-sys";
        return "llama2";
    }
    if (has(tmpl, "<|assistant|>") && has(tmpl, "<|end|>"))
        return "phi3";
    if (has(tmpl, "<|user|>"))
        return "zephyr";
    if (has(tmpl, "<start_of_turn>"))
        return "gemma";
    if (has(tmpl, "<|start_header_id|>") && has(tmpl, "<|end_header_id|>"))
        return has(tmpl, "Cutting Knowledge Date") ? (has(tmpl, "strftime_now") ? "llama3.2"
                                                                                : "llama3.1")
                                                   : "llama3";
    return NULL;
}

/* A default system prompt written literally in a ChatML template that adds
 * it when the first message is not a system message (SmolLM2's
 * `messages[0]['role'] != 'system'`, Qwen2.5's `== 'system' ... else`): the
 * text between "<|im_start|>system\n" and "<|im_end|>" when it holds no
 * Jinja syntax or quotes.  NULL when there is none. */
static char *find_default_system(const char *tmpl)
{
    if (!has(tmpl, "'system'") && !has(tmpl, "\"system\""))
        return NULL;
    static const char *const OPENERS[] = {"<|im_start|>system\n", "<|im_start|>system\\n"};
    for (const char *p = tmpl; (p = strstr(p, "<|im_start|>system")) != NULL; p++) {
        for (size_t k = 0; k < 2; k++) {
            size_t ol = strlen(OPENERS[k]);
            if (strncmp(p, OPENERS[k], ol) != 0)
                continue;
            const char *start = p + ol;
            const char *end = strstr(start, "<|im_end|>");
            if (!end || end == start || strcspn(start, "'\"{}") < (size_t)(end - start))
                continue;
            /* unescape \n, \t, \\ written in a Jinja string literal */
            char *out = malloc((size_t)(end - start) + 1);
            if (!out)
                return NULL;
            size_t w = 0;
            for (const char *c = start; c < end; c++) {
                if (c[0] == '\\' && c + 1 < end) {
                    char e = c[1];
                    out[w++] = e == 'n' ? '\n' : e == 't' ? '\t' : e;
                    c++;
                } else {
                    out[w++] = *c;
                }
            }
            out[w] = '\0';
            return out;
        }
    }
    return NULL;
}

int tok_chat_detect(plume_tokenizer *t)
{
    t->chat_family = NULL;
    free(t->chat_default_system);
    t->chat_default_system = NULL;
    if (!t->chat_template)
        return 0;
    t->chat_family = detect_family(t->chat_template);
    if (!t->chat_family)
        t->chat_family = "unknown";
    else if (strcmp(t->chat_family, "chatml") == 0)
        t->chat_default_system = find_default_system(t->chat_template);
    return 0;
}

const char *plume_chat_template_name(const plume_tokenizer *t)
{
    return t->chat_family;
}

/* A growing NUL-terminated string; `failed` latches out-of-memory. */
typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool failed;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->len + n + 1)
            nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->failed = true;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_put(sbuf *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

/* Appends s without leading and trailing whitespace (Python str.strip()). */
static void sb_put_trim(sbuf *b, const char *s)
{
    size_t n = strlen(s);
    while (n && strchr(" \t\n\r\f\v", s[n - 1]))
        n--;
    while (n && strchr(" \t\n\r\f\v", *s)) {
        s++;
        n--;
    }
    sb_putn(b, s, n);
}

static bool is_role(const plume_chat_msg *m, const char *role)
{
    return strcmp(m->role, role) == 0;
}

static void render_chatml(const plume_tokenizer *t, const plume_chat_msg *m, size_t n, bool gen,
                          sbuf *b)
{
    if (t->chat_default_system && (n == 0 || !is_role(&m[0], "system"))) {
        sb_put(b, "<|im_start|>system\n");
        sb_put(b, t->chat_default_system);
        sb_put(b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        sb_put(b, "<|im_start|>");
        sb_put(b, m[i].role);
        sb_put(b, "\n");
        sb_put(b, m[i].content);
        sb_put(b, "<|im_end|>\n");
    }
    if (gen)
        sb_put(b, "<|im_start|>assistant\n");
}

/* Appends s[0..n) without the characters of set at its start (lstrip)
 * and/or end (rstrip). */
static void sb_put_strip(sbuf *b, const char *s, size_t n, const char *set, bool left, bool right)
{
    while (left && n && strchr(set, *s)) {
        s++;
        n--;
    }
    while (right && n && strchr(set, s[n - 1]))
        n--;
    sb_putn(b, s, n);
}

static bool starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static bool ends_with(const char *s, const char *p)
{
    size_t n = strlen(s), k = strlen(p);
    return n >= k && strcmp(s + n - k, p) == 0;
}

/* The last occurrence of needle in s[0..n), or NULL. */
static const char *last_in(const char *s, size_t n, const char *needle)
{
    const char *found = NULL;
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, needle, k) == 0)
            found = s + i;
    return found;
}

/* Qwen3's template (no tools): ChatML, with each assistant message's
 * "<think>...</think>" reasoning split off its content; assistant messages
 * up to the last real user query keep only the content, later ones (an
 * agent's steps) get the reasoning back in a <think> block.  enable_thinking
 * is not a plume option: the generation prompt is the template's default. */
static void render_qwen3(const plume_chat_msg *m, size_t n, bool gen, sbuf *b)
{
    size_t lqi = n ? n - 1 : 0; /* ns.last_query_index */
    for (size_t i = n; i-- > 0;)
        if (is_role(&m[i], "user") && !(starts_with(m[i].content, "<tool_response>") &&
                                         ends_with(m[i].content, "</tool_response>"))) {
            lqi = i;
            break;
        }
    if (n && is_role(&m[0], "system")) {
        sb_put(b, "<|im_start|>system\n");
        sb_put(b, m[0].content);
        sb_put(b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        const char *c = m[i].content;
        if (is_role(&m[i], "user") || (is_role(&m[i], "system") && i > 0)) {
            sb_put(b, "<|im_start|>");
            sb_put(b, m[i].role);
            sb_put(b, "\n");
            sb_put(b, c);
            sb_put(b, "<|im_end|>\n");
        } else if (is_role(&m[i], "assistant")) {
            const char *close = strstr(c, "</think>");
            const char *rs = "", *body = c;
            size_t rn = 0;
            if (close) {
                /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
                size_t head = (size_t)(close - c);
                while (head && c[head - 1] == '\n')
                    head--;
                const char *open = last_in(c, head, "<think>");
                rs = open ? open + 7 : c;
                rn = (size_t)(c + head - rs);
                while (rn && *rs == '\n') {
                    rs++;
                    rn--;
                }
                body = last_in(c, strlen(c), "</think>") + 8; /* split('</think>')[-1] */
                while (*body == '\n')
                    body++;
            }
            sb_put(b, "<|im_start|>assistant\n");
            if (i > lqi && (i + 1 == n || rn > 0)) {
                sb_put(b, "<think>\n");
                sb_put_strip(b, rs, rn, "\n", true, true);
                sb_put(b, "\n</think>\n\n");
                sb_put_strip(b, body, strlen(body), "\n", true, false);
            } else {
                sb_put(b, body);
            }
            sb_put(b, "<|im_end|>\n");
        } else if (is_role(&m[i], "tool")) {
            if (i == 0 || !is_role(&m[i - 1], "tool"))
                sb_put(b, "<|im_start|>user");
            sb_put(b, "\n<tool_response>\n");
            sb_put(b, c);
            sb_put(b, "\n</tool_response>");
            if (i + 1 == n || !is_role(&m[i + 1], "tool"))
                sb_put(b, "<|im_end|>\n");
        }
    }
    if (gen)
        sb_put(b, "<|im_start|>assistant\n");
}

static void render_llama2(const char *fam, const plume_chat_msg *m, size_t n, sbuf *b)
{
    bool sys = strcmp(fam, "llama2") != 0;
    bool bos_inside = strcmp(fam, "llama2-sys-bos") == 0;
    bool strip = strcmp(fam, "llama2-sys-strip") == 0;
    bool inside = true;
    sb_put(b, "[INST] ");
    for (size_t i = 0; i < n; i++) {
        if (!inside) {
            inside = true;
            sb_put(b, bos_inside ? "<s>[INST] " : "[INST] ");
        }
        void (*put)(sbuf *, const char *) = strip ? sb_put_trim : sb_put;
        if (is_role(&m[i], "system")) {
            if (sys) {
                sb_put(b, "<<SYS>>\n");
                put(b, m[i].content);
                sb_put(b, "\n<</SYS>>\n\n");
            } else {
                put(b, m[i].content);
                sb_put(b, "\n");
            }
        } else if (is_role(&m[i], "user")) {
            put(b, m[i].content);
            sb_put(b, " [/INST]");
        } else {
            put(b, m[i].content);
            sb_put(b, "</s>");
            inside = false;
        }
    }
}

static void render_mistral(const char *fam, const plume_chat_msg *m, size_t n, sbuf *b)
{
    if (strcmp(fam, "mistral-v7") == 0) {
        for (size_t i = 0; i < n; i++) {
            if (is_role(&m[i], "system")) {
                sb_put(b, "[SYSTEM_PROMPT] ");
                sb_put(b, m[i].content);
                sb_put(b, "[/SYSTEM_PROMPT]");
            } else if (is_role(&m[i], "user")) {
                sb_put(b, "[INST] ");
                sb_put(b, m[i].content);
                sb_put(b, "[/INST]");
            } else {
                sb_put(b, " ");
                sb_put(b, m[i].content);
                sb_put(b, "</s>");
            }
        }
        return;
    }
    const char *lead = strcmp(fam, "mistral-v1") == 0 ? " " : "";
    const char *trail = strcmp(fam, "mistral-v3-tekken") == 0 ? "" : " ";
    bool trim = strcmp(fam, "mistral-v3") == 0;
    bool inside = false;
    for (size_t i = 0; i < n; i++) {
        if (!inside) {
            sb_put(b, lead);
            sb_put(b, "[INST]");
            sb_put(b, trail);
            inside = true;
        }
        if (is_role(&m[i], "system")) {
            sb_put(b, m[i].content);
            sb_put(b, "\n\n");
        } else if (is_role(&m[i], "user")) {
            sb_put(b, m[i].content);
            sb_put(b, lead);
            sb_put(b, "[/INST]");
        } else {
            sb_put(b, trail);
            if (trim)
                sb_put_trim(b, m[i].content);
            else
                sb_put(b, m[i].content);
            sb_put(b, "</s>");
            inside = false;
        }
    }
}

/* Llama 3 headers.  The 3.1+ templates ("llama3.1", "llama3.2") always open
 * with a system turn: "Cutting Knowledge Date: December 2023", "Today
 * Date: " + date_string, then the first message's text when it is a system
 * message (trimmed).  date_string: 3.1's fixed "26 Jul 2024"; 3.2's
 * strftime_now("%d %b %Y"), today's local date as transformers renders it.
 * Tools are not rendered. */
static void render_llama3(const char *fam, const plume_chat_msg *m, size_t n, bool gen, sbuf *b)
{
    if (strcmp(fam, "llama3") != 0) {
        char date[32] = "26 Jul 2024";
        if (strcmp(fam, "llama3.2") == 0) {
            time_t now = time(NULL);
            struct tm tm;
            if (localtime_r(&now, &tm))
                strftime(date, sizeof date, "%d %b %Y", &tm);
        }
        sb_put(b, "<|start_header_id|>system<|end_header_id|>\n\n"
                  "Cutting Knowledge Date: December 2023\nToday Date: ");
        sb_put(b, date);
        sb_put(b, "\n\n");
        if (n && is_role(&m[0], "system")) {
            sb_put_trim(b, m[0].content);
            m++;
            n--;
        }
        sb_put(b, "<|eot_id|>");
    }
    for (size_t i = 0; i < n; i++) {
        sb_put(b, "<|start_header_id|>");
        sb_put(b, m[i].role);
        sb_put(b, "<|end_header_id|>\n\n");
        sb_put_trim(b, m[i].content);
        sb_put(b, "<|eot_id|>");
    }
    if (gen)
        sb_put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void render_gemma(const plume_chat_msg *m, size_t n, bool gen, sbuf *b)
{
    sbuf sys = {0};
    for (size_t i = 0; i < n; i++) {
        if (is_role(&m[i], "system")) {
            sb_put_trim(&sys, m[i].content);
            continue;
        }
        bool model = is_role(&m[i], "assistant");
        sb_put(b, "<start_of_turn>");
        sb_put(b, model ? "model" : m[i].role);
        sb_put(b, "\n");
        if (sys.len && !model) {
            sb_put(b, sys.s);
            sb_put(b, "\n\n");
            sys.len = 0;
        }
        sb_put_trim(b, m[i].content);
        sb_put(b, "<end_of_turn>\n");
    }
    if (sys.failed)
        b->failed = true;
    free(sys.s);
    if (gen)
        sb_put(b, "<start_of_turn>model\n");
}

/* Zephyr ends turns with <|endoftext|>, Phi-3 with <|end|>. */
static void render_zephyr_phi3(bool phi3, const plume_chat_msg *m, size_t n, bool gen, sbuf *b)
{
    for (size_t i = 0; i < n; i++) {
        sb_put(b, "<|");
        sb_put(b, m[i].role);
        sb_put(b, "|>\n");
        sb_put(b, m[i].content);
        sb_put(b, phi3 ? "<|end|>\n" : "<|endoftext|>\n");
    }
    if (gen)
        sb_put(b, "<|assistant|>\n");
}

int plume_chat_apply(const plume_tokenizer *t, const plume_chat_msg *msgs, size_t n,
                     bool add_generation_prompt, char **out, plume_error *err)
{
    if (!t || !out || (!msgs && n))
        return plume_err(err, PLUME_ERR_INVALID,
                         "plume_chat_apply: tokenizer, messages and output must not be NULL");
    *out = NULL;
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return plume_err(err, PLUME_ERR_INVALID,
                             "chat message %zu has no role or no content", i);
    const char *fam = t->chat_family ? t->chat_family : "chatml";
    sbuf b = {0};
    sb_put(&b, "");
    if (strcmp(fam, "chatml") == 0)
        render_chatml(t, msgs, n, add_generation_prompt, &b);
    else if (strcmp(fam, "qwen3") == 0)
        render_qwen3(msgs, n, add_generation_prompt, &b);
    else if (strncmp(fam, "llama2", 6) == 0)
        render_llama2(fam, msgs, n, &b);
    else if (strncmp(fam, "mistral", 7) == 0)
        render_mistral(fam, msgs, n, &b);
    else if (strncmp(fam, "llama3", 6) == 0)
        render_llama3(fam, msgs, n, add_generation_prompt, &b);
    else if (strcmp(fam, "gemma") == 0)
        render_gemma(msgs, n, add_generation_prompt, &b);
    else if (strcmp(fam, "zephyr") == 0 || strcmp(fam, "phi3") == 0)
        render_zephyr_phi3(strcmp(fam, "phi3") == 0, msgs, n, add_generation_prompt, &b);
    else {
        free(b.s);
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "the model's chat template is not one plume recognises (supported "
                         "families: chatml, qwen3, llama2, mistral, llama3, gemma, zephyr, "
                         "phi3); pass a prompt that is already formatted instead");
    }
    if (b.failed) {
        free(b.s);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory rendering the chat template");
    }
    *out = b.s;
    return 0;
}
