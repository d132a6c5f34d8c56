"""A response model written to JSON once, by pydantic, straight into the response body.

FastAPI's default path for a returned model validates it against the route's
`response_model`, dumps it to Python objects and encodes those with `json.dumps`: three
passes over every result, receipt and evidence dict. The reward routes return their model
through `model_response` instead: one `model_dump_json` (pydantic-core, in Rust). The
route's `response_model` still documents the answer in OpenAPI.

Text that UTF-8 cannot encode (a lone surrogate stored before the service refused them)
makes pydantic raise; such an answer takes the old path, `SafeJSONResponse` (service/json_response.py
semantics: the surrogate goes out as its `\\udXXX` escape), so it is never a 500.
"""

from __future__ import annotations

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError
from starlette.responses import Response

from service.json_response import SafeJSONResponse


def model_response(model: BaseModel, status_code: int = 200) -> Response:
    try:
        body = model.model_dump_json(by_alias=True)
    except PydanticSerializationError:
        return SafeJSONResponse(model.model_dump(mode="json", by_alias=True), status_code=status_code)
    return Response(body, status_code=status_code, media_type="application/json")
