"""Validates what the service emitted with the official Python SDK's runtime (pydantic) types.

Reads {"kind": [object, ...], ...} as JSON on stdin; prints one line per failure and exits 1 if any failed.
Kinds name the SDK type each object must satisfy (see TYPES); list pages are checked as pages of their items.
"""
import base64
import json
import struct

from check_all import check_all
from openai.types import Batch, Completion, CreateEmbeddingResponse, FileDeleted, FileObject, Model, Upload
from openai.types.uploads import UploadPart
from openai.types.chat import ChatCompletion
from openai.types.responses import Response
from openai.types.shared import ErrorObject

TYPES = {
    "batch": Batch,
    "file": FileObject,
    "file_deleted": FileDeleted,
    "model": Model,
    "chat.completion": ChatCompletion,
    "text_completion": Completion,
    "embedding_list": CreateEmbeddingResponse,
    "response": Response,
    "error": ErrorObject,
    "upload": Upload,
    "upload.part": UploadPart,
}


def check(kind, obj):
    if kind.endswith("_page"):
        item = kind[: -len("_page")]
        if obj.get("object") != "list" or not isinstance(obj.get("data"), list) or not isinstance(obj.get("has_more"), bool):
            raise ValueError("not a list page: " + json.dumps({k: obj.get(k) for k in ("object", "has_more")}))
        for o in obj["data"]:
            check(item, o)
        return
    if kind == "error":
        if set(obj) != {"error"}:
            raise ValueError("the envelope holds more than 'error': " + ",".join(sorted(obj)))
        obj = obj["error"]
        for field in ("message", "type", "param", "code"):
            if field not in obj:
                raise ValueError("error." + field + " is missing")
    if kind == "embedding_list":
        obj = decoded_embeddings(obj)
    if kind == "text_completion.echo":
        kind, obj = "text_completion", scored_prompt_filled(obj)
    TYPES[kind].model_validate(obj)


def scored_prompt_filled(obj):
    """The one place OpenAI's answer and its Python SDK's types disagree. A completion that echoes its prompt with
    logprobs scores the prompt's tokens, and the first has no log probability (nothing comes before it): OpenAI's API
    answers null there in token_logprobs and top_logprobs, and so does this service. The SDK's Logprobs types those
    lists List[float] and List[Dict[str, float]], so its strict model_validate refuses that null; the client builds
    its objects without validating (as Completion.construct does) and keeps it. Here the null is allowed at that
    place alone, in both lists together, and everything else is validated strictly."""
    choices = []
    for c in obj.get("choices", []):
        lp = c.get("logprobs")
        if lp and lp.get("token_logprobs") and lp["token_logprobs"][0] is None:
            if not lp.get("top_logprobs") or lp["top_logprobs"][0] is not None:
                raise ValueError("the first token's log probability is null but its top_logprobs are not")
            lp = {**lp, "token_logprobs": [0.0, *lp["token_logprobs"][1:]], "top_logprobs": [{}, *lp["top_logprobs"][1:]]}
        else:
            raise ValueError("an echoed, scored prompt whose first token has a log probability (OpenAI answers null)")
        choices.append({**c, "logprobs": lp})
    return {**obj, "choices": choices}


def decoded_embeddings(obj):
    """A base64 embedding is a string on the wire, as OpenAI sends it; the SDK decodes it to float32s (little-endian)
    before its type applies (embeddings.create does so for the base64 it asks for), and so does this check. A string
    that is not whole float32s fails here."""
    data = []
    for item in obj.get("data", []):
        emb = item.get("embedding")
        if isinstance(emb, str):
            raw = base64.b64decode(emb, validate=True)
            if len(raw) % 4:
                raise ValueError("a base64 embedding that is not whole float32s")
            emb = list(struct.unpack("<%df" % (len(raw) // 4), raw))
        data.append({**item, "embedding": emb})
    return {**obj, "data": data}


check_all(check)
