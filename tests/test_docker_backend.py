"""The docker backend's walls, each proven against the same attempt under plain `docker run`.

Every escape test runs one probe twice: once in a container started with Docker's
defaults (root, default capabilities, bridge network, writable root filesystem), where
it must succeed, which shows that the probe is real; and once as a job in our hardened
warm pool, where it must fail. The rest covers what the warm pool adds: per-job
cleanliness, container replacement, leftover removal and clear start-up errors.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator

import pytest

from sandboxes.base import Job, Limits, SandboxUnavailable

pytestmark = pytest.mark.docker

IMAGE = os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest")
REQUIRED = "docker" in os.environ.get("ASSAY_TEST_BACKENDS", "")


def engine_or_skip():
    """The docker client, or a skip; when ASSAY_TEST_BACKENDS names docker, a failure."""
    try:
        import docker

        client = docker.from_env()
        client.ping()
        client.images.get(IMAGE)
        return client
    except Exception as exc:
        if REQUIRED:
            pytest.fail(f"ASSAY_TEST_BACKENDS names docker but the engine or image is missing: {exc}")
        pytest.skip(f"no Docker engine or no {IMAGE} image here ({exc})")


@pytest.fixture(scope="module")
def client():
    return engine_or_skip()


@pytest.fixture(scope="module")
def box(client) -> Iterator:
    from sandboxes.docker_backend import DockerSandbox

    # One worker: consecutive jobs land in the same container, which the
    # previous-job tests need (and check).
    sandbox = DockerSandbox(image=IMAGE, workers=1)
    yield sandbox
    sandbox.close()


def py(code: str, **limits: float) -> Job:
    return Job(command=["python3", "-c", code], limits=Limits(**{"wall_s": 20, **limits}))


def probe_ours(box, code: str) -> dict:
    result = box.run(py(code))
    assert result.exit_code == 0, result.stderr.decode(errors="replace")
    return json.loads(result.stdout)


def probe_plain(client, code: str, **run_options) -> dict:
    """The same probe in a container with Docker's defaults (what `docker run` gives)."""
    container = client.containers.run(
        IMAGE, ["/opt/venv/bin/python", "-c", code], user="0", detach=True, **run_options
    )
    try:
        status = container.wait(timeout=60)
        output = container.logs(stdout=True, stderr=False)
        assert status["StatusCode"] == 0, container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    return json.loads(output)


WRITE_ROOT_FS = """
import json
written = []
for path in ("/opt/assay/verifiers/planted.py", "/usr/lib/planted", "/etc/planted"):
    try:
        with open(path, "w") as f:
            f.write("x")
        written.append(path)
    except OSError:
        pass
print(json.dumps({"ok": bool(written), "written": written}))
"""

RAISE_CAPABILITIES = """
import json, os
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
done = []
open("f", "w").close()
try:
    os.chown("f", 12345, 12345)          # CAP_CHOWN
    done.append("chown")
except OSError:
    pass
try:
    os.mknod("null2", 0o666 | 0o020000, os.makedev(1, 3))   # CAP_MKNOD
    done.append("mknod")
except OSError:
    pass
try:
    os.setuid(0)                          # already root, or CAP_SETUID
    done.append("setuid0")
except OSError:
    pass
print(json.dumps({"ok": bool(done), "done": done, "cap_eff": status["CapEff"].strip(),
                  "cap_bnd": status["CapBnd"].strip(), "no_new_privs": status["NoNewPrivs"].strip(),
                  "seccomp": status["Seccomp"].strip()}))
"""

OPEN_SOCKET = """
import json, socket, struct
host, port = {target!r}
if host is None:  # the default gateway: the host, seen from a bridge-networked container
    for line in open("/proc/net/route").read().splitlines()[1:]:
        fields = line.split()
        if fields[1] == "00000000":
            host = socket.inet_ntoa(struct.pack("<I", int(fields[2], 16)))
try:
    s = socket.create_connection((host, port), timeout=3)
    s.sendall(b"escaped")
    s.close()
    print(json.dumps({{"ok": True, "host": host}}))
except (OSError, TypeError) as exc:
    print(json.dumps({{"ok": False, "host": host, "error": str(exc)}}))
"""


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, list[bytes]]]:
    """A TCP server on the host that records who reached it."""
    server = socket.socket()
    server.bind(("0.0.0.0", 0))
    server.listen()
    server.settimeout(0.5)
    received: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                received.append(conn.recv(100))

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server, received
    stop.set()
    thread.join(2)
    server.close()


def test_writing_the_root_filesystem_works_in_plain_docker_and_fails_in_ours(box, client):
    assert probe_plain(client, WRITE_ROOT_FS)["ok"] is True
    ours = probe_ours(box, WRITE_ROOT_FS)
    assert ours == {"ok": False, "written": []}


