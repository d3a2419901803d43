"""Tool calls, reasoning and structured output through `plume serve`, with
the real `openai` client, on SmolLM2 and a Hermes/Qwen-style chat template
written here (SmolLM2's own template is ChatML, which has no tool format).

A 135M model rarely calls a tool by itself, so the round trip is driven by
tool_choice "required" and a named function: decoding is constrained to
the template's call format with the arguments matching the function's
parameters schema (the sample-structured plugin), which makes every check
deterministic:
  * a tool call comes back with an id, the function's name and arguments
    that parse and match the schema; finish_reason "tool_calls";
  * the same streamed: the client's deltas assemble to the same call;
  * the round trip: the assistant's tool_calls and the tool's result go back
    in the history, and the rendered prompt (/tokenize + /detokenize) holds
    the call's id, name and arguments and the result; the final answer
    comes as content;
  * reasoning: output forced to "<think>R</think>A" (guided_regex) splits
    into reasoning_content R and content A, streamed and not;
  * chat_template_kwargs reach the template;
  * response_format json_schema: the content parses and matches; a refused
    keyword is a 400 naming it; guided_choice on /v1/completions;
  * refusals: tools on a template without a tool format, tool_choice naming
    an unknown function, tools on /v1/completions;
  * gpt-oss's harmony format, with gpt-oss's own template (fetched with
    the others by scripts/fetch-templates) on SmolLM2, whose vocabulary
    spells the markers as text: output forced to an analysis message and a
    final one splits into reasoning_content and content, one forced to a
    commentary message to=functions.get_weather comes back as that call,
    streamed and not; the history's reasoning_content and tool_calls are
    rendered as gpt-oss expects (analysis channel, to=functions.NAME);
    tool_choice "required" is refused with the reason; unforced text that
    is not harmony comes back whole as content.
usage: test_tools.py PLUME SMOLLM2_GGUF GPT_OSS_TEMPLATE  (exit 77 when the model is missing)"""
import json
import os
import sys
import tempfile

import openai

from serve_util import Server, check

plume, model_path, harmony_template = sys.argv[1:4]
MODEL = os.path.basename(model_path)

TEMPLATE = """\
{%- if tools %}<|im_start|>system
You may call these functions:
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>
Call one as <tool_call>
{"name": <name>, "arguments": <object>}
</tool_call><|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == "assistant" and message.tool_calls %}<|im_start|>assistant
{%- if message.reasoning_content %}
<think>{{ message.reasoning_content }}</think>
{%- endif %}
{%- for tc in message.tool_calls %}
<tool_call id="{{ tc.id }}">
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == "tool" %}<|im_start|>user
<tool_response id="{{ message.tool_call_id }}">
{{ message.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{%- if enable_thinking is defined and enable_thinking is false %}
<think>

</think>
{%- endif %}
{% endif %}"""

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "additionalProperties": False,
                   "required": ["city", "days"],
                   "properties": {"city": {"enum": ["Paris", "Tokyo", "Lima"]},
                                  "days": {"type": "integer", "minimum": 1, "maximum": 7}}}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {
        "zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"], "additionalProperties": False}}}
USER = [{"role": "user", "content": "What is the weather in Paris this week?"}]


def client_of(srv):
    return openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0, timeout=120)


def weather_args_ok(args):
    a = json.loads(args)
    return set(a) == {"city", "days"} and a["city"] in ("Paris", "Tokyo", "Lima") \
        and isinstance(a["days"], int) and 1 <= a["days"] <= 7


def assemble(chunks):
    """content, reasoning, calls (index -> {id, name, arguments}), finish
    of a streamed chat, the way a client puts deltas together."""
    content, reasoning, calls, finish = "", "", {}, None
    for c in chunks:
        if not c.choices:
            continue
        d = c.choices[0].delta
        content += d.content or ""
        reasoning += getattr(d, "reasoning_content", None) or \
            (d.model_extra or {}).get("reasoning_content") or ""
        for tc in d.tool_calls or []:
            e = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            e["id"] += tc.id or ""
            if tc.function:
                e["name"] += tc.function.name or ""
                e["arguments"] += tc.function.arguments or ""
        finish = c.choices[0].finish_reason or finish
    return content, reasoning, calls, finish


