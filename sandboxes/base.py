"""The one sandbox interface every backend implements.

A *job* is files + a command (or a trusted function to call) + limits. Backends run it
isolated and report what happened; they never interpret the outcome (that is the
verifier's job), they only measure and enforce.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

KillReason = Literal["timeout", "cpu", "memory", "output"]

# Handler for messages a called function sends to the trusted side while it runs.
# It returns the reply to send back, or None for no reply.
MessageHandler = Callable[[Any], Any]


class SandboxError(Exception):
    """The sandbox infrastructure failed (not the job): reported as verdict `error`.

    `cause` is a stable word naming the part that failed (for evidence and metrics);
    the message is ours too, and never carries text from inside a sandbox."""

    cause = "sandbox_failed"

    def __init__(self, message: str = "", *, cause: str | None = None) -> None:
        super().__init__(message)
        if cause is not None:
            self.cause = cause


class SandboxUnavailable(SandboxError):
    """The backend cannot start on this machine (missing namespaces, engine, image)."""

    cause = "sandbox_unavailable"


class CallEnded(SandboxError):
    """A sandboxed call ended (died, was killed) while the host still expected an answer."""

    cause = "call_ended"

    def __init__(self, result: CallResult | None, message: str = "the sandboxed call ended before answering") -> None:
        super().__init__(message)
        self.result = result


class RequestTimeout(CallEnded):
    """One request to a running call exceeded its own time budget; the call was killed."""

    def __init__(self, result: CallResult | None) -> None:
        super().__init__(result, "the sandboxed call did not answer in time")


class PayloadRefused(SandboxError):
    """A call's payload is over the channel's size or nesting limits: it was never sent
    (and no worker was taken). Callers that pass untrusted data bound it first."""

    cause = "payload_too_large"


class SandboxBusy(SandboxError):
    """Every worker is taken and the wait for one ran out: the caller should back off."""

    cause = "sandbox_busy"


@dataclass(frozen=True)
class Limits:
    wall_s: float = 10.0
    cpu_s: float = 10.0
    memory_mb: int = 512
    processes: int = 32
    output_bytes: int = 1_000_000
    file_size_mb: int = 16
    open_files: int = 64
    scratch_mb: int = 64

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def replace(self, **changes: Any) -> Limits:
        return Limits(**{**self.to_dict(), **changes})


@dataclass
class Job:
    """Run `command` in a fresh scratch directory holding `files`."""

    command: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    stdin: bytes = b""
    env: dict[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)


@dataclass
class Usage:
    """What a finished job did and what stopped it."""

    exit_code: int | None = None
    signal: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_memory_mb: float = 0.0
    killed_by: KillReason | None = None
    violations: list[str] = field(default_factory=list)
    backend: str = ""

    def summary(self) -> dict[str, Any]:
        """Bounded, JSON-ready description for evidence and audit records."""
        return {
            "backend": self.backend,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "wall_s": round(self.wall_s, 4),
            "cpu_s": round(self.cpu_s, 4),
            "peak_memory_mb": round(self.peak_memory_mb, 1),
            "killed_by": self.killed_by,
            "violations": list(self.violations),
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
        }


JobResult = Usage


@dataclass
class CallResult(Usage):
    """Outcome of calling a trusted function inside the sandbox.

    `value` is the function's JSON return value when it returned; `raised` holds
    {"type", "message"} when it raised; both are None when the process died first.
    """

    value: Any = None
    returned: bool = False
    raised: dict[str, str] | None = None


class CallSession(abc.ABC):
    """A running call that the trusted side can exchange messages with.

    Used when two sandboxed parties must talk only through the trusted side, e.g. a
    grader whose every `candidate(...)` call is relayed to a separate candidate process.
    """

    @abc.abstractmethod
    def request(self, message: Any, timeout_s: float | None = None) -> Any:
        """Send a message to the running function and wait for its reply.

        Raises RequestTimeout (the call is killed) when no reply comes within timeout_s,
        and CallEnded when the call died before replying."""

    @abc.abstractmethod
    def finish(self) -> CallResult:
        """Tell the function to end, wait for it, and return its result."""

    @abc.abstractmethod
    def abort(self) -> CallResult:
        """Kill the call now (used when the other side of a relay failed)."""


class Sandbox(abc.ABC):
    """A backend. Thread-safe: many verifications may use one sandbox at once."""

    name: str

    @abc.abstractmethod
    def run(self, job: Job) -> JobResult:
        """Run a command to completion under the job's limits."""

    @abc.abstractmethod
    def call(
        self,
        target: str,
        payload: Any,
        limits: Limits,
        *,
        pool: str = "default",
        preload: tuple[str, ...] = (),
        on_message: MessageHandler | None = None,
    ) -> CallResult:
        """Call `module:function(payload, channel)` from the `verifiers` or `sandboxes`
        packages in a fresh isolated process forked from a warm worker of `pool`
        (workers of a pool pre-import `preload`). `payload` and the return value are
        JSON data. Messages the function sends are answered by `on_message`."""

    @abc.abstractmethod
    def open(
        self,
        target: str,
        payload: Any,
        limits: Limits,
        *,
        pool: str = "default",
        preload: tuple[str, ...] = (),
    ) -> CallSession:
        """Start a call and return a session to exchange messages with it."""

    def interact(self, first: Job, second: Job) -> tuple[JobResult, JobResult]:
        """Run two commands at once, each in a sandbox of its own under its own limits,
        with the stdout of each relayed to the stdin of the other as it is written (an
        interactive judge: interactor and candidate). A job's own `stdin` goes first; the
        end of one's output closes the other's stdin. Returns both results (their stdout
        was relayed, not kept)."""
        raise SandboxUnavailable(f"the {self.name} backend does not run interactive jobs",
                                 cause="interactive_unsupported")

    def warm(self, pool: str, preload: tuple[str, ...] = ()) -> None:  # noqa: B027
        """Start a pool's workers ahead of the first job (optional optimisation)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop every worker and release resources."""

    def pool_stats(self) -> dict[str, dict[str, int]]:
        """Per warm pool: {"size", "idle", "in_use"} worker counts (empty where there are none)."""
        return {}

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name}


def entry(function: Callable[..., Any]) -> str:
    """The target a sandbox runs for `function`, an entry point in an `inside` module:
    named from the function itself, so a renamed or moved entry point fails at import."""
    return f"{function.__module__}:{function.__name__}"
