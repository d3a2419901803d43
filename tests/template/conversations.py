"""The conversations the template conformance test renders: every shape a
chat template branches on (no system message, system, multi-turn, tool
definitions, assistant tool calls, tool results, reasoning content, content
parts, unicode, generation prompt on and off, chat_template_kwargs)."""

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "max_results": {"type": "integer", "description": "How many results", "default": 5},
                "safe": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["query"],
        },
    },
}
TOOLS = [WEATHER, SEARCH]


def call(name, args, cid="call_1"):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def conversations():
    """Returns (name, messages, tools, add_generation_prompt, extra kwargs) tuples."""
    u = {"role": "user", "content": "What is the capital of France?"}
    a = {"role": "assistant", "content": "The capital of France is Paris."}
    u2 = {"role": "user", "content": "And of Italy?"}
    sys = {"role": "system", "content": "You are a helpful assistant."}
    tc = {"role": "assistant", "content": "",
          "tool_calls": [call("get_weather", {"city": "Paris", "unit": "celsius"})]}
    tr = {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
          "content": '{"temperature": 18, "condition": "sunny"}'}
    final = {"role": "assistant", "content": "It is 18 degrees and sunny in Paris."}
    uw = {"role": "user", "content": "What's the weather in Paris?"}
    think = {"role": "assistant", "content": "Paris.",
             "reasoning_content": "The user asks for the capital of France. That is Paris."}
    out = [
        ("user", [u], None, True, {}),
        ("system_user", [sys, u], None, True, {}),
        ("multi_turn", [u, a, u2], None, True, {}),
        ("system_multi_turn", [sys, u, a, u2], None, True, {}),
        ("no_generation_prompt", [u, a], None, False, {}),
        ("system_no_generation_prompt", [sys, u, a], None, False, {}),
        ("tools_user", [uw], TOOLS, True, {}),
        ("tools_system_user", [sys, uw], TOOLS, True, {}),
        ("tool_call", [uw, tc], TOOLS, False, {}),
        ("tool_round_trip", [uw, tc, tr], TOOLS, True, {}),
        ("tool_round_trip_final", [sys, uw, tc, tr, final], TOOLS, False, {}),
        ("parallel_tool_calls",
         [uw, {"role": "assistant", "content": None,
               "tool_calls": [call("get_weather", {"city": "Paris"}, "call_1"),
                              call("search", {"query": "Paris events", "max_results": 3}, "call_2")]},
          {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "18C"},
          {"role": "tool", "tool_call_id": "call_2", "name": "search", "content": "A concert."}],
         TOOLS, True, {}),
        ("tool_call_string_args",
         [uw, {"role": "assistant", "content": "",
               "tool_calls": [call("get_weather", '{"city": "Paris"}')]}, tr],
         TOOLS, True, {}),
        ("reasoning", [u, think, u2], None, True, {}),
        ("reasoning_last", [u, think], None, False, {}),
        ("reasoning_tool_call",
         [uw, dict(tc, reasoning_content="I should call the weather tool."), tr], TOOLS, True, {}),
        ("enable_thinking_false", [u, a, u2], None, True, {"enable_thinking": False}),
        ("enable_thinking_true", [sys, u], None, True, {"enable_thinking": True}),
        ("unicode", [{"role": "user", "content": "Grüße! 東京の天気は? \"quoted\" 'single' \\ 🚀\n\ttab"},
                     {"role": "assistant", "content": "Très bien — 晴れ. <b>bold</b> & more"},
                     {"role": "user", "content": "  spaces around  "}], None, True, {}),
        ("long", [sys] + [m for i in range(5) for m in (
            {"role": "user", "content": f"Question number {i}?"},
            {"role": "assistant", "content": f"Answer number {i}."})] + [u], None, True, {}),
        ("content_parts", [{"role": "user", "content": [{"type": "text", "text": "Describe this."}]},
                           {"role": "assistant", "content": [{"type": "text", "text": "It is text."}]},
                           {"role": "user", "content": [{"type": "text", "text": "Thanks."}]}],
         None, True, {}),
        ("think_tags_in_content",
         [u, {"role": "assistant", "content": "<think>\nParis is the capital.\n</think>\n\nParis."}, u2],
         None, True, {}),
        ("empty_content", [{"role": "user", "content": ""}], None, True, {}),
        ("documents", [sys, {"role": "user", "content": "What do the documents say?"}], None, True,
         {"documents": [{"title": "Paris", "text": "Paris is the capital of France."},
                        {"title": "Rome", "text": "Rome is the capital of Italy."}]}),
        ("nested_tool_schema",
         [uw, {"role": "assistant", "content": "",
               "tool_calls": [call("book", {"trip": {"from": "Paris", "to": "Rome",
                                                     "dates": ["2026-08-01", "2026-08-09"]},
                                            "travellers": 2, "refundable": False, "note": None},
                                   "abc123XYZ")]},
          {"role": "tool", "tool_call_id": "abc123XYZ", "name": "book", "content": "booked"}],
         [{"type": "function", "function": {
             "name": "book", "description": "Book a trip.",
             "parameters": {"type": "object", "properties": {
                 "trip": {"type": "object", "properties": {
                     "from": {"type": "string"}, "to": {"type": "string"},
                     "dates": {"type": "array", "items": {"type": "string", "format": "date"}}},
                     "required": ["from", "to"]},
                 "travellers": {"type": "integer", "minimum": 1},
                 "refundable": {"type": "boolean"},
                 "note": {"type": ["string", "null"]}},
                 "required": ["trip"]}}}], True, {}),
        ("developer_role", [{"role": "developer", "content": "Answer in French."}, u], None, True,
         {}),
        ("system_only", [sys], None, True, {}),
    ]
    return out
