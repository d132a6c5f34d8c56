"""Host side of the sandboxed replay: warm replay sessions first, fresh processes as fallback.

Forking a fresh sandboxed process for each group costs more than replaying the group
(several milliseconds against well under one for ten calls). The replay runs only our
own code on data, never candidate code, and every judgement builds its environment
afresh from the task, so resident servers (sandboxes/resident.py) may judge many groups in
turn without one response being able to affect another's judgement.
"""

from __future__ import annotations

from sandboxes.base import Limits, Sandbox, entry
from sandboxes.resident import ResidentServers, ResidentSpec, close_resident_servers, resident_servers
from verifiers.tool_state.inside import replay

PRELOAD = (replay.__name__,)
CALL_TARGET = entry(replay.run)
SERVE_TARGET = entry(replay.serve)
CALL_POOL = "tool_state"
SERVE_POOL = "tool_state_serve"
# One-shot calls: our replay on bounded input, generous per call.
CALL_LIMITS = Limits(wall_s=10.0, cpu_s=10.0, memory_mb=512, processes=4, output_bytes=100_000)
# A session's limits cover its whole life; it is retired well before they run out.
SESSION_LIMITS = Limits(wall_s=180.0, cpu_s=120.0, memory_mb=512, processes=4, output_bytes=100_000)
SESSION_MAX_AGE_S = 60.0
SESSION_MAX_REQUESTS = 500
# How long a group waits for a busy session before paying for a fresh process.
SESSION_WAIT_S = 2.0
# One response's replay limit, a deadline the sandboxed replay checks before every call
# and stage (the largest trace a task allows replays in about a second); the host waits
# for a group this long per response, plus a start.
RESPONSE_TIMEOUT_S = 5.0
GROUP_GRACE_S = 10.0


def sessions_for(sandbox: Sandbox) -> ResidentServers:
    # The spec is read when a sandbox's sessions are first made (tests tune the constants).
    spec = ResidentSpec(SERVE_TARGET, SERVE_POOL, PRELOAD, SESSION_LIMITS, SESSION_MAX_AGE_S,
                        SESSION_MAX_REQUESTS, SESSION_WAIT_S)
    return resident_servers(sandbox, spec)


def close_sessions(sandbox: Sandbox) -> None:
    close_resident_servers(sandbox, SERVE_POOL)
