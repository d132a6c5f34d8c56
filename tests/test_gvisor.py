"""gVisor (`runsc`) as the runtime of candidate containers: ASSAY_DOCKER_RUNTIME=runsc.

Runs where the Docker engine has a `runsc` runtime registered (Debian's `runsc` package
plus an entry in /etc/docker/daemon.json, docs/security.md); elsewhere the gVisor tests
skip and say why. A runtime the engine does not have is refused at start-up wherever an
engine runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes.base import Job, Limits, SandboxUnavailable
from tests.test_docker_backend import IMAGE, engine_or_skip
from verifiers.base import Verdict, VerifyContext
from verifiers.registry import get

pytestmark = pytest.mark.docker

ADD_TESTS = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"


@pytest.fixture(scope="module")
def client():
    return engine_or_skip()


@pytest.fixture(scope="module")
def gvisor(client) -> Iterator:
    from sandboxes.docker_backend import DockerSandbox

    runtimes = sorted((client.info().get("Runtimes") or {}).keys())
    if "runsc" not in runtimes:
        pytest.skip(f"gVisor cannot run here: the Docker engine has no `runsc` runtime (it has {runtimes}); "
                    "install Debian's runsc and register it in /etc/docker/daemon.json")
    # Registered is not yet runnable (nested virtualisation, no ptrace): try a bare container.
    try:
        client.containers.run(IMAGE, ["true"], runtime="runsc", network_disabled=True, remove=True)
    except Exception as exc:
        pytest.skip(f"gVisor cannot run here: `runsc` is registered but a bare container fails under it: {exc}")
    # A host label of its own: this process also owns other (runc) sandboxes in a whole-suite run.
    sandbox = DockerSandbox(image=IMAGE, workers=1, runtime="runsc", host_label=f"gvisor-test-{uuid.uuid4().hex[:8]}")
    yield sandbox
    sandbox.close()


def test_unknown_runtime_is_refused_at_start(client):
    from sandboxes.docker_backend import DockerSandbox

    with pytest.raises(SandboxUnavailable) as refused:
        DockerSandbox(image=IMAGE, workers=1, runtime="no-such-runtime")
    assert refused.value.cause == "runtime_missing" and "no-such-runtime" in str(refused.value)


def test_candidate_containers_run_under_gvisor(gvisor, client):
    # The job's kernel is gVisor's own (its log and its fixed version), not the host's.
    seen = gvisor.run(Job(command=["sh", "-c", "dmesg; cat /proc/version"], limits=Limits(wall_s=20)))
    assert seen.exit_code == 0, seen.stderr
    assert b"Starting gVisor" in seen.stdout
    host_version = Path("/proc/version").read_bytes()
    assert host_version not in seen.stdout
    # And the engine says so for every sandbox container this backend made.
    from sandboxes.docker_backend import LABEL, LABEL_HOST

    made = client.containers.list(filters={"label": [f"{LABEL}=1", f"{LABEL_HOST}={gvisor.host_label}"]})
    assert made and {c.attrs["HostConfig"]["Runtime"] for c in made} == {"runsc"}
    assert gvisor.describe()["runtime"] == "runsc"


def test_walls_and_verdicts_hold_under_gvisor(gvisor):
    wrote = gvisor.run(Job(command=["sh", "-c", "echo x > /opt/venv/owned"], limits=Limits(wall_s=10)))
    assert wrote.exit_code != 0
    net = gvisor.run(Job(command=["python3", "-c", "import socket; socket.create_connection(('1.1.1.1', 53), 2)"],
                         limits=Limits(wall_s=10)))
    assert net.exit_code != 0
    slow = gvisor.run(Job(command=["sleep", "30"], limits=Limits(wall_s=1)))
    assert slow.killed_by == "timeout"
    bomb = gvisor.run(Job(command=["python3", "-c", "b = bytearray(2 << 30)"], limits=Limits(wall_s=10, memory_mb=256)))
    assert bomb.exit_code != 0
    code = get("code")
    ctx = VerifyContext(sandbox=gvisor)
    task = code.parse_task({"entry_point": "add", "tests": ADD_TESTS})
    for hostile in ("```python\nimport sys\ndef add(a, b):\n    sys.exit(0)\n```",
                    "```python\nimport os\ndef add(a, b):\n    os._exit(0)\n```",
                    "```python\nclass E:\n    def __eq__(self, o):\n        return True\n"
                    "def add(a, b):\n    return E()\n```"):
        outcome = code.verify(task, hostile, ctx)
        assert outcome.verdict not in (Verdict.correct, Verdict.error), (hostile, outcome.verdict)
    honest = code.verify(task, "```python\ndef add(a, b):\n    return a + b\n```", ctx)
    assert (honest.verdict, honest.reward(task)) == (Verdict.correct, 1.0)
