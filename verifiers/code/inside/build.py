"""Compiles a response and runs its cases in ONE sandbox job (standard library only).

A compile job and a cases job per response paid two job starts and moved the compiled
program twice through the host (out of the compile job, into the cases job): for a small
C or Go program that was most of a response's time. Here the program never leaves the
sandbox unless the host asks for it (identical sources elsewhere want it: see
verifiers/code/native.py), and each step keeps the limits it had as a job of its own:

1. the compiler runs as `compile_source` runs it (inside/native.py), in a directory of its
   own, with the compile's limits set on its process tree (CPU, address space, file size,
   open files, processes, its wall clock); the job's own limits are the wider of the
   compile's and the runs' (sandbox-wide: the ceiling of either step);
2. its report goes to the host (`ask`, answered while the cases run), whose answer says
   whether to send the artifacts back (raw, on stdout, after the cases' outputs); a
   failed compile ends the job;
3. everything the compile left is ended and removed (processes, files, IPC objects), and
   the supervisor shrinks the job's scratch to the runs' size (process backend; a
   container's scratch is the container's);
4. the cases run as `run_cases` runs them (inside/cases.py): each in a fresh directory,
   as a fresh process tree under the case's limits, plus the run job's own (file size,
   open files, processes, address space), everything wiped between cases.

The candidate's code never holds the channel (the runner's children keep fds 0-2 only):
it cannot answer the host's question, ask for a bigger scratch, or report a compile.
"""

from __future__ import annotations

import os
from typing import Any

from verifiers.code.inside.cases import Scope, remove_path, run_all
from verifiers.code.inside.native import become_subreaper, compile_here, reap_children, write_out

BUILD_DIR = "build"


def build_and_run(payload: dict[str, Any], channel: Any) -> dict[str, Any]:
    """Payload: {"compile": compile_source's payload with "limits" (the compiler's own),
    "run": run_cases's payload without "files", "run_scratch_mb": int}.

    Returns {"compile": the compile's report}, and once it compiled: "cases" and
    "unclean" as `run_cases` reports them (their outputs on stdout), and "kept" (the
    artifacts [name, size] sent on stdout after those outputs, or [])."""
    become_subreaper()
    scope = Scope()
    scratch = os.getcwd()
    build = os.path.join(scratch, BUILD_DIR)
    os.mkdir(build, 0o700)
    os.chdir(build)
    try:
        report, artifacts = compile_here(payload["compile"])
    finally:
        os.chdir(scratch)
        # Its directory goes now, whatever the outcome: a container's worker (root
        # without CAP_FOWNER) cannot remove a job's private directory after the job.
        remove_path(build)
    compiled = (report.get("exit_code") == 0 and not report.get("killed_by") and not report.get("too_large")
                and bool(artifacts))
    if not compiled:
        return {"compile": report}
    answer = channel.ask_soon({"compiled": report})
    files = dict(artifacts)
    # Nothing of the compile stays for the runs: its processes, its files, what it wrote.
    if scope.isolated:
        scope.end_all(0)
    reap_children()
    scope.wipe()
    if not channel.limit_scratch(int(payload["run_scratch_mb"])):
        raise RuntimeError("the job's scratch could not be limited to the runs' size")
    ran = run_all(files, payload["run"], scope, scratch)
    reply = answer()
    kept = artifacts if isinstance(reply, dict) and reply.get("keep") is True else []
    for _, data in kept:
        write_out(data)
    return {"compile": report, "kept": [[name, len(data)] for name, data in kept], **ran}
