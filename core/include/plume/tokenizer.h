/* plume — tokenizers: byte-level BPE (GPT-2 style, GGUF model "gpt2") and
 * SentencePiece-style BPE (GGUF model "llama"), loaded from GGUF metadata or
 * an HF tokenizer.json (a GGUF model's comes with the model,
 * plume_model_tokenizer); chat templates rendered by a Jinja engine. */
#ifndef PLUME_TOKENIZER_H
#define PLUME_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A GGUF model's tokenizer comes with the model: plume_model_load, then
 * plume_model_tokenizer (plume/model.h). */
typedef struct plume_tokenizer plume_tokenizer;

/* Builds a tokenizer from the HF tokenizer.json at path tokenizer_json;
 * tokenizer_config_json (a path, may be NULL) supplies bos/eos, add_bos_token and chat_template. */
PLUME_API int plume_tokenizer_from_hf(const char *tokenizer_json, const char *tokenizer_config_json,
                                      plume_tokenizer **out, plume_error *err);

/* The same for a model whose vocabulary (embedding rows) has n_vocab entries,
 * 0 when unknown.  Token ids must lie below the number of entries in the
 * file, or below n_vocab when that is larger (the ids in between become
 * unused padding tokens); an id beyond is an error naming the entry. */
PLUME_API int plume_tokenizer_from_hf_sized(const char *tokenizer_json,
                                            const char *tokenizer_config_json, int64_t n_vocab,
                                            plume_tokenizer **out, plume_error *err);

PLUME_API void plume_tokenizer_free(plume_tokenizer *t);

PLUME_API int32_t plume_tokenizer_n_vocab(const plume_tokenizer *t);
/* "gpt2" (byte-level BPE) or "llama" (SentencePiece BPE). */
PLUME_API const char *plume_tokenizer_model(const plume_tokenizer *t);
/* Pre-tokenizer name ("smollm", "llama-bpe", "qwen2", "gpt2", "default"). */
PLUME_API const char *plume_tokenizer_pre(const plume_tokenizer *t);
/* -1 when the model has none. */
PLUME_API int32_t plume_tokenizer_bos(const plume_tokenizer *t);
PLUME_API int32_t plume_tokenizer_eos(const plume_tokenizer *t);
/* Whether encoding should start with BOS by default (GGUF add_bos_token). */
PLUME_API bool plume_tokenizer_add_bos(const plume_tokenizer *t);
/* True for tokens that end generation: eos, eot and control tokens such as
 * <|im_end|>, <|endoftext|>, <|eot_id|>, </s>, and gpt-oss's <|return|> and
 * <|call|>.  In a vocabulary with those two (o200k_harmony), <|end|> ends
 * one message of the reply, not the reply, and is not one. */
PLUME_API bool plume_tokenizer_is_eog(const plume_tokenizer *t, int32_t id);
/* True for control/special tokens (not rendered in normal output). */
PLUME_API bool plume_tokenizer_is_special(const plume_tokenizer *t, int32_t id);

/* Encodes len bytes of UTF-8 text.  With parse_special, the texts of
 * special/control tokens (e.g. "<|im_start|>") are matched whole and become
 * their ids; otherwise they are tokenized as plain text.  With add_bos, the
 * BOS id is prepended (if the model has one).  Text never becomes a special
 * token otherwise: each maximal invalid UTF-8 sequence is read as U+FFFD, a
 * character with no token uses its byte-fallback tokens (<0xNN>) or the
 * vocabulary's UNKNOWN-type token, and is dropped when there is neither.
 * text need not be NUL-terminated.  On success *ids is a malloc'd array of
 * *n ids that the caller frees. */
PLUME_API int plume_tokenize(const plume_tokenizer *t, const char *text, size_t len, bool add_bos,
                             bool parse_special, int32_t **ids, size_t *n, plume_error *err);

/* The bytes one token stands for (byte-level and <0xNN> byte tokens decoded,
 * SentencePiece '▁' turned into a space).  Special tokens give their text
 * only when render_special is true, else nothing.  Returns the byte count,
 * which may exceed cap (then only cap bytes were written); -1 for an id out
 * of range.  A token may be a partial UTF-8 sequence. */
PLUME_API int plume_token_bytes(const plume_tokenizer *t, int32_t id, bool render_special,
                                char *buf, size_t cap);

/* Streaming detokenizer: feeds ids, emits only complete UTF-8 sequences
 * (a character split across tokens is held until it completes). */
typedef struct plume_detok {
    const plume_tokenizer *tok;
    bool render_special;
    bool at_start;      /* for SentencePiece: drop the leading space of the first token */
    char pending[8];    /* incomplete UTF-8 tail */
    size_t n_pending;
} plume_detok;

PLUME_API void plume_detok_init(plume_detok *d, const plume_tokenizer *t, bool render_special);
/* Appends the text completed by token id to out (NUL-terminated, cap bytes);
 * returns bytes written (excluding NUL), or -1 when out is too small
 * (64 bytes + longest token always suffices). */