def test_tool_round_trip(srv, client):
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        r = client.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER, TIME],
                                           tool_choice=choice, temperature=0, max_tokens=200)
        ch = r.choices[0]
        calls = ch.message.tool_calls or []
        check(ch.finish_reason == "tool_calls" and len(calls) >= 1, ("choice", choice, r))
        if isinstance(choice, dict):
            check([c.function.name for c in calls] == ["get_weather"], r)
        for c in calls:
            check(c.id and c.type == "function", c)
            check(c.function.name in ("get_weather", "get_time"), c)
            if c.function.name == "get_weather":
                check(weather_args_ok(c.function.arguments), c)
        # streamed: the same call, assembled from deltas
        chunks = list(client.chat.completions.create(
            model=MODEL, messages=USER, tools=[WEATHER, TIME], tool_choice=choice,
            temperature=0, max_tokens=200, stream=True))
        content, _, scalls, finish = assemble(chunks)
        check(finish == "tool_calls", chunks[-3:])
        check([(v["name"], json.loads(v["arguments"])) for _, v in sorted(scalls.items())]
              == [(c.function.name, json.loads(c.function.arguments)) for c in calls],
              (scalls, calls))
    call = calls[0]
    # ids differ from request to request even with the same seed (clients key
    # tool results by id across a whole conversation)
    first = []
    for _ in range(2):
        r = client.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER, TIME],
                                           tool_choice="required", temperature=0, seed=7,
                                           max_tokens=200)
        first.append(r.choices[0].message.tool_calls[0].id)
    check(first[0] != first[1], ("the first call's id repeats with one seed", first))
    # the round trip: the call and its result go back in the history
    history = USER + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": '{"temperature_c": 21}'}]
    st, tok = srv.request("POST", "/tokenize", {"messages": history, "tools": [WEATHER, TIME]})
    check(st == 200, tok)
    st, det = srv.request("POST", "/detokenize", {"tokens": tok["tokens"]})
    check(st == 200, det)
    text = det["prompt"]
    args = json.dumps(json.loads(call.function.arguments))
    for want in ('<tool_call id="%s">' % call.id, '"name": "%s"' % call.function.name, args,
                 '<tool_response id="%s">' % call.id, '{"temperature_c": 21}'):
        check(want in text, ("the rendered history lacks", want, text))
    final = client.chat.completions.create(model=MODEL, messages=history, tools=[WEATHER, TIME],
                                           tool_choice="none", temperature=0, max_tokens=8)
    fch = final.choices[0]
    check(fch.finish_reason in ("stop", "length") and not fch.message.tool_calls, final)
    check(isinstance(fch.message.content, str), final)


def test_reasoning(client):
    kw = dict(model=MODEL, messages=USER, temperature=0, max_tokens=64,
              extra_body={"guided_regex": "<think>[a-z]{3,8}</think>[a-z]{3,8}"})
    r = client.chat.completions.create(**kw)
    m = r.choices[0].message
    reasoning = (m.model_extra or {}).get("reasoning_content")
    check(reasoning and 3 <= len(reasoning) <= 8 and reasoning.isalpha(), r)
    check(m.content and 3 <= len(m.content) <= 8 and m.content.isalpha(), r)
    content, sreasoning, _, finish = assemble(list(client.chat.completions.create(**kw,
                                                                                 stream=True)))
    check((content, sreasoning) == (m.content, reasoning), (content, sreasoning, m))
    check(finish == "stop", finish)


