"""The README's quick start on a machine with nothing on it.

A privileged container (so bubblewrap can make namespaces) from the Debian base that the
image build caches (`assay-base:bookworm`: debootstrap minbase + python3, python3-venv,
ca-certificates) gets a clean copy of the repository: tracked and untracked-but-not-ignored
files only, no .venv, no caches. In it, exactly as the README says:

1. `./scripts/serve.sh`; the key command it prints; the README's curl body gets the
   documented rewards;
2. `ASSAY_SKIP_DOCKER=1 ./scripts/test.sh FRESH_MACHINE_SUBSET` passes.

Everything comes from apt and PyPI over the host's network. The container gets only what
this network's machines are provisioned with, not caches: the host's CA bundle (the
network intercepts TLS) and pip's find-links directory of the machine image (PIP_FIND_LINKS,
a CPU build of torch; PyPI's build pulls several GB of CUDA libraries).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO, free_port

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BASE_IMAGE = os.environ.get("ASSAY_FRESH_BASE_IMAGE", "assay-base:bookworm")
REQUIRED = "docker" in os.environ.get("ASSAY_TEST_BACKENDS", "")
# Proves the install, Postgres and the bubblewrap sandbox: a live server on Postgres that
# verifies in the sandbox, and the sandbox's limits. Documented in the README.
FRESH_MACHINE_SUBSET = ["tests/test_audit_postgres.py", "tests/test_process_sandbox.py"]
# Minutes: most of it is pip installing the test extras (torch, transformers, trl) from PyPI.
SERVE_TIMEOUT_S, TESTS_TIMEOUT_S = 1500, 2700
README_REWARDS = [1.0, 0.0, 1.0, 0.0]
# --privileged fails where the engine itself runs without every capability (as in a
# container without CAP_SYS_RESOURCE): then all capabilities but that one, unconfined.
PRIVILEGED = (["--privileged"],
              ["--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE", "--security-opt", "seccomp=unconfined",
               "--security-opt", "apparmor=unconfined", "--security-opt", "systempaths=unconfined"])
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def clean_tree() -> bytes:
    """A tar of the files a clone would have: tracked plus untracked-not-ignored."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in sorted({n for n in listed if n}):
            path = REPO / name
            if path.is_file() or path.is_symlink():
                tar.add(path, arcname=f"assay/{name}", recursive=False)
    return buffer.getvalue()


def readme_example() -> dict:
    """The JSON body of the README's curl example, as printed there."""
    text = (REPO / "README.md").read_text()
    body = re.search(r"curl -s localhost:8000/v1/groups .*? -d '(\{.*?\})'\n", text, re.S)
    assert body, "the README's curl example is missing"
    return json.loads(body.group(1))


class Machine:
    def __init__(self, name: str) -> None:
        self.name = name

    def sh(self, script: str, timeout: float, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["docker", "exec", self.name, "bash", "-c", script], capture_output=True, text=True,
                              timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"`{script}` exited {done.returncode}:\n{done.stdout[-6000:]}\n{done.stderr[-4000:]}")
        return done