def test_capabilities_exist_in_plain_docker_and_none_in_ours(box, client):
    plain = probe_plain(client, RAISE_CAPABILITIES)
    assert plain["ok"] is True and "chown" in plain["done"] and int(plain["cap_eff"], 16) != 0
    ours = probe_ours(box, RAISE_CAPABILITIES)
    assert ours["done"] == [] and ours["ok"] is False
    assert int(ours["cap_eff"], 16) == 0 and int(ours["cap_bnd"], 16) == 0
    assert ours["no_new_privs"] == "1"
    assert ours["seccomp"] == "2"  # Docker's default seccomp filter is on


def test_network_socket_reaches_the_host_in_plain_docker_and_not_from_ours(box, client, listener):
    server, received = listener
    port = server.getsockname()[1]
    plain = probe_plain(client, OPEN_SOCKET.format(target=(None, port)))
    assert plain["ok"] is True
    assert received == [b"escaped"]
    ours = probe_ours(box, OPEN_SOCKET.format(target=(plain["host"], port)))
    assert ours["ok"] is False and "unreachable" in ours["error"].lower()
    assert received == [b"escaped"]


def test_only_loopback_exists(box):
    result = box.run(py("import socket; print(sorted(n for _, n in socket.if_nameindex()))"))
    assert result.stdout.strip() == b"['lo']"


def container_of(box) -> str:
    return box.run(py("print(open('/etc/hostname').read().strip())")).stdout.strip().decode()


def test_next_job_sees_no_file_of_the_previous_one(box):
    first = container_of(box)
    plant = box.run(Job(command=["sh", "-c",
                                 "echo secret > /tmp/work/answer; echo x > /tmp/planted; "
                                 "mkdir -p /tmp/d/e && chmod 000 /tmp/d; echo y > /dev/shm/planted; echo ok"]))
    assert plant.stdout == b"ok\n", plant.stderr
    look = box.run(Job(command=["sh", "-c", "ls -A /tmp /tmp/work /dev/shm; echo end"]))
    assert container_of(box) == first  # same container: the cleanup did it, not a new one
    assert look.stdout.split() == [b"/dev/shm:", b"/tmp:", b"work", b"/tmp/work:", b"end"]


def test_next_job_sees_no_process_of_the_previous_one(box):
    first = container_of(box)
    started = box.run(Job(command=["sh", "-c", "setsid sh -c 'sleep 300 & sleep 301 &' & sleep 0.2; echo ok"]))
    assert started.stdout == b"ok\n"
    ps = "import os; print(sorted(open(f'/proc/{p}/cmdline').read() for p in os.listdir('/proc') if p.isdigit()))"
    seen = box.run(py(ps)).stdout.decode()
    assert container_of(box) == first
    assert "sleep" not in seen


def test_next_job_sees_no_shared_memory_of_the_previous_one(box):
    shm = "import ctypes; libc = ctypes.CDLL(None); print(libc.shmget(4242, 4096, {flags}))"
    created = box.run(py(shm.format(flags=0o1000 | 0o600)))  # IPC_CREAT
    assert int(created.stdout) >= 0
    assert int(box.run(py(shm.format(flags=0))).stdout) == -1


def test_killing_init_or_everything_does_not_hurt_the_pool(box):
    first = container_of(box)
    box.run(py("import os, signal\nos.kill(1, signal.SIGKILL)"))
    assert container_of(box) == first  # the worker is the container's init: immune
    # The job runs as a uid of its own: its supervisor and the worker are out of its reach.
    for sig in ("SIGKILL", "SIGSTOP", "SIGINT", "SIGTERM"):
        result = box.run(py(f"import os, signal\nfor pid in (1, os.getppid()):\n    try:\n"
                            f"        os.kill(pid, signal.{sig})\n    except PermissionError:\n"
                            f"        print('denied')\n"))
        assert result.stdout == b"denied\ndenied\n" and result.violations == []
        assert container_of(box) == first
    assert box.run(py("import os; print(os.getuid() != 0, os.getuid() != int(open('/proc/1/status').read()"
                      ".split('Uid:')[1].split()[0]))")).stdout == b"True True\n"
    assert box.run(py("print(1)")).stdout == b"1\n"


def test_fork_bomb_is_contained(box):
    result = box.run(py("import os\nwhile True:\n    os.fork()", wall_s=5, processes=16))
    assert result.exit_code != 0 or result.killed_by is not None
    assert box.run(py("print(2)")).stdout == b"2\n"


def test_memory_and_time_limits(box):
    memory = box.run(py("x = bytearray(400 * 1024 * 1024)", memory_mb=128))
    assert memory.killed_by == "memory"
    slow = box.run(py("import time\ntime.sleep(30)", wall_s=1))
    assert slow.killed_by == "timeout" and slow.wall_s < 5
    spin = box.run(py("while True: pass", cpu_s=1, wall_s=10))
    assert spin.killed_by == "cpu"