def test_kwargs_and_format(srv, client):
    on = srv.request("POST", "/tokenize", {"messages": USER})[1]
    off = srv.request("POST", "/tokenize", {"messages": USER,
                                            "chat_template_kwargs": {"enable_thinking": False}})[1]
    check(off["count"] > on["count"], ("chat_template_kwargs did not reach the template", on,
                                       off))
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    r = client.chat.completions.create(
        model=MODEL, messages=USER, temperature=0, max_tokens=40,
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}})
    check(r.choices[0].finish_reason == "stop", r)
    v = json.loads(r.choices[0].message.content)
    check(set(v) == {"ok"} and isinstance(v["ok"], bool), r)
    c = client.completions.create(model=MODEL, prompt="Is water wet? Answer:", temperature=1,
                                  max_tokens=8, extra_body={"guided_choice": ["yes", "no"]})
    check(c.choices[0].text in ("yes", "no") and c.choices[0].finish_reason == "stop", c)
    st, e = srv.request("POST", "/v1/chat/completions", {
        "messages": USER, "response_format": {"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"not": {"type": "string"}}}}})
    check(st == 400 and "'not'" in e["error"]["message"], ("a refused keyword is named", st, e))


def test_refusals(srv, plain):
    body = {"messages": USER, "tools": [WEATHER]}
    st, e = plain.request("POST", "/v1/chat/completions", body)
    check(st == 400 and "no tool-call format" in e["error"]["message"], (st, e))
    st, e = srv.request("POST", "/v1/chat/completions",
                        dict(body, tool_choice={"type": "function",
                                                "function": {"name": "nope"}}))
    check(st == 400 and "nope" in e["error"]["message"], (st, e))
    st, e = srv.request("POST", "/v1/completions", {"prompt": "hi", "tools": [WEATHER]})
    check(st == 400 and "tools" in e["error"]["message"], (st, e))
    st, e = srv.request("POST", "/v1/chat/completions",
                        dict(body, tools=[{"type": "function", "function": {"name": 3}}]))
    check(st == 400 and "tools[0]" in e["error"]["message"], (st, e))


def test_harmony(srv):
    client = client_of(srv)
    # (gpt-oss's template reads every tool's description: WEATHER has one)
    kw = dict(model=MODEL, messages=USER, temperature=0, max_tokens=80)
    both = (r"<\|channel\|>analysis<\|message\|>[a-z]{3,8}<\|end\|>"
            r"<\|start\|>assistant<\|channel\|>final<\|message\|>[a-z]{3,8}")
    r = client.chat.completions.create(**kw, extra_body={"guided_regex": both})
    m = r.choices[0].message
    reasoning = (m.model_extra or {}).get("reasoning_content")
    check(reasoning and 3 <= len(reasoning) <= 8 and reasoning.isalpha(), r)
    check(m.content and 3 <= len(m.content) <= 8 and m.content.isalpha(), r)
    content, sreasoning, _, finish = assemble(list(client.chat.completions.create(
        **kw, stream=True, extra_body={"guided_regex": both})))
    check((content, sreasoning, finish) == (m.content, reasoning, "stop"), (content, sreasoning))

    call = (r"<\|channel\|>commentary to=functions\.get_weather <\|constrain\|>json"
            r'<\|message\|>\{"city": "(Paris|Lima)", "days": [1-7]\}')
    r = client.chat.completions.create(**kw, tools=[WEATHER],
                                       extra_body={"guided_regex": call})
    ch = r.choices[0]
    calls = ch.message.tool_calls or []
    check(ch.finish_reason == "tool_calls" and [c.function.name for c in calls] == ["get_weather"],
          r)
    check(weather_args_ok(calls[0].function.arguments) and calls[0].id.startswith("call_"), r)
    content, _, scalls, finish = assemble(list(client.chat.completions.create(
        **kw, tools=[WEATHER], stream=True, extra_body={"guided_regex": call})))
    check(finish == "tool_calls" and [(v["name"], json.loads(v["arguments"]))
                                      for _, v in sorted(scalls.items())]
          == [("get_weather", json.loads(calls[0].function.arguments))], scalls)

    history = USER + [
        {"role": "assistant", "content": None, "reasoning_content": "Look it up.",
         "tool_calls": [{"id": calls[0].id, "type": "function", "function": {
             "name": "get_weather", "arguments": calls[0].function.arguments}}]},
        {"role": "tool", "tool_call_id": calls[0].id, "content": '{"temperature_c": 21}'}]
    st, tok = srv.request("POST", "/tokenize", {"messages": history, "tools": [WEATHER]})
    check(st == 200, tok)
    text = srv.request("POST", "/detokenize", {"tokens": tok["tokens"]})[1]["prompt"]
    for want in ("<|channel|>analysis<|message|>Look it up.<|end|>",
                 "assistant to=functions.get_weather", "<|start|>functions.get_weather",
                 "temperature_c"):  # (the template writes the tool's result through tojson)
        check(want in text, ("the rendered harmony history lacks", want, text))

    st, e = srv.request("POST", "/v1/chat/completions",
                        {"messages": USER, "tools": [WEATHER], "tool_choice": "required"})
    check(st == 400 and "harmony" in e["error"]["message"], (st, e))

    # unforced: SmolLM2 does not write harmony, so its text is the content
    r = client.chat.completions.create(**kw)
    plain = client.completions.create(model=MODEL, prompt=text_of_prompt(srv, USER),
                                      temperature=0, max_tokens=80)
    check(r.choices[0].message.content == plain.choices[0].text, (r, plain))


def text_of_prompt(srv, messages):
    tok = srv.request("POST", "/tokenize", {"messages": messages})[1]
    return srv.request("POST", "/detokenize", {"tokens": tok["tokens"]})[1]["prompt"]


def test_think_open(srv):
    """A template whose generation prompt opens a think block (QwQ, Qwen3
    thinking): a constrained reply closes it empty first, so the answer is
    content (a JSON object, a tool call), not reasoning_content."""
    client = client_of(srv)
    st, tok = srv.request("POST", "/tokenize", {"messages": USER})
    check(st == 200, tok)
    prompt = srv.request("POST", "/detokenize", {"tokens": tok["tokens"]})[1]["prompt"]
    check(prompt.rstrip().endswith("<think>"), ("the template does not open a think block", prompt))
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    for stream in (False, True):
        kw = dict(model=MODEL, messages=USER, temperature=0, max_tokens=40,
                  response_format={"type": "json_schema", "json_schema": {"name": "x",
                                                                          "schema": schema}})
        if stream:
            content, reasoning, _, finish = assemble(list(client.chat.completions.create(
                **kw, stream=True)))
        else:
            r = client.chat.completions.create(**kw)
            m = r.choices[0].message
            content, reasoning = m.content, (m.model_extra or {}).get("reasoning_content")
            finish = r.choices[0].finish_reason
        check(finish == "stop" and not reasoning, (stream, content, reasoning, finish))
        check(set(json.loads(content)) == {"ok"}, (stream, content))
    r = client.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER, TIME],
                                       tool_choice="required", temperature=0, max_tokens=200)
    ch = r.choices[0]
    check(ch.finish_reason == "tool_calls" and ch.message.tool_calls, r)
    # unconstrained, the reply starts inside the block: reasoning until </think>
    r = client.chat.completions.create(model=MODEL, messages=USER, temperature=0, max_tokens=4)
    m = r.choices[0].message
    check((m.model_extra or {}).get("reasoning_content") and not m.content, r)


def main():
    if not os.path.exists(model_path):
        print("SKIP: %s not found (scripts/fetch-model)" % model_path)
        return 77
    with tempfile.TemporaryDirectory(prefix="plume_tools_") as tmp:
        path = os.path.join(tmp, "hermes.jinja")
        with open(path, "w") as f:
            f.write(TEMPLATE)
        if not os.path.exists(harmony_template):
            print("%s is missing: run scripts/fetch-templates" % harmony_template)
            return 1
        think_path = os.path.join(tmp, "hermes-think.jinja")
        with open(think_path, "w") as f:
            f.write(TEMPLATE.replace("{%- if enable_thinking is defined and enable_thinking is "
                                     "false %}", "<think>\n{%- if false %}"))
        srv = Server(plume, model_path, "--chat-template", path)
        plain = Server(plume, model_path)
        harmony = think = None
        try:
            client = client_of(srv)
            test_tool_round_trip(srv, client)
            test_reasoning(client)
            test_kwargs_and_format(srv, client)
            test_refusals(srv, plain)
            harmony = Server(plume, model_path, "--chat-template", harmony_template)
            test_harmony(harmony)
            think = Server(plume, model_path, "--chat-template", think_path)
            test_think_open(think)
        finally:
            srv.stop()
            plain.stop()
            if harmony:
                harmony.stop()
            if think:
                think.stop()
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
