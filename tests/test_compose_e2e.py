"""The deployed stack, driven exactly as the operator docs say.

`docker compose up -d --wait` on a non-default ASSAY_PORT, a key from
`docker compose exec api assay keys create`, math and code groups scored through the API
(the code runs in hardened sibling containers that only `sandboxd` starts), records read
back from Postgres, then `down` / `up` and the same records read again; finally
`down --volumes`. On the way: what the defaults expose, and what the API container holds.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

# Starting the stack includes the one-shot `migrate` container before the API.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parent.parent
REQUIRED = "docker" in os.environ.get("ASSAY_TEST_BACKENDS", "")
# The tags compose will use (docker-compose.yml reads the same variables).
IMAGES = tuple(os.environ.get(var, default) for var, default in (
    ("ASSAY_SERVICE_IMAGE", "assay-service:latest"), ("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest"),
    ("ASSAY_POSTGRES_IMAGE", "assay-postgres:latest")))

MATH_GROUP = {"verifier": "math", "task": {"answer": "\\frac{1}{2}"},
              "responses": ["The answer is \\boxed{\\frac{1}{2}}", "\\boxed{0.5}", "\\boxed{2}", "no idea"]}
CODE_GROUP = {
    "verifier": "code",
    "task": {"language": "python", "entry_point": "add",
             "tests": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"},
    "responses": [
        "```python\ndef add(a, b):\n    return a + b\n```",
        "```python\ndef add(a, b):\n    return a * b\n```",
        # An escape attempt on the way: no network, no root fs, no docker socket in there.
        "```python\nimport os, socket\nopen('/var/run/docker.sock')\ndef add(a, b):\n    return a + b\n```",
    ],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    def __init__(self, project: str, port: int) -> None:
        self.project = project
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.env = {**os.environ, "ASSAY_PORT": str(port), "COMPOSE_PROJECT_NAME": project}

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["docker", "compose", "-f", str(REPO / "docker-compose.yml"), *args],
                              env=self.env, cwd=REPO, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            logs = subprocess.run(["docker", "compose", "-f", str(REPO / "docker-compose.yml"), "logs", "--tail", "60"],
                                  env=self.env, cwd=REPO, capture_output=True, text=True, timeout=60).stdout
            raise AssertionError(f"docker compose {' '.join(args)} failed: {done.stderr[-3000:]}\n{logs[-4000:]}")
        return done

    def up(self) -> None:
        self.compose("up", "-d", "--wait", timeout=600)

    def inspect(self, service: str) -> dict:
        container = self.compose("ps", "-q", service).stdout.strip()
        return json.loads(subprocess.run(["docker", "inspect", container], capture_output=True, text=True,
                                         check=True).stdout)[0]

    def run_in(self, service: str, *command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["docker", "compose", "-f", str(REPO / "docker-compose.yml"), "exec", "-T", service,
                               *command], env=self.env, cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    problem = None
    if shutil.which("docker") is None:
        problem = "no docker CLI"
    else:
        version = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        missing = [image for image in IMAGES
                   if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode]
        if version.returncode:
            problem = "no docker compose v2"
        elif missing:
            problem = f"images missing ({', '.join(missing)}): run `make images`"
    if problem:
        if REQUIRED:
            pytest.fail(f"ASSAY_TEST_BACKENDS names docker but {problem}")
        pytest.skip(problem)
    s = Stack(f"assay-e2e-{os.getpid()}", _free_port())
    try:
        s.up()
        yield s
    finally:
        s.compose("down", "--volumes", "--remove-orphans", timeout=300)


def _records(client: httpx.Client, ids: list[str]) -> dict[str, dict]:
    return {rid: client.get(f"/v1/records/{rid}").raise_for_status().json() for rid in ids}


def test_compose_stack_scores_groups_and_keeps_records_across_restart(stack: Stack):
    assert stack.port != 8000
    created = stack.compose("exec", "-T", "api", "assay", "keys", "create", "--scopes", "reward,audit")
    key = created.stdout.strip().splitlines()[-1]
    assert len(key) >= 20 and " " not in key
    headers = {"Authorization": f"Bearer {key}"}

    with httpx.Client(base_url=stack.url, headers=headers, timeout=180) as client:
        ready = client.get("/readyz").json()
        assert ready["sandbox"]["backend"] == "docker" and ready["sandbox"]["via"] == "sandboxd"
        scored = client.post("/v1/groups", json={"groups": [MATH_GROUP, CODE_GROUP]})
        assert scored.status_code == 200, scored.text
        math_group, code_group = scored.json()["groups"]
        assert math_group["rewards"] == [1.0, 1.0, 0.0, 0.0]
        assert code_group["rewards"][:2] == [1.0, 0.0]
        assert code_group["results"][2]["verdict"] != "correct"
        ids = [r["record_id"] for g in (math_group, code_group) for r in g["results"]]
        key_id = client.get("/v1/receipts/key").json()["key_id"]
        assert {r["receipt"]["key_id"] for g in (math_group, code_group) for r in g["results"]} == {key_id}
        before = _records(client, ids)
        assert {r["verdict"] for r in before.values()} >= {"correct", "incorrect"}
        assert {r["sandbox_backend"] for r in before.values()} == {"docker"}
        # The key cannot do what its scopes do not allow.
        assert client.post("/v1/tasks", json={"task_id": "x", "verifier": "math",
                                              "task": {"answer": "1"}}).status_code == 403

    stack.compose("down")
    stack.up()
    with httpx.Client(base_url=stack.url, headers=headers, timeout=60) as client:
        after = _records(client, ids)
        assert after == before
        listed = client.get("/v1/records", params={"limit": 100}).raise_for_status().json()
        assert {r["id"] for r in listed["records"]} >= set(ids)
        # The signing key lives in its own volume: the same key after the restart.
        assert client.get("/v1/receipts/key").json()["key_id"] == key_id
    # The records' chains and signed heads verify inside the stack (exit 0, else compose() raises).
    assert "INTACT" in stack.compose("exec", "-T", "api", "assay", "audit", "verify").stdout

    # The audit store really is the Postgres container (not a file in the API container).
    def psql(user: str, secret: str, sql: str) -> subprocess.CompletedProcess[str]:
        command = (f"PGPASSWORD=$(cat /run/{secret}/password) /usr/local/lib/pgbin/psql -h 127.0.0.1 -U {user} "
                   f"-d assay -v ON_ERROR_STOP=1 -Atc \"{sql}\"")
        return subprocess.run(["docker", "compose", "-f", str(REPO / "docker-compose.yml"), "exec", "-T",
                               "postgres", "sh", "-c", command], env=stack.env, cwd=REPO, capture_output=True,
                              text=True, timeout=60)

    counted = psql("assay", "assay-db-owner", "select count(*) from records")
    assert int(counted.stdout.strip()) >= len(ids), counted.stderr
    # The API's role reads and appends, but cannot change what is logged.
    assert psql("assay_app", "assay-db-app", "select count(*) from records").returncode == 0
    for statement in ("update records set reward = 0", "delete from records", "truncate records",
                      "drop trigger records_append_only on records", "update task_blobs set verifier = 'x'",
                      "delete from tasks", "update api_keys set scopes = 'admin'"):
        denied = psql("assay_app", "assay-db-app", statement)
        assert denied.returncode != 0 and ("permission denied" in denied.stderr or "owner" in denied.stderr)
    api_user = stack.compose("exec", "-T", "api", "sh", "-c", "echo $ASSAY_DB_USER").stdout.strip()
    assert api_user == "assay_app"


def test_compose_defaults_a_security_reviewer_accepts(stack: Stack):
    api, runner = stack.inspect("api"), stack.inspect("sandboxd")
    # Only the sandbox runner holds the Docker socket; the API holds none and runs as a
    # non-root user with no capabilities on a read-only image.
    def sockets(container: dict) -> list[str]:
        return [m["Source"] for m in container["Mounts"] if m["Source"].endswith("docker.sock")]
    assert sockets(runner) == ["/var/run/docker.sock"]
    for service in ("api", "postgres"):
        assert sockets(stack.inspect(service)) == [], service
    assert stack.run_in("api", "sh", "-c", "test -e /var/run/docker.sock").returncode == 1
    # The runner holds no database secret and cannot reach Postgres: its own network only.
    assert {m["Destination"] for m in runner["Mounts"]} == {"/var/run/docker.sock", "/run/assay-sandboxd"}
    assert set(runner["NetworkSettings"]["Networks"]) == {f"{stack.project}_sandbox"}
    assert f"{stack.project}_sandbox" not in stack.inspect("postgres")["NetworkSettings"]["Networks"]
    host = api["HostConfig"]
    assert api["Config"]["User"] == "10001:10001"
    assert stack.run_in("api", "id", "-u").stdout.strip() == "10001"
    assert (host["ReadonlyRootfs"], host["Privileged"], host["CapDrop"]) == (True, False, ["ALL"])
    assert "no-new-privileges:true" in host["SecurityOpt"] and not host.get("CapAdd")
    assert stack.run_in("api", "sh", "-c", "touch /opt/venv/x").returncode != 0
    # Published on loopback only; the internal networks have no route out.
    assert [b["HostIp"] for b in host["PortBindings"]["8000/tcp"]] == ["127.0.0.1"]
    assert "9100/tcp" not in host["PortBindings"] and not runner["HostConfig"]["PortBindings"]
    for network in ("backend", "sandbox"):
        found = json.loads(subprocess.run(["docker", "network", "inspect", f"{stack.project}_{network}"],
                                          capture_output=True, text=True, check=True).stdout)[0]
        assert found["Internal"] is True, network
    # No docs, no schema, no metrics on the published port; metrics on the unpublished one.
    with httpx.Client(base_url=stack.url, timeout=30) as client:
        for path in ("/docs", "/redoc", "/openapi.json", "/metrics"):
            assert client.get(path).status_code == 404, path
        assert client.get("/healthz").status_code == 200
    scraped = stack.run_in("api", "/opt/venv/bin/python", "-c",
                           "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9100/metrics').read()"
                           ".decode())")
    assert "assay_verifications_total" in scraped.stdout, scraped.stderr
    # The runner refuses anyone without the deployment secret (here: the API's network
    # position with a wrong secret), and serves the API with the right one.
    probe = ("import sys; from sandboxes.base import SandboxError; from sandboxes.remote import RemoteSandbox\n"
             "try:\n    RemoteSandbox('tcp://sandboxd:7070', b'x' * 64)\nexcept SandboxError as e:\n"
             "    print(e.cause); sys.exit(3)")
    wrong = stack.run_in("api", "/opt/venv/bin/python", "-c", probe)
    assert (wrong.returncode, wrong.stdout.strip()) == (3, "sandboxd_refused"), wrong.stderr
    right = stack.run_in("api", "/opt/venv/bin/python", "-c",
                         "from sandboxes.remote import RemoteSandbox, read_secret; "
                         "print(RemoteSandbox('tcp://sandboxd:7070', read_secret('/run/assay-sandboxd/secret')).name)")
    assert right.stdout.strip() == "docker", right.stderr
