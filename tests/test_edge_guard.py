"""The edge, second round (issue 22), through real HTTP on SQLite and on Postgres: the key
is checked and the body capped before anything is parsed, hostile shapes and values are a
4xx naming the field, a request too big to ever fit names the limit, revoked keys stop at
once everywhere, and group ids live in the caller's namespace. Each hostile case is
followed by an honest request that still gets its answer."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from service.store import AuditStore
from service.tables import EvalRow
from service.testing.cli import run_cli
from service.testing.ui import sign_in
from tests.conftest import REPO, LiveServer

# A real server process: raw sockets against its edge (slowloris, headers before the body).
pytestmark = pytest.mark.slow

MAX_BODY = 1_000_000
INFLIGHT = 8
HONEST = {"verifier": "math", "task": {"answer": "2"}, "responses": [r"\boxed{2}", r"\boxed{3}"]}


def _postgres_database() -> Iterator[str]:
    import psycopg

    url = os.environ.get("ASSAY_TEST_POSTGRES_URL") or subprocess.run(
        [str(REPO / "scripts" / "postgres.sh"), "start"], capture_output=True, text=True, check=True).stdout.strip()
    name = f"assay_edge_{uuid.uuid4().hex[:10]}"
    admin = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    workdir = tmp_path_factory.mktemp(f"edge-{request.param}")
    env = {"ASSAY_MAX_BODY_BYTES": str(MAX_BODY), "ASSAY_MAX_INFLIGHT_RESPONSES": str(INFLIGHT),
           "ASSAY_MAX_EVAL_TASKS": "50"}
    databases = _postgres_database() if request.param == "postgres" else None
    if databases is not None:
        env["ASSAY_DATABASE_URL"] = next(databases)
    live = LiveServer(workdir, env=env)
    try:
        yield live
    finally:
        live.stop()
        if databases is not None:
            next(databases, None)


@pytest.fixture(scope="module")
def client(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def _honest(client: httpx.Client) -> None:
    reply = client.post("/v1/groups", json={"groups": [HONEST]})
    assert reply.status_code == 200 and reply.json()["groups"][0]["rewards"] == [1.0, 0.0], reply.text


def _raw(body: str, client: httpx.Client, path: str = "/v1/groups") -> httpx.Response:
    """Send JSON text as written (lone surrogates as `\\ud800` escapes, NaN, 1e400)."""
    return client.post(path, content=body.encode(), headers={"Content-Type": "application/json"})


def _field_4xx(reply: httpx.Response, *words: str) -> None:
    assert 400 <= reply.status_code < 500, (reply.status_code, reply.text[:500])
    detail = reply.json()["detail"]  # the answer is valid JSON, whatever it echoes
    for word in words:
        assert word in str(detail), (word, detail)


# ------------------------------------------------------------------ before the body

def _status_of_headers_only(server: LiveServer, headers: str) -> tuple[int, float]:
    """Send a request's headers, declaring a body that never comes: the status line must arrive anyway."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as s:
        s.sendall(headers.encode())
        first = s.recv(200).decode(errors="replace")
    return int(first.split()[1]), time.monotonic() - started


def test_a_request_without_a_valid_key_is_refused_before_its_body_is_read(server: LiveServer, client: httpx.Client):
    for auth in ("", "Authorization: Bearer ak_0000_nope\r\n"):
        status, took = _status_of_headers_only(
            server, f"POST /v1/groups HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n"
                    "Content-Length: 900000\r\n\r\n")
        assert status == 401 and took < 15
    # OpenRLHF's key in the query string is checked as early.
    status, _ = _status_of_headers_only(
        server, "POST /v1/openrlhf?api_key=ak_0000_nope HTTP/1.1\r\nHost: x\r\nContent-Length: 900000\r\n\r\n")
    assert status == 401
    _honest(client)


