"""Prometheus metrics through prometheus_client, one registry per service instance.

Named metrics (all prefixed `assay_`):
- `verifications_total{verifier,verdict}`, `verification_seconds{verifier}` (histogram),
  `flags_total{verifier,flag}`, `zero_variance_groups_total{verifier}`;
- `errors_total{verifier,kind,cause}`: verdict `error` by kind and cause, see `error_cause`;
- `inflight_responses`, `sandbox_workers{pool,state}` (size / idle / in_use, read at scrape);
- `unavailable_total{reason}` (each 503 answer), `http_requests_total{route,status}`;
- `alarms_total{run,rule}` (service/alarms.py bounds the run label), `alarm_webhook_failures_total`;
- process_* and python_* (the process and platform collectors; one process only).

With several API processes (`ASSAY_API_PROCESSES`, service/serve_processes.py) each keeps
its values in the directory named by PROMETHEUS_MULTIPROC_DIR and a scrape sums all of
them (prometheus_client's multiprocess mode): counters and histograms over every process
that ran, gauges over the live ones; no process_* or python_* figures then.
`inc`/`set`/`observe` by name also accept metrics not listed here (created on first use).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics import MetricWrapperBase

from verifiers.base import FLAG_NAME, UnknownVerifier
from verifiers.inspection import TRUNCATED
from verifiers.registry import get as get_verifier

# Flag labels: a verifier's declared vocabulary (Verifier.flag_names) plus the flags every
# verifier may carry; a verifier without one gets at most MAX_FLAG_LABELS names, each a
# well-formed flag name. Any other flag is counted under OTHER_FLAG.
SHARED_FLAGS = frozenset({TRUNCATED, "sandbox_error", "sandbox_busy", "verifier_error", "executor_error",
                          "executor_timeout"})
MAX_FLAG_LABELS = 64
OTHER_FLAG = "other"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_CAUSE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
CONTENT_TYPE = CONTENT_TYPE_LATEST
# Read by prometheus_client when it is imported: set it before a process starts.
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
# With several processes, how often each one writes its sandbox pools' figures (and at a scrape).
POOL_REFRESH_S = 2.0


def error_cause(evidence: dict[str, Any] | None, field: str = "error_cause") -> str:
    """A label of an `error` verdict from its evidence: `error_cause` (default; else `error`) or `error` (kind).

    Bounded label values: missing is "unknown"; anything not a short snake_case word is "other".
    """
    evidence = evidence or {}
    cause = evidence.get(field) or (evidence.get("error") if field == "error_cause" else None) or "unknown"
    return cause if isinstance(cause, str) and _CAUSE.match(cause) else "other"


def _vocabulary(verifier: str) -> frozenset[str] | None:
    try:
        return get_verifier(verifier).flag_names
    except UnknownVerifier:
        return None


class _SandboxPools:
    """Collector: the sandbox's warm pools, read when Prometheus scrapes."""

    def __init__(self, pool_stats: Callable[[], dict[str, dict[str, int]]]) -> None:
        self.pool_stats = pool_stats

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily("assay_sandbox_workers", "Sandbox workers per warm pool: size, idle, in_use.",
                                   labels=["pool", "state"])
        for pool, stats in sorted(self.pool_stats().items()):
            for state, value in sorted(stats.items()):
                family.add_metric([pool, state], value)
        yield family


def multiprocess_registry(directory: str) -> CollectorRegistry:
    """A registry that sums the values every process wrote into `directory`."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)
    return registry


def forget_process(directory: str, pid: int) -> None:
    """Drop a dead process's gauges from the sums (its counts stay)."""
    multiprocess.mark_process_dead(pid, directory)


