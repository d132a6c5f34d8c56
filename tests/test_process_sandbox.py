"""The process sandbox's limits, proven before any verifier trusts them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from sandboxes.base import Job, Limits, SandboxUnavailable
from sandboxes.process import ProcessSandbox, check_namespaces


def py(code: str, **limits: float) -> Job:
    return Job(command=["python3", "-c", code], limits=Limits(**{"wall_s": 10, **limits}))


@pytest.fixture(scope="module")
def box():
    sandbox = ProcessSandbox(workers=2)
    yield sandbox
    sandbox.close()


def test_runs_a_command_with_files_and_stdin(box):
    job = Job(command=["python3", "-c", "import sys; print(open('data.txt').read(), sys.stdin.read())"],
              files={"data.txt": b"hello"}, stdin=b"world")
    result = box.run(job)
    assert result.exit_code == 0
    assert result.stdout == b"hello world\n"


def test_fork_bomb_is_contained_and_killed(box):
    result = box.run(py("import os\nwhile True:\n    try: os.fork()\n    except OSError: pass", wall_s=2))
    assert result.killed_by == "timeout"
    assert box.run(py("print('alive')")).stdout == b"alive\n"


def test_memory_bomb_hits_the_limit(box):
    result = box.run(py("x = bytearray(2 * 1024**3)", memory_mb=256))
    assert result.killed_by == "memory"


def test_busy_loop_hits_the_cpu_limit(box):
    result = box.run(py("while True: pass", cpu_s=1))
    assert result.killed_by == "cpu" and result.cpu_s < 3


def test_ignored_signals_and_sleep_hit_the_wall_clock(box):
    started = time.monotonic()
    code = ("import signal, time\n"
            "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP): signal.signal(s, signal.SIG_IGN)\n"
            "time.sleep(60)")
    result = box.run(py(code, wall_s=1))
    assert result.killed_by == "timeout" and time.monotonic() - started < 5


def test_output_flood_is_capped(box):
    result = box.run(py("while True: print('x' * 10000)", output_bytes=50_000))
    assert result.killed_by == "output" and result.stdout_truncated and len(result.stdout) == 50_000


NETWORK_PROBE = """
import socket, sys
reached = []
for host in sys.argv[2:]:
    try:
        socket.create_connection((host, int(sys.argv[1])), timeout=1).close()
        reached.append(host)
    except OSError:
        pass
print("reached " + " ".join(reached) if reached else "blocked")
"""


def _host_addresses() -> list[str]:
    """Loopback plus this machine's own addresses (where a listener on 0.0.0.0 answers)."""
    found = {"127.0.0.1"}
    for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
        found.add(str(info[4][0]))
    return sorted(found)


def test_no_network(box):
    # A server really listens on the host, on every address: a job that shared the host's
    # network would reach it. (A closed port would refuse isolated and open jobs alike.)
    with socket.create_server(("0.0.0.0", 0)) as server:
        port = str(server.getsockname()[1])
        hosts = _host_addresses()
        control = subprocess.run([sys.executable, "-c", NETWORK_PROBE, port, *hosts],
                                 capture_output=True, text=True, timeout=30)
        assert control.stdout.startswith("reached 127.0.0.1"), control  # the probe can see it
        result = box.run(Job(command=["python3", "-c", NETWORK_PROBE, port, *hosts]))
    assert result.stdout == b"blocked\n", result.stdout


def test_system_is_read_only_and_host_files_are_hidden(box):
    script = ("touch /usr/x; touch /etc/x; touch /proc/x; ls /root /work /home 2>&1;"
              " echo $(ls -A /proc) $(ls -A /proc/self) $(readlink /proc/self/fd)")
    result = box.run(Job(command=["sh", "-c", script]))
    out = result.stdout.decode() + result.stderr.decode()
    assert "touch: cannot touch '/proc/x': Read-only file system" in out
    assert "touch: cannot touch '/usr/x': Read-only file system" in out
    assert "No such file or directory" in out  # /work (this repository) and /root's files are not there
    # No process in /proc: only the link through which a job's streams open by path.
    assert result.stdout.decode().strip().splitlines()[-1] == "self fd /tmp/work/.assay-fd"


def test_scratch_is_private_to_each_job(box):
    box.run(Job(command=["sh", "-c", "echo secret > /tmp/work/left-behind; echo x > /tmp/also"]))
    result = box.run(Job(command=["sh", "-c", "ls -a /tmp /tmp/work"]))
    assert b"left-behind" not in result.stdout and b"also" not in result.stdout


ESCAPEE = """
import os, socket, time
name = "\\0assay-escape-probe"
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(name)
        listener.listen(64)
        while True:
            listener.accept()
    os._exit(0)
for _ in range(500):
    try:
        socket.socket(socket.AF_UNIX).connect(name)
        print("listening")
        break
    except OSError:
        time.sleep(0.01)
"""
ESCAPEE_PROBE = """
import socket
try:
    socket.socket(socket.AF_UNIX).connect("\\0assay-escape-probe")
    print("survived")
except OSError:
    print("gone")
"""


