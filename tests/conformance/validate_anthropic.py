"""Validates what the service emitted on Anthropic's routes with the official Python SDK's runtime (pydantic) types.

Reads {"kind": [object, ...], ...} as JSON on stdin; prints one line per failure and exits 1 if any failed.
"""
from check_all import check_all
from anthropic.types import ErrorResponse, ModelInfo
from anthropic.types.messages import DeletedMessageBatch, MessageBatch, MessageBatchIndividualResponse

TYPES = {
    "message_batch": MessageBatch,
    "result": MessageBatchIndividualResponse,
    "deleted": DeletedMessageBatch,
    "error": ErrorResponse,
    "model": ModelInfo,
}


def check(kind, obj):
    if kind.endswith("_page"):
        for field in ("data", "has_more", "first_id", "last_id"):
            if field not in obj:
                raise ValueError("the page has no " + field)
        for o in obj["data"]:
            check(kind[: -len("_page")], o)
        return
    if kind == "error" and set(obj) - {"type", "error", "request_id"}:
        raise ValueError("the envelope holds more than type, error and request_id: " + ",".join(sorted(obj)))
    # pydantic's model_validate checks required fields, types and literals (stop_reason, result.type...).
    parsed = TYPES[kind].model_validate(obj)
    if kind == "result" and parsed.result.type == "succeeded":
        for block in parsed.result.message.content:
            if block.type not in ("text", "tool_use"):
                raise ValueError("an unexpected content block: " + block.type)


check_all(check)