def test_an_oversized_chunked_body_is_a_413(client: httpx.Client):
    def chunks() -> Iterator[bytes]:
        yield b'{"groups": [' + b" " * 1000
        for _ in range(2 * MAX_BODY // 65536 + 2):
            yield b" " * 65536

    reply = client.post("/v1/groups", content=chunks(), headers={"Content-Type": "application/json"})
    _field_4xx(reply, str(MAX_BODY))
    assert reply.status_code == 413
    _honest(client)


@pytest.mark.parametrize("depth", [200, 980, 5000])
def test_deeply_nested_json_is_a_4xx_before_it_is_parsed(client: httpx.Client, depth: int):
    task = '{"answer": "2", "prompt": ' + '{"a": ' * depth + "1" + "}" * depth + "}"
    reply = _raw('{"groups": [{"verifier": "math", "responses": ["2"], "task": ' + task + "}]}", client)
    _field_4xx(reply, "deep")
    _honest(client)


# ------------------------------------------------------------------ values

@pytest.mark.parametrize("body, field", [
    ('{"groups": [{"verifier": "math", "task": {"answer": "2", "flag_policy": {"\\ud800x": "fail"}},'
     ' "responses": ["2"]}]}', "flag_policy"),
    ('{"groups": [{"verifier": "math", "task": {"answer": "2", "reward_weights": {"\\udfff": 1}},'
     ' "responses": ["2"]}]}', "reward_weights"),
    ('{"groups": [{"verifier": "math", "task": {"answer": "2", "reward_weights": {"correctness": NaN}},'
     ' "responses": ["2"]}]}', "reward_weights.correctness"),
    ('{"groups": [{"verifier": "math", "task": {"answer": "2", "failure_value": 1e400},'
     ' "responses": ["2"]}]}', "failure_value"),
    ('{"groups": [{"verifier": "math", "task": {"answer": "2", "failure_value": -Infinity},'
     ' "responses": ["2"]}]}', "failure_value"),
    ('{"groups": [{"verifier": "math", "task": {"answer": "2", "failure_value": 7},'
     ' "responses": ["2"]}]}', "failure_value"),
    ('{"groups": [{"verifier": "math", "task": {"answer": "2"}, "responses": ["2"], "\\ud800": 1}]}', "groups[0]"),
])
def test_bad_keys_and_numbers_are_a_422_naming_the_field(client: httpx.Client, body: str, field: str):
    _field_4xx(_raw(body, client), field)
    _honest(client)


def test_openrlhf_extra_fields_with_lone_surrogates_are_a_422(client: httpx.Client):
    _field_4xx(_raw('{"query": ["q 2"], "labels": ["2"], "x\\ud800": 1}', client, "/v1/openrlhf"), "x\\ud800")
    reply = client.post("/v1/openrlhf", json={"query": ["q \\boxed{2}"], "labels": ["2"]})
    assert reply.status_code == 200 and reply.json()["rewards"] == [1.0]


def test_eval_family_names_and_labels_are_unicode(client: httpx.Client):
    body = '{"name": "n", "checkpoint": "c", "families": {"\\ud800": [' + json.dumps(HONEST) + "]}}"
    _field_4xx(_raw(body, client, "/v1/evals"), "families")
    record = client.post("/v1/groups", json={"groups": [HONEST]}).json()["groups"][0]["results"][0]["record_id"]
    _field_4xx(_raw('{"label": "agree", "note": "\\udc00"}', client, f"/v1/records/{record}/labels"), "note")
    assert client.post(f"/v1/records/{record}/labels", json={"label": "agree"}).status_code == 201


@pytest.mark.parametrize("after", [2**70, -(2**70), 2**63])
def test_a_cursor_past_64_bits_is_a_422(client: httpx.Client, after: int):
    _field_4xx(client.get("/v1/records", params={"after": after}), "after")
    assert client.get("/v1/records", params={"after": 0}).status_code == 200


# ------------------------------------------------------------------ limits

def test_a_request_too_big_to_ever_fit_names_the_limit(client: httpx.Client):
    groups = {"groups": [{**HONEST, "responses": [r"\boxed{2}"] * 3}] * 3}  # 9 > 8 in flight
    reply = client.post("/v1/groups", json=groups)
    assert reply.status_code in (413, 422) and "max_inflight_responses" in reply.json()["detail"], reply.text
    # OpenRLHF and evals split their work to fit instead.
    answer = client.post("/v1/openrlhf", json={"query": [f"q \\boxed{{{k}}}" for k in range(9)],
                                               "labels": [str(k) for k in range(9)]})
    assert answer.status_code == 200 and answer.json()["rewards"] == [1.0] * 9, answer.text
    run = client.post("/v1/evals", json={"name": "fit", "checkpoint": "c",
                                         "families": {"math": [{**HONEST, "responses": [r"\boxed{2}"] * 3}] * 3}})
    assert run.status_code == 201 and run.json()["overall"]["n_responses"] == 9, run.text
    # One group larger than the in-flight budget can never be verified: named, not retried.
    big = client.post("/v1/openrlhf", json={"query": ["q 2"] * 9, "labels": ["2"] * 9})
    assert big.status_code in (413, 422) and "max_inflight_responses" in big.json()["detail"], big.text


def test_eval_task_lists_are_limited_before_any_work(client: httpx.Client):
    tasks = [{"verifier": "math", "task_id": f"missing-{i}", "responses": ["2"]} for i in range(51)]
    started = time.monotonic()
    reply = client.post("/v1/evals", json={"name": "n", "checkpoint": "c", "families": {"math": tasks}})
    _field_4xx(reply, "families", "50")
    assert time.monotonic() - started < 10


def test_every_list_in_a_groups_request_is_limited(client: httpx.Client):
    reply = client.post("/v1/groups", json={"groups": [HONEST] * 65})
    _field_4xx(reply, "groups", "64")
    reply = client.post("/v1/groups", json={"groups": [{**HONEST, "responses": ["2"] * 65}]})
    _field_4xx(reply, "groups[0].responses", "64")


def test_labels_per_record_are_bounded(client: httpx.Client):
    record = client.post("/v1/groups", json={"groups": [HONEST]}).json()["groups"][0]["results"][1]["record_id"]
    statuses = [client.post(f"/v1/records/{record}/labels", json={"label": "agree", "note": "n" * 100}).status_code
                for _ in range(101)]
    assert statuses[:100] == [201] * 100 and statuses[100] in (409, 422)
    _field_4xx(client.post(f"/v1/records/{record}/labels", json={"label": "agree", "note": "n" * 5000}), "note")


# ------------------------------------------------------------------ keys

def _cli(server: LiveServer, *args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    """`assay keys ARGS` on the server's database: in this process (service/testing/cli.py), or with
    `process`, another process as an operator's shell would run it."""
    if not process:
        return run_cli(["keys", *args], server.env())
    return subprocess.run([sys.executable, "-m", "service.cli", "keys", *args], env=server.env(), cwd=REPO,
                          capture_output=True, text=True)


def test_a_revoked_key_stops_at_once_everywhere(server: LiveServer, client: httpx.Client):
    key = server.create_key("reward,audit")
    key_id = key.split("_")[1]
    browser = sign_in(server, key)
    with server.client(key) as own:
        assert own.post("/v1/groups", json={"groups": [HONEST]}).status_code == 200
    assert browser.get("/ui/records").status_code == 200
    listed = _cli(server, "list")
    assert listed.returncode == 0 and key_id in listed.stdout and key.split("_", 2)[2] not in listed.stdout
    revoked = _cli(server, "revoke", key_id, "--reason", "leaked in a log", process=True)
    assert revoked.returncode == 0, revoked.stderr
    with server.client(key) as own:
        assert own.post("/v1/groups", json={"groups": [HONEST]}).status_code == 401
    plain = httpx.post(f"{server.url}/v1/openrlhf", params={"api_key": key}, json={"query": ["2"], "labels": ["2"]})
    assert plain.status_code == 401
    assert browser.get("/ui/records").status_code == 303
    browser.close()
    assert "revoked" in _cli(server, "list").stdout
    # The admin endpoints: list, revoke (an INSERT into key_revocations), revoking twice is a no-op.
    other = server.create_key("reward")
    other_id = other.split("_")[1]
    keys = client.get("/v1/keys").json()["keys"]
    assert {k["key_id"] for k in keys} >= {key_id, other_id}
    assert next(k for k in keys if k["key_id"] == key_id)["revoked"] is True
    assert all("secret" not in json.dumps(k) and other.split("_", 2)[2] not in json.dumps(k) for k in keys)
    with server.client(other) as own:
        assert own.get("/v1/keys").status_code == 403
    assert client.post(f"/v1/keys/{other_id}/revoke", json={"reason": "rotated"}).status_code == 200
    assert client.post(f"/v1/keys/{other_id}/revoke", json={}).status_code == 200
    assert client.post("/v1/keys/nosuchkey/revoke", json={}).status_code == 404
    with server.client(other) as own:
        assert own.post("/v1/groups", json={"groups": [HONEST]}).status_code == 401
    _honest(client)


# ------------------------------------------------------------------ groups per key

def test_the_same_group_id_from_two_keys_is_two_groups(server: LiveServer, client: httpx.Client):
    a, b = server.create_key("reward"), server.create_key("reward")
    group_id = f"grp-{uuid.uuid4().hex[:8]}"
    task = {"answer": "2", "prompt": f"namespaced {group_id}"}
    with server.client(a) as ca, server.client(b) as cb:
        ra = ca.post("/v1/groups", json={"groups": [{"verifier": "math", "task": task, "group_id": group_id,
                                                      "responses": [r"\boxed{2}", r"\boxed{2}"]}]})
        rb = cb.post("/v1/groups", json={"groups": [{"verifier": "math", "task": task, "group_id": group_id,
                                                      "responses": [r"\boxed{3}", r"\boxed{3}"]}]})
    assert ra.json()["groups"][0]["group_id"] == rb.json()["groups"][0]["group_id"] == group_id
    a_id, b_id = a.split("_")[1], b.split("_")[1]
    mine = client.get("/v1/records", params={"group_id": group_id, "caller_key_id": a_id}).json()["records"]
    assert len(mine) == 2 and {r["caller_key_id"] for r in mine} == {a_id}
    listed = subprocess.run([sys.executable, "-m", "service.cli", "audit", "list", "--group-id", group_id,
                             "--key", b_id], env=server.env(), cwd=REPO, capture_output=True, text=True, check=True)
    assert len(listed.stdout.splitlines()) == 2 and listed.stdout.count("incorrect") == 2, listed.stdout
    task_hash = mine[0]["task_hash"]
    stats = client.get("/v1/tasks/stats", params={"task_hash": task_hash}).json()["tasks"]
    assert stats[0]["groups"] == 2 and stats[0]["zero_variance_share"] == 1.0, stats
    browser = sign_in(server, server.create_key("audit"))
    page = browser.get(f"/ui/groups/{group_id}", params={"key": a_id})
    assert page.status_code == 200 and len(_record_links(page.text)) == 2, page.text[-2000:]
    ambiguous = browser.get(f"/ui/groups/{group_id}")
    assert ambiguous.status_code == 409 and a_id in ambiguous.text and b_id in ambiguous.text
    filtered = browser.get("/ui/records", params={"group": group_id, "key": b_id})
    assert filtered.status_code == 200 and len(_record_links(filtered.text)) == 2
    browser.close()


def _record_links(html: str) -> set[str]:
    return set(re.findall(r'href="/ui/records/([0-9a-f]{32})"', html))


# ------------------------------------------------------------------ viewer

def test_viewer_pages_survive_stored_lone_surrogates(server: LiveServer, client: httpx.Client):
    """Evaluations stored before the check existed keep rendering."""
    good = client.post("/v1/evals", json={"name": "ok", "checkpoint": "c", "families": {"math": [HONEST]}}).json()
    store = AuditStore(server.db_url)
    bad_id = uuid.uuid4().hex
    # Family names live in the layout's JSON (stored escaped, read back as lone surrogates).
    store.add_eval(EvalRow(id=bad_id, name="old", checkpoint="c", caller_key_id="old",
                           layout={"fam\ud800": [], "math": []}))
    store.engine.dispose()
    browser = sign_in(server, server.create_key("audit"))
    for path in ("/ui/evals", f"/ui/evals/{bad_id}", f"/ui/evals/{bad_id}/compare/{good['id']}"):
        assert browser.get(path).status_code == 200, path
    assert client.get(f"/v1/evals/{bad_id}").status_code == 200
    assert browser.get("/ui/records", params={"after": str(2**70)}).status_code == 422
    browser.close()


def test_oversized_bodies_on_viewer_forms_are_a_413(server: LiveServer):
    browser = sign_in(server, server.create_key("audit"))
    reply = browser.post("/ui/sign-out", content=b"csrf_token=" + b"x" * (MAX_BODY + 10),
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert reply.status_code == 413
    assert browser.get("/ui/records").status_code == 200
    browser.close()


def test_export_of_many_records_streams(server: LiveServer):
    browser = sign_in(server, server.create_key("audit"))
    with browser.stream("GET", "/ui/export") as reply:
        assert reply.status_code == 200 and reply.headers["content-type"] == "application/zip"
        assert "content-length" not in reply.headers  # streamed, not built whole first
        data = b"".join(reply.iter_bytes())
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = z.namelist()
        lines = z.read(next(n for n in names if n.endswith("records.jsonl"))).decode().splitlines()
        script = z.read(next(n for n in names if n.endswith("data.js"))).decode()
    assert lines and all(json.loads(line)["id"] for line in lines)
    bundle = json.loads(script.removeprefix("window.ASSAY_BUNDLE = ").rstrip().rstrip(";"))
    assert bundle["meta"]["count"] == len(lines) == len(bundle["records"])
    browser.close()


def test_server_log_has_no_traceback(server: LiveServer):
    assert "Traceback" not in server.log_path.read_text(), server.log_path.read_text()[-3000:]
