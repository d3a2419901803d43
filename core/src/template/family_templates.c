/* Family turn formats (see family_templates.h): each is the family's
 * official template reduced to text turns (no tools, no images). */
#include <string.h>

#include "template/family_templates.h"

static const char CHATML[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* Gemma 2/3: a system message is put in front of the first user turn. */
static const char GEMMA[] =
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') }}"
    "{%- if message['content'] is string -%}{{ message['content'] | trim }}"
    "{%- else -%}{%- for item in message['content'] -%}{%- if item['type'] == 'text' -%}"
    "{{ item['text'] | trim }}{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{ '<end_of_turn>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}";

static const char LLAMA3[] =
    "{% for message in messages %}{% set content = '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}";

static const char MISTRAL[] =
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ '[INST] ' + message['content'] + '\\n\\n' }}"
    "{% elif message['role'] == 'user' %}{% if loop.index0 == 0 or messages[loop.index0 - 1]"
    "['role'] != 'system' %}{{ '[INST] ' }}{% endif %}{{ message['content'] + ' [/INST]' }}"
    "{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}";

static const char PHI3[] =
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + "
    "'<|end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

const char *jinja_family_of(const char *arch, const char *pre)
{
    if (arch && !strncmp(arch, "gemma", 5))
        return "gemma";
    if (arch && !strcmp(arch, "phi3"))
        return "phi3";
    if (arch && (!strncmp(arch, "qwen", 4) || !strcmp(arch, "smollm3")))
        return "chatml";
    if (pre && !strcmp(pre, "llama-bpe"))
        return "llama3";
    if (pre && !strcmp(pre, "smollm"))
        return "chatml";
    if (pre && !strncmp(pre, "qwen", 4))
        return "chatml";
    return NULL;
}

const char *jinja_family_template(const char *family)
{
    if (family && !strcmp(family, "gemma"))
        return GEMMA;
    if (family && !strcmp(family, "llama3"))
        return LLAMA3;
    if (family && !strcmp(family, "mistral"))
        return MISTRAL;
    if (family && !strcmp(family, "phi3"))
        return PHI3;
    return CHATML;
}