class Metrics:
    def __init__(self) -> None:
        self.multiprocess_dir = os.environ.get(MULTIPROCESS_DIR_ENV) or None
        self.registry = CollectorRegistry()
        if self.multiprocess_dir is None:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
        self._refresh_pools: Callable[[], None] | None = None
        self._closed = threading.Event()
        r = self.registry
        self.verifications = Counter("assay_verifications_total", "Verifications by verifier and verdict.",
                                     ["verifier", "verdict"], registry=r)
        self.latency = Histogram("assay_verification_seconds", "Time to verify one response.", ["verifier"],
                                 buckets=BUCKETS, registry=r)
        self.flags = Counter("assay_flags_total", "Flags raised on verifications, by verifier and flag.",
                             ["verifier", "flag"], registry=r)
        self.errors = Counter("assay_errors_total", "Verdict error, by verifier, kind and cause.",
                              ["verifier", "kind", "cause"], registry=r)
        self.unavailable = Counter("assay_unavailable_total", "Answers 503 (retry later), by reason.",
                                   ["reason"], registry=r)
        self._by_name: dict[str, MetricWrapperBase] = {
            "assay_verifications_total": self.verifications, "assay_verification_seconds": self.latency,
            "assay_flags_total": self.flags, "assay_errors_total": self.errors,
            "assay_unavailable_total": self.unavailable,
            "assay_inflight_responses": Gauge("assay_inflight_responses", "Responses being verified now.",
                                              registry=r, multiprocess_mode="livesum"),
            "assay_http_requests_total": Counter("assay_http_requests_total", "HTTP requests by route and status.",
                                                 ["route", "status"], registry=r),
            "assay_zero_variance_groups_total": Counter("assay_zero_variance_groups_total",
                                                        "Groups whose rewards were all equal.", ["verifier"],
                                                        registry=r),
            "assay_rejected_total": Counter("assay_rejected_total", "Requests rejected before verification.",
                                            ["reason"], registry=r),
        }
        self._lock = threading.Lock()
        self._flag_labels: dict[str, set[str]] = {}
        self._children: dict[tuple[Any, ...], MetricWrapperBase] = {}

    def _flag_label(self, verifier: str, flag: str) -> str:
        """The label a flag is counted under: never more than a bounded set per verifier."""
        vocabulary = _vocabulary(verifier)
        if flag in SHARED_FLAGS or (vocabulary is not None and flag in vocabulary):
            return flag
        if vocabulary is not None or not FLAG_NAME.fullmatch(flag):
            return OTHER_FLAG
        with self._lock:
            seen = self._flag_labels.setdefault(verifier, set())
            if flag in seen or len(seen) < MAX_FLAG_LABELS:
                seen.add(flag)
                return flag
        return OTHER_FLAG

    def watch_sandbox(self, pool_stats: Callable[[], dict[str, dict[str, int]]]) -> None:
        if self.multiprocess_dir is None:
            self.registry.register(_SandboxPools(pool_stats))
            return
        # Another process answers most scrapes: write this one's figures where they are summed.
        gauge = Gauge("assay_sandbox_workers", "Sandbox workers per warm pool: size, idle, in_use.",
                      ["pool", "state"], registry=self.registry, multiprocess_mode="livesum")

        def refresh() -> None:
            for pool, stats in pool_stats().items():
                for state, value in stats.items():
                    gauge.labels(pool, state).set(value)

        def keep_refreshing() -> None:
            while not self._closed.wait(POOL_REFRESH_S):
                try:
                    refresh()
                except Exception:  # a sandbox closing under us: the next round or close() ends it
                    continue

        self._refresh_pools = refresh
        refresh()
        threading.Thread(target=keep_refreshing, name="assay-pool-metrics", daemon=True).start()

    def close(self) -> None:
        self._closed.set()

    # ------------------------------------------------------------ named events

    def verification(self, verifier: str, verdict: str, seconds: float, flags: Iterable[str],
                     evidence: dict[str, Any] | None) -> None:
        counted = self._children.get(("verification", verifier, verdict))  # bounded: verifiers x verdicts
        if counted is None:
            counted = (self.verifications.labels(verifier, verdict), self.latency.labels(verifier))
            self._children[("verification", verifier, verdict)] = counted  # type: ignore[assignment]
        counted[0].inc()  # type: ignore[index]
        counted[1].observe(seconds)  # type: ignore[index]
        for label in {self._flag_label(verifier, flag) for flag in flags}:
            flagged = self._children.get(("flag", verifier, label))  # bounded: a flag label set per verifier
            if flagged is None:
                flagged = self._children[("flag", verifier, label)] = self.flags.labels(verifier, label)
            flagged.inc()  # type: ignore[attr-defined]
        if verdict == "error":
            self.errors.labels(verifier, error_cause(evidence, "error"), error_cause(evidence)).inc()

    # ---------------------------------------------------------- by metric name

    def _metric(self, name: str, kind: type[MetricWrapperBase], labels: dict[str, str]) -> MetricWrapperBase:
        key = (name, *labels.items())
        child = self._children.get(key)  # a per-request counter: no lock, no label validation once seen
        if child is None:
            child = self._children[key] = self._labelled(name, kind, labels)
        return child

    def _labelled(self, name: str, kind: type[MetricWrapperBase], labels: dict[str, str]) -> MetricWrapperBase:
        with self._lock:
            metric = self._by_name.get(name)
            if metric is None:
                # A gauge here is what a process holds (e.g. responses in flight): summed over live processes.
                extra = {Histogram: {"buckets": BUCKETS}, Gauge: {"multiprocess_mode": "livesum"}}.get(kind, {})
                metric = self._by_name[name] = kind(name, name, sorted(labels), registry=self.registry, **extra)
        return metric.labels(**labels) if labels else metric

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        self._metric(name, Counter, labels).inc(amount)  # type: ignore[attr-defined]

    def set(self, name: str, value: float, **labels: str) -> None:
        self._metric(name, Gauge, labels).set(value)  # type: ignore[attr-defined]

    def observe(self, name: str, value: float, **labels: str) -> None:
        self._metric(name, Histogram, labels).observe(value)  # type: ignore[attr-defined]

    def render(self) -> bytes:
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        if self._refresh_pools is not None:
            self._refresh_pools()
        return generate_latest(multiprocess_registry(self.multiprocess_dir))


def serve_metrics_port(metrics: Metrics, host: str, port: int) -> Callable[[], None]:
    """Serve the registry on a listener of its own (any path answers); returns its stop."""
    return _serve_registry(metrics.registry, host, port)


def serve_multiprocess_port(directory: str, host: str, port: int) -> Callable[[], None]:
    """`serve_metrics_port` for several API processes: the sums of what they wrote into `directory`."""
    return _serve_registry(multiprocess_registry(directory), host, port)


def _serve_registry(registry: CollectorRegistry, host: str, port: int) -> Callable[[], None]:
    from prometheus_client import start_http_server

    server, thread = start_http_server(port, addr=host, registry=registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return stop
