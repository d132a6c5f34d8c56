"""The process backend's exec helper (sandboxes/exec_helper.py) is built once per process into a
temporary directory: a process killed before its exit handler runs leaves that directory behind,
and the next process that builds the helper removes it (never one whose builder still runs)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.skipif(not os.access("/usr/bin/gcc", os.X_OK), reason="the helper is built with gcc")

BUILD = "from sandboxes.exec_helper import helper_path; import sys, time; print(helper_path(), flush=True); " \
        "time.sleep(float(sys.argv[1]))"


def build_in_process(hold_s: float) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", BUILD, str(hold_s)], cwd=REPO, stdout=subprocess.PIPE, text=True)


def test_a_killed_builders_helper_is_removed_by_the_next_build_and_a_live_ones_is_kept() -> None:
    killed = build_in_process(60)
    orphan = Path(killed.stdout.readline().strip()).parent
    assert orphan.name.startswith(f"assay-exec-{killed.pid}-") and orphan.is_dir()
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    assert orphan.is_dir()  # no exit handler ran

    live = build_in_process(60)
    try:
        kept = Path(live.stdout.readline().strip()).parent
        done = build_in_process(0)
        mine = Path(done.stdout.readline().strip()).parent
        assert done.wait(timeout=60) == 0
        assert not orphan.exists()
        assert kept.is_dir()  # its builder still runs
        assert not mine.exists()  # removed by its own exit handler
    finally:
        live.kill()
        live.wait(timeout=30)
        shutil.rmtree(kept, ignore_errors=True)


def test_a_directory_that_only_looks_like_a_helpers_is_left_alone() -> None:
    tmp = Path(tempfile.gettempdir())
    foreign = tmp / "assay-exec-notapid-x"
    linked = tmp / f"assay-exec-{2**22 + 17}-link"  # above pid_max's default: no such process
    target = Path(tempfile.mkdtemp())
    foreign.mkdir(exist_ok=True)
    linked.unlink(missing_ok=True)
    linked.symlink_to(target)
    try:
        done = build_in_process(0)
        assert Path(done.stdout.readline().strip()).name == "assay-exec"
        assert done.wait(timeout=60) == 0
        assert foreign.is_dir()
        assert target.is_dir()  # a link is never followed
    finally:
        shutil.rmtree(foreign, ignore_errors=True)
        linked.unlink(missing_ok=True)
        shutil.rmtree(target, ignore_errors=True)
