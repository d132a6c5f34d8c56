"""Red team 8, the HTTP edge: bodies the JSON parser cannot even start on. A gzip-compressed
body (nothing on the service inflates it, so no decompression bomb either), raw binary, and a
deep run of brackets that never closes were each a 400 "There was an error parsing the body"
naming nothing; bad input must be a 4xx naming the field. The honest body right after is
rewarded, and JSON in UTF-16 (which the parser detects) is still read."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import pytest

from service.testing.app import AppServer, app_settings

HONEST = {"verifier": "math", "task": {"answer": "42"}, "response": "The answer is \\boxed{42}."}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    with AppServer(app_settings(tmp_path_factory.mktemp("redteam8-edge"))) as s:
        yield s


BODIES = {
    "gzip": (gzip.compress(json.dumps(HONEST).encode()), {"Content-Encoding": "gzip"}),
    "gzip_bomb": (gzip.compress(b"{" + b" " * (20 << 20) + b"}"), {"Content-Encoding": "gzip"}),
    "binary": (bytes(range(256)) * 4, {}),
    "latin1": (json.dumps(HONEST).replace("answer is", "r\u00e9ponse").encode("latin-1"), {}),
    "unclosed_brackets": (b"[" * 100_000, {}),
    "unclosed_in_object": (b'{"verifier": "math", "task": {"answer": ' + b"[" * 50_000 + b"}", {}),
    "mismatched_brackets": (b"[" * 40 + b"}" * 40 + b"{}" * 20, {}),
}


@pytest.mark.parametrize("name", list(BODIES))
def test_a_body_the_parser_cannot_start_on_is_a_422_naming_the_body(server: AppServer, name: str):
    body, headers = BODIES[name]
    with server.client(server.create_key("reward")) as c:
        reply = c.post("/v1/verify", content=body, headers={"Content-Type": "application/json", **headers})
        assert reply.status_code == 422, (reply.status_code, reply.text[:300])
        assert reply.json()["detail"].startswith("body"), reply.text[:300]
        groups = c.post("/v1/groups", content=body, headers={"Content-Type": "application/json", **headers})
        assert groups.status_code == 422, (groups.status_code, groups.text[:300])
        honest = c.post("/v1/verify", json=HONEST)
        assert honest.status_code == 200 and honest.json()["reward"] == 1.0, honest.text[:300]


def test_json_in_utf16_and_with_a_bom_is_still_read(server: AppServer):
    with server.client(server.create_key("reward")) as c:
        for body in (json.dumps(HONEST).encode("utf-16"), b"\xef\xbb\xbf" + json.dumps(HONEST).encode()):
            reply = c.post("/v1/verify", content=body, headers={"Content-Type": "application/json"})
            assert reply.status_code == 200 and reply.json()["reward"] == 1.0, reply.text[:300]
