"""Calls the synchronous endpoints with the official Python clients, streaming and not, and validates every object
they return (and every streamed chunk or event) with the SDKs' runtime (pydantic) types.

Usage: sync_clients.py BASE_URL. Prints one line per failure and exits 1 if any failed.
"""
import sys
import warnings

import anthropic
import openai
from anthropic.types import Message, RawMessageStreamEvent
from openai.types import Completion, CreateEmbeddingResponse
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

base = sys.argv[1]
oa = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
an = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0)
user = [{"role": "user", "content": "Tell me about Rome."}]
failures = []


def valid(kind, model, obj):
    try:
        model.model_validate(obj.to_dict() if hasattr(obj, "to_dict") else obj)
    except Exception as e:  # noqa: BLE001 - each failure is reported, then the next check runs
        failures.append(f"{kind}: {e}")


valid("chat.completion", ChatCompletion, oa.chat.completions.create(model="any", messages=user, max_tokens=8))
valid("text_completion", Completion, oa.completions.create(model="any", prompt="Once upon", max_tokens=4, extra_body={"service_tier": "flex"}))
valid("embeddings", CreateEmbeddingResponse, oa.embeddings.create(model="any", input=["a", "b"]))
# A scored prompt: the client builds its Completion without validating, and keeps the first token's null (as OpenAI
# answers it) through model_dump and to_dict, with no serializer warning; validate.py says why the strict check differs.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    scored = oa.completions.create(model="any", prompt="Once upon", max_tokens=5, echo=True, logprobs=2)
    dumped = [scored.model_dump()["choices"][0]["logprobs"], scored.to_dict()["choices"][0]["logprobs"]]
    scored.model_dump_json()
lp = scored.choices[0].logprobs
if not isinstance(scored, Completion) or lp.token_logprobs[0] is not None or lp.top_logprobs[0] is not None:
    failures.append(f"scored prompt: the first token's log probability as the client read it: {lp!r}")
if not all(isinstance(x, float) for x in lp.token_logprobs[1:]) or not all(isinstance(x, dict) for x in lp.top_logprobs[1:]):
    failures.append("scored prompt: a token after the first without its log probability and alternatives")
for d in dumped:
    if d["token_logprobs"][0] is not None or d["token_logprobs"][1:] != lp.token_logprobs[1:]:
        failures.append(f"scored prompt: dumped as {d['token_logprobs'][:3]}")
if caught:
    failures.append(f"scored prompt: warnings {[str(w.message)[:200] for w in caught]}")
valid("response", Response, oa.responses.create(model="any", input="Say hi", max_output_tokens=8))
text = ""
chunks = 0
for chunk in oa.chat.completions.create(model="any", messages=user, max_tokens=12, stream=True, stream_options={"include_usage": True}):
    valid("chat.completion.chunk", ChatCompletionChunk, chunk)
    chunks += 1
    for c in chunk.choices:
        text += c.delta.content or ""
if chunks < 3 or not text:
    failures.append(f"chat stream: {chunks} chunks, text {text!r}")
for chunk in oa.completions.create(model="any", prompt="Once upon", max_tokens=6, stream=True):
    # The SDK reads completion chunks as Completion, whose finish_reason may not be null; OpenAI's chunks before the
    # last carry null there all the same, as these do. The closing chunk is checked.
    if chunk.choices[0].finish_reason is not None:
        valid("text_completion chunk", Completion, chunk)
response_events = TypeAdapter(ResponseStreamEvent)
for event in oa.responses.create(model="any", input="Say hi", max_output_tokens=12, stream=True):
    try:
        response_events.validate_python(event.to_dict())
    except Exception as e:  # noqa: BLE001
        failures.append(f"response event {event.type}: {e}")
valid("message", Message, an.messages.create(model="m", max_tokens=8, messages=user))
events = TypeAdapter(RawMessageStreamEvent)
with an.messages.stream(model="m", max_tokens=12, messages=user) as stream:
    for event in stream:
        if event.type in ("text", "input_json"):
            continue  # the helper's own events, derived from the raw ones
        try:
            events.validate_python(event.to_dict())
        except Exception as e:  # noqa: BLE001
            failures.append(f"stream event {event.type}: {e}")
    valid("streamed message", Message, stream.get_final_message())

for f in failures:
    print(f)
sys.exit(1 if failures else 0)