def test_engine_socket_and_host_environment_are_out_of_reach(box, monkeypatch):
    code = ("import json, os; print(json.dumps({'sock': os.path.exists('/var/run/docker.sock'), "
            "'env': sorted(os.environ)}))")
    seen = probe_ours(box, code)
    assert seen["sock"] is False
    assert set(seen["env"]) <= {"PATH", "HOME", "LANG", "TMPDIR", "PWD", "SHLVL", "_", "LC_CTYPE"}


def test_container_is_configured_hardened(box, client):
    box.run(py("pass"))
    worker = next(iter(box._live))
    attrs = client.api.inspect_container(worker.container_id)
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    # The worker alone holds these (to start jobs under their uid and end them); jobs hold none.
    assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == ["KILL", "SETGID", "SETPCAP", "SETUID"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert not any("seccomp" in opt or "apparmor=unconfined" in opt for opt in host["SecurityOpt"])
    assert host["Privileged"] is False
    assert host["PidsLimit"] > 0 and host["Memory"] > 0 and host["NanoCpus"] > 0
    assert host["LogConfig"]["Type"] == "none"  # payloads (hidden tests) never reach logs
    assert not host["Binds"]
    assert {"/proc/kcore", "/proc/keys", "/proc/sys"} <= set(host["MaskedPaths"])
    # The worker (init) is root; its jobs run under a uid of their own, one per container.
    assert attrs["Config"]["User"] == "0:0"
    job_uid = next(arg for arg in attrs["Config"]["Cmd"] if arg.startswith("--container=")).partition("=")[2]
    assert job_uid.isdigit() and int(job_uid) >= 200_000
    assert attrs["Config"]["Labels"]["org.assay.sandbox"] == "1"


def test_container_is_replaced_after_max_jobs_and_after_a_violation(client, box):
    from sandboxes.docker_backend import DockerSandbox

    mine = container_of(box)
    sandbox = DockerSandbox(image=IMAGE, workers=1, max_jobs=2)
    # A second sandbox in a live process is no leftover: the first keeps its container.
    assert container_of(box) == mine
    try:
        seen = [container_of(sandbox) for _ in range(3)]
        assert seen[0] == seen[1] != seen[2]
        before = container_of(sandbox)
        # An aborted relay (the host gave up on the job mid-way) counts as a violation.
        session = sandbox.open("verifiers.math.inside.check:serve", None, Limits(wall_s=20), pool="exec")
        assert session.request({"answer": "1", "gold": "1"})["equal"] is True
        result = session.abort()
        assert result.violations == ["aborted by host"]
        assert container_of(sandbox) != before
    finally:
        sandbox.close()


def test_leftovers_of_dead_runs_are_removed_and_live_ones_kept(client):
    from sandboxes.docker_backend import LABEL, LABEL_HOST, LABEL_OWNER, DockerSandbox, _process_token

    host = f"assay-test-{os.getpid()}"
    alive = subprocess.Popen(["sleep", "120"])
    try:
        def plant(owner: str) -> str:
            labels = {LABEL: "1", LABEL_HOST: host, LABEL_OWNER: owner}
            return client.containers.create(IMAGE, ["true"], labels=labels, network_disabled=True).id

        dead_id = plant("999999999:1")
        live_id = plant(_process_token(alive.pid) or "")
        sandbox = DockerSandbox(image=IMAGE, workers=1, host_label=host)
        sandbox.close()
        names = {c.id for c in client.containers.list(all=True, filters={"label": f"{LABEL_HOST}={host}"})}
        assert dead_id not in names and sandbox.removed_leftovers == 1
        assert live_id in names
    finally:
        alive.kill()
        alive.wait()
        for container in client.containers.list(all=True, filters={"label": f"{LABEL_HOST}={host}"}):
            container.remove(force=True)


def test_missing_image_or_engine_is_a_clear_start_up_error(client):
    from sandboxes.docker_backend import DockerSandbox

    with pytest.raises(SandboxUnavailable, match="make images"):
        DockerSandbox(image="assay-no-such-image:0")
    with pytest.raises(SandboxUnavailable, match="Docker engine"):
        DockerSandbox(image=IMAGE, base_url="unix:///nonexistent/docker.sock")


def test_image_holds_the_code_of_this_tree(box):
    from sandboxes.docker_backend import source_hash

    # Otherwise the verifier tests on the docker backend would test old code. Where the
    # docker backend is not asked for (a developer's run), a stale image only skips.
    if box.image_source != source_hash() and not REQUIRED:
        pytest.skip("the runtime image is older than this tree: run `make images`")
    assert box.image_source == source_hash(), "the runtime image is stale: run `make images`"


def test_relayed_session_with_a_preloaded_pool(box):
    preload = ("verifiers.math.inside.check",)
    session = box.open("verifiers.math.inside.check:serve", None, Limits(wall_s=20), pool="math-probe", preload=preload)
    first = session.request({"answer": "1/2", "gold": "0.5"})
    second = session.request({"answer": "3", "gold": "0.5"})
    result = session.finish()
    assert first["status"] == "compared" and first["equal"] is True
    assert second["equal"] is False
    assert result.returned and result.backend == "docker"