@pytest.fixture
def machine() -> Iterator[Machine]:
    problem = None
    if shutil.which("docker") is None or shutil.which("git") is None:
        problem = "no docker or git CLI"
    elif subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True).returncode:
        problem = f"{BASE_IMAGE} missing: scripts/build_images.sh makes it"
    if problem:
        if REQUIRED:
            pytest.fail(f"ASSAY_TEST_BACKENDS names docker but {problem}")
        pytest.skip(problem)
    name = f"assay-fresh-{os.getpid()}-{int(time.time())}"
    provision = []
    if HOST_CA.is_file():
        provision += ["-v", f"{HOST_CA}:/etc/assay-network-ca.pem:ro", "-e", "PIP_CERT=/etc/assay-network-ca.pem",
                      "-e", "SSL_CERT_FILE=/etc/assay-network-ca.pem"]
    find_links = os.environ.get("PIP_FIND_LINKS", "")
    if find_links and Path(find_links).is_dir():
        provision += ["-v", f"{find_links}:{find_links}:ro", "-e", f"PIP_FIND_LINKS={find_links}"]
    for privileges in PRIVILEGED:
        started = subprocess.run(["docker", "run", "-d", "--rm", *privileges, "--network", "host", "--name", name,
                                  "--label", "org.assay.test=fresh-machine", "-e", "PIP_DISABLE_PIP_VERSION_CHECK=1",
                                  *provision, BASE_IMAGE, "sleep", "infinity"], capture_output=True, text=True,
                                 timeout=120)
        if started.returncode == 0:
            break
    else:
        raise AssertionError(f"cannot start a privileged container: {started.stderr}")
    try:
        subprocess.run(["docker", "exec", "-i", name, "tar", "-x", "-C", "/root"], input=clean_tree(), check=True,
                       capture_output=True, timeout=120)
        yield Machine(name)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=120)


@pytest.mark.timeout(SERVE_TIMEOUT_S + TESTS_TIMEOUT_S + 300)
def test_readme_quick_start_and_tests_pass_on_a_fresh_machine(machine: Machine):
    timings: dict[str, float] = {}
    assert machine.sh("ls -A /root/assay", 30).stdout.split().count(".venv") == 0
    port, pg_port = free_port(), free_port()
    started = time.monotonic()
    machine.sh(f"cd /root/assay && (ASSAY_PORT={port} setsid ./scripts/serve.sh >/root/serve.log 2>&1 &"
               " echo $! >/root/serve.pid)", 30)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVE_TIMEOUT_S
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        alive = machine.sh("kill -0 $(cat /root/serve.pid)", 30, check=False).returncode == 0
        if not alive or time.monotonic() > deadline:
            raise AssertionError("serve.sh did not come up:\n" + machine.sh("tail -c 6000 /root/serve.log", 30).stdout)
        time.sleep(0.5)
    timings["serve.sh until ready"] = time.monotonic() - started

    log = machine.sh("cat /root/serve.log", 30).stdout
    printed = re.search(r"create an API key in another shell with:\n\s*(.+assay keys create --scopes reward,audit)",
                        log)
    assert printed, log[-3000:]
    key = machine.sh(f"cd /root/assay && {printed.group(1)}", 120).stdout.strip().splitlines()[-1]
    assert key.startswith("ak_")
    reply = httpx.post(f"{url}/v1/groups", json=readme_example(), headers={"Authorization": f"Bearer {key}"},
                       timeout=120)
    assert reply.status_code == 200, reply.text
    assert reply.json()["groups"][0]["rewards"] == README_REWARDS
    # Stopped before the tests start (their Postgres and servers take their own ports).
    # Gone or a zombie (the container's init, `sleep`, reaps nobody).
    machine.sh("pid=$(cat /root/serve.pid); kill -TERM $pid; for _ in $(seq 300); do"
               " state=$(cut -d' ' -f3 /proc/$pid/stat 2>/dev/null); [ -z \"$state\" ] || [ \"$state\" = Z ] && exit 0;"
               " sleep 0.1; done; kill -KILL $pid", 60, check=False)

    started = time.monotonic()
    tests = machine.sh(f"cd /root/assay && ASSAY_SKIP_DOCKER=1 ASSAY_PG_PORT={pg_port} ./scripts/test.sh -q "
                       + " ".join(FRESH_MACHINE_SUBSET) + " 2>&1", TESTS_TIMEOUT_S, check=False)
    timings["test.sh subset"] = time.monotonic() - started
    assert tests.returncode == 0, tests.stdout[-8000:]
    assert re.search(r"\d+ passed", tests.stdout), tests.stdout[-3000:]
    print("fresh machine timings (s):", {k: round(v) for k, v in timings.items()})
