/* The turn formats of model families, as Jinja text, for models whose file
 * carries no chat template (a Gemma 3 GGUF without one still wants Gemma's
 * turns, not ChatML). */
#ifndef PLUME_TEMPLATE_FAMILY_TEMPLATES_H
#define PLUME_TEMPLATE_FAMILY_TEMPLATES_H

/* The family ("gemma", "llama3", "mistral", "phi3", "chatml") for a GGUF
 * general.architecture and tokenizer pre-tokenizer name, or NULL when
 * neither says; arch and pre may be NULL. */
const char *jinja_family_of(const char *arch, const char *pre);
/* The Jinja text of family's format ("chatml" for an unknown family). */
const char *jinja_family_template(const char *family);

#endif
