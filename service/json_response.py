"""The service's JSON answer class (every route's default, and every error's)."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse


class SafeJSONResponse(JSONResponse):
    """JSON that can always be sent: a lone surrogate stored before the service refused them
    goes out as its `\\udXXX` escape (as `ensure_ascii` would write it), never as a 500."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None,
                          separators=(",", ":")).encode("utf-8", "backslashreplace")
