"""A small Prometheus text-format registry (counters, gauges, histograms)."""

from __future__ import annotations

import threading
from collections import defaultdict

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_HELP = {
    "assay_verifications_total": ("counter", "Verifications by verifier and verdict."),
    "assay_errors_total": ("counter", "Infrastructure or verifier failures (verdict error)."),
    "assay_rejected_total": ("counter", "Requests rejected for saturation."),
    "assay_flags_total": ("counter", "Flags written on records, by verifier and flag."),
    "assay_zero_variance_groups_total": ("counter", "Groups whose rewards were all equal."),
    "assay_inflight_responses": ("gauge", "Responses being verified now."),
    "assay_verification_seconds": ("histogram", "Time to verify one response."),
    "assay_http_requests_total": ("counter", "HTTP requests by route and status."),
}


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{str(v).replace(chr(34), "")}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[str, float]] = defaultdict(dict)
        self._hist: dict[str, dict[str, list[float]]] = defaultdict(dict)

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        key = _labels(labels)
        with self._lock:
            self._values[name][key] = self._values[name].get(key, 0.0) + amount

    def set(self, name: str, value: float, **labels: str) -> None:
        with self._lock:
            self._values[name][_labels(labels)] = value

    def observe(self, name: str, value: float, **labels: str) -> None:
        key = _labels(labels)
        with self._lock:
            counts = self._hist[name].setdefault(key, [0.0] * (len(_BUCKETS) + 2))
            for i, bound in enumerate(_BUCKETS):
                if value <= bound:
                    counts[i] += 1
            counts[-2] += 1  # count
            counts[-1] += value  # sum

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name in sorted(set(self._values) | set(self._hist) | {"assay_verifications_total"}):
                kind, text = _HELP.get(name, ("untyped", name))
                lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
                for key, value in sorted(self._values.get(name, {}).items()):
                    lines.append(f"{name}{key} {value:g}")
                for key, counts in sorted(self._hist.get(name, {}).items()):
                    base = key[1:-1] + "," if key else ""
                    for bound, count in zip(_BUCKETS, counts, strict=False):
                        lines.append(f'{name}_bucket{{{base}le="{bound}"}} {count:g}')
                    lines.append(f'{name}_bucket{{{base}le="+Inf"}} {counts[-2]:g}')
                    lines.append(f"{name}_count{key} {counts[-2]:g}")
                    lines.append(f"{name}_sum{key} {counts[-1]:g}")
        return "\n".join(lines) + "\n"