def test_escaped_background_process_dies_with_the_job():
    # A `setsid` grandchild listens on an abstract socket, in the network namespace that
    # every job of a worker shares: had it outlived its job, the next job on the same
    # (single) worker would reach it. The job first proves the listener is up.
    single = ProcessSandbox(workers=1)
    try:
        assert single.run(Job(command=["python3", "-c", ESCAPEE], limits=Limits(wall_s=5))).stdout == b"listening\n"
        result = single.run(Job(command=["python3", "-c", ESCAPEE_PROBE]))
    finally:
        single.close()
    assert result.stdout == b"gone\n", result.stdout


def test_kill_process_group_or_parent_does_not_hurt_the_worker(box):
    box.run(py("import os, signal\nos.kill(0, signal.SIGKILL)"))
    box.run(py("import os, signal\nos.kill(-1, signal.SIGKILL)"))
    assert box.run(py("print(1)")).stdout == b"1\n"


def test_refuses_to_start_without_namespaces(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on PATH
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        check_namespaces()


def test_jobs_run_as_unprivileged_user(box):
    result = box.run(py("import os; print(os.getuid(), os.geteuid())"))
    uid = int(result.stdout.split()[0])
    if os.geteuid() == 0:
        assert uid >= 61000
    assert box.run(py("import os; os.setuid(0)")).exit_code != 0


def test_unsafe_flag_runs_without_namespaces_only_when_asked(monkeypatch, tmp_path):
    """Where bubblewrap is missing: refuse, unless the operator set the loud flag; then
    jobs still get limits, but no namespaces (and never as root)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable):
        ProcessSandbox(workers=1)
    if os.geteuid() == 0:
        with pytest.raises(SandboxUnavailable, match="root"):
            ProcessSandbox(workers=1, unsafe_no_isolation=True)
        return
    box = ProcessSandbox(workers=1, unsafe_no_isolation=True)
    try:
        assert box.describe()["isolation"] == "none (unsafe)"
        assert box.run(py("print(6 * 7)")).stdout == b"42\n"
        assert box.run(py("while True: pass", cpu_s=1)).killed_by == "cpu"
    finally:
        box.close()


def _live_children() -> set[int]:
    """Processes this test process started that still run (zombies excluded)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                found.add(int(entry))
    return found


def test_warm_worker_outlives_the_thread_that_started_it():
    """bwrap's --die-with-parent follows the *thread* that forked it: a worker started from
    a short-lived thread (anyio's idle-retiring workers, sandboxd's connection threads)
    must not die with it, least of all while another thread's job runs on it."""
    import threading

    sandbox = ProcessSandbox(workers=1)
    try:
        before = _live_children()
        starter = threading.Thread(target=lambda: sandbox.run(Job(command=["true"])))
        starter.start()
        starter.join()
        workers = _live_children() - before
        assert len(workers) == 1
        # The next job runs on the same warm worker: none died, none was started anew.
        assert sandbox.run(py("print(1)")).stdout == b"1\n"
        assert _live_children() - before == workers
    finally:
        sandbox.close()


@pytest.fixture
def cpu_hogs():
    """Three busy processes per CPU, each in its own session (so its own scheduler group,
    as every sandboxed job is): a machine busy with other people's jobs."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(3 * len(os.sched_getaffinity(0)))]
    time.sleep(0.3)
    yield
    for hog in hogs:
        hog.kill()
        hog.wait()


# Spends this much CPU time (its own, not the clock's), then says so.
NEEDS_HALF_A_CPU_SECOND = "import time\nwhile time.process_time() < 0.5: pass\nprint('done')"


def test_a_job_starved_by_its_neighbours_gets_its_wall_clock_back(box, cpu_hogs):
    # Half a CPU second under a one-second wall clock: alone it takes ~0.5 s; sharing the
    # CPUs with three busy neighbours a core it waits ~1 s more for a CPU. That wait is the
    # neighbours' doing, not the job's: it must not turn the job into a timeout.
    result = box.run(py(NEEDS_HALF_A_CPU_SECOND, wall_s=1, cpu_s=5))
    assert (result.killed_by, result.stdout) == (None, b"done\n"), result.summary()
    assert result.wall_s > 1.0  # it really was starved: it needed its credit


def test_sleeping_is_not_starvation(box, cpu_hogs):
    # A job that sleeps is not waiting for a CPU: the wall clock stops it on time, busy
    # neighbours or not.
    result = box.run(py("import time\ntime.sleep(30)", wall_s=1))
    assert result.killed_by == "timeout" and result.wall_s < 1.5, result.summary()