PLUME_API int plume_detok_push(plume_detok *d, int32_t id, char *out, size_t cap);
/* Flushes a dangling partial sequence as U+FFFD replacement characters. */
PLUME_API int plume_detok_flush(plume_detok *d, char *out, size_t cap);

/* Decodes a whole id sequence into a malloc'd NUL-terminated string. */
PLUME_API int plume_detokenize(const plume_tokenizer *t, const int32_t *ids, size_t n,
                               bool render_special, char **out, plume_error *err);

/* ---- chat templates ---- */

/* Chat templates are Jinja, run by plume's own engine with the semantics of
 * jinja2 as transformers configures it (trim_blocks, lstrip_blocks, the
 * immutable sandbox, its tojson, raise_exception and strftime_now): the
 * model's template renders byte-identically to transformers'
 * apply_chat_template.  Templates are untrusted: rendering is bounded in
 * steps, output, memory and recursion, and has no access to files or the
 * environment. */

typedef struct plume_chat_msg {
    const char *role;    /* "system", "user", "assistant", "tool", ... */
    const char *content;
} plume_chat_msg;

/* Which template family the model's chat template was recognised as:
 * "chatml", "qwen3", "llama2", "llama3", "llama3.1", "mistral", "gemma",
 * "phi3", "zephyr", ..., "unknown" for a template of no known family (it
 * still renders), or NULL when the model has no template. */
PLUME_API const char *plume_chat_template_name(const plume_tokenizer *t);

/* Where the template that renders comes from: "model" (the GGUF's
 * tokenizer.chat_template or tokenizer_config.json / chat_template.jinja),
 * "family" (the model has none; its family's own turn format, e.g. Gemma's
 * or Llama 3's) or "chatml" (none and no known family). */
PLUME_API const char *plume_chat_template_source(const plume_tokenizer *t);

/* A chat template compiled from Jinja text, to use instead of the model's
 * (--chat-template FILE). */
typedef struct plume_chat_template plume_chat_template;

/* Compiles len bytes of Jinja text.  A syntax error or a construct plume
 * does not run is -1 with one line naming the line, column and construct. */
PLUME_API int plume_chat_template_compile(const char *text, size_t len, plume_chat_template **out,
                                          plume_error *err);
/* Reads and compiles the Jinja file at path (errors also name the file). */
PLUME_API int plume_chat_template_load(const char *path, plume_chat_template **out,
                                       plume_error *err);
PLUME_API void plume_chat_template_free(plume_chat_template *ct);

/* The Jinja text that renders the default template: tmpl's when given,
 * else the model's, else its family's built-in format (or ChatML).  What a
 * server reads the tool-call and reasoning formats from. */
PLUME_API const char *plume_chat_template_text(const plume_tokenizer *t,
                                               const plume_chat_template *tmpl);

/* One rendering: everything transformers' apply_chat_template passes. */
typedef struct plume_chat_request {
    /* JSON array of OpenAI-style messages: role, content (a string, null or
     * a list of {"type": "text", "text": ...} parts), and where present
     * tool_calls ([{"id", "type", "function": {"name", "arguments"}}]),
     * tool_call_id, name, reasoning_content.  As transformers does, a
     * message's reasoning (reasoning_content, thinking or reasoning) is
     * given to the template under both reasoning_content and thinking. */
    const char *messages_json;
    /* JSON array of tool definitions ({"type": "function", "function":
     * {"name", "description", "parameters"}}), or NULL for none (the
     * template sees tools = none, as in transformers). */
    const char *tools_json;
    /* JSON object of extra template variables (chat_template_kwargs, e.g.
     * {"enable_thinking": false}), or NULL.  They cannot replace messages,
     * tools or add_generation_prompt. */
    const char *kwargs_json;
    bool add_generation_prompt;
    /* The template to use instead of the model's, or NULL. */
    const plume_chat_template *tmpl;
    /* A named variant of the model's template (GGUF
     * tokenizer.chat_template.<name>, e.g. "tool_use"), or NULL for the
     * default; an unknown name is an error listing the model's names. */
    const char *template_name;
} plume_chat_request;

/* Renders req into a malloc'd string *out.  The template also sees
 * bos_token and eos_token (the vocabulary's texts) and strftime_now (the
 * local time).  When the tokenizer adds BOS itself (plume_tokenizer_add_bos)
 * a leading BOS text in the output is removed, so that encoding the result
 * with add_bos gives one BOS.  Invalid JSON, a template that does not
 * compile, raise_exception, an undefined value used or a limit reached is
 * -1 with one line saying what and where. */
PLUME_API int plume_chat_render(const plume_tokenizer *t, const plume_chat_request *req,
                                char **out, plume_error *err);

/* Renders plain messages with the model's template (plume_chat_render with
 * no tools and no kwargs) into a malloc'd string, ending with the assistant
 * prefix when add_generation_prompt.  Roles and contents must be non-NULL. */
PLUME_API int plume_chat_apply(const plume_tokenizer *t, const plume_chat_msg *msgs, size_t n,
                               bool add_generation_prompt, char **out, plume_error *err);

#ifdef __cplusplus
}
#endif
#endif
