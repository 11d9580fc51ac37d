"""The official Python clients' conversation loops: each reply appended to the conversation as the client returned it
(its pydantic object, which the client sends back as the fields the answer set), a tool's result after a call, and
the next request answered. Chat (plain and with tools), the Responses API's output items as input, and Anthropic's
content blocks as the assistant's turn.

Usage: conversation_loops.py BASE_URL. Prints one line per failure and exits 1 if any failed.
"""
import sys

import anthropic
import openai

base = sys.argv[1]
oa = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
an = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0)
weather = {
    "type": "object",
    "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
    "required": ["city"],
    "additionalProperties": False,
}
failures = []


def loop(name, run):
    try:
        run()
    except Exception as e:  # noqa: BLE001 - each loop's failure is reported, then the next runs
        failures.append(f"{name}: {type(e).__name__}: {e}")


def chat_plain():
    messages = [{"role": "user", "content": "Hello"}]
    first = oa.chat.completions.create(model="any", messages=messages, max_tokens=4)
    messages.append(first.choices[0].message)
    messages.append({"role": "user", "content": "And then?"})
    oa.chat.completions.create(model="any", messages=messages, max_tokens=4)


def chat_tools():
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": weather}}]
    messages = [{"role": "user", "content": "Weather in Rome?"}]
    called = oa.chat.completions.create(model="any", messages=messages, tools=tools, tool_choice="required")
    reply = called.choices[0].message
    if not reply.tool_calls:
        raise AssertionError("no tool call to answer")
    messages.append(reply)
    for call in reply.tool_calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "21 degrees"})
    oa.chat.completions.create(model="any", messages=messages, tools=tools, tool_choice="none", max_tokens=4)


def responses():
    tools = [{"type": "function", "name": "get_weather", "parameters": weather, "strict": True}]
    items = [{"role": "user", "content": "Weather in Rome?"}]
    called = oa.responses.create(model="any", input=items, tools=tools, tool_choice="required")
    items += called.output
    for call in [o for o in called.output if o.type == "function_call"]:
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": "21"})
    said = oa.responses.create(model="any", input=items, tools=tools, tool_choice="none", max_output_tokens=8)
    items += said.output
    items.append({"role": "user", "content": "Thanks"})
    oa.responses.create(model="any", input=items, max_output_tokens=4)


def messages():
    tools = [{"name": "get_weather", "input_schema": weather}]
    turns = [{"role": "user", "content": "Weather in Rome?"}]
    called = an.messages.create(model="m", max_tokens=256, messages=turns, tools=tools, tool_choice={"type": "any"})
    turns.append({"role": "assistant", "content": called.content})
    uses = [b for b in called.content if b.type == "tool_use"]
    if not uses:
        raise AssertionError("no tool use to answer")
    turns.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": u.id, "content": "21"} for u in uses]})
    said = an.messages.create(model="m", max_tokens=8, messages=turns, tools=tools, tool_choice={"type": "none"})
    turns.append({"role": "assistant", "content": said.content})
    turns.append({"role": "user", "content": "Thanks"})
    an.messages.create(model="m", max_tokens=4, messages=turns)


loop("chat, plain", chat_plain)
loop("chat, tools", chat_tools)
loop("responses", responses)
loop("messages", messages)
for f in failures:
    print(f)
sys.exit(1 if failures else 0)
