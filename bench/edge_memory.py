"""Server memory for hostile bodies at the edge (issue 22): an 8 MB body without a key,
four of them at once, and 110,000 groups with a valid `reward` key.

    python bench/edge_memory.py

Starts `assay serve` (SQLite, process sandbox), then reports the server's RSS growth
(VmRSS after each step minus before, and the peak VmHWM) with the answer's status.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from service.testing.live import LiveServer  # noqa: E402


def _status(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(field)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(Path(tmp))
        try:
            pid = server.proc.pid
            key = server.create_key("reward")
            empty = b"[" + b"{}," * (8 * 1024 * 1024 // 3 - 2) + b"{}]"
            groups = b'{"groups": [' + b",".join([b"{}"] * 110_000) + b"]}"
            start = _status(pid, "VmRSS")
            print(f"server RSS at start: {start:.0f} MB; bodies {len(empty) / 2**20:.1f} MB and "
                  f"{len(groups) / 2**20:.1f} MB")
            reply = httpx.post(f"{server.url}/v1/groups", content=empty, timeout=60,
                               headers={"Content-Type": "application/json"})
            print(f"8 MB without a key: {reply.status_code}; RSS +{_status(pid, 'VmRSS') - start:.0f} MB, "
                  f"peak +{_status(pid, 'VmHWM') - start:.0f} MB")
            statuses: list[int] = []

            def post() -> None:
                statuses.append(httpx.post(f"{server.url}/v1/groups", content=empty, timeout=60,
                                           headers={"Content-Type": "application/json"}).status_code)

            threads = [threading.Thread(target=post) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print(f"4 at once without a key: {statuses}; RSS +{_status(pid, 'VmRSS') - start:.0f} MB, "
                  f"peak +{_status(pid, 'VmHWM') - start:.0f} MB")
            reply = httpx.post(f"{server.url}/v1/groups", content=groups, timeout=60,
                               headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
            print(f"110,000 groups with a reward key: {reply.status_code} {reply.text[:80]!r}; "
                  f"RSS +{_status(pid, 'VmRSS') - start:.0f} MB, peak +{_status(pid, 'VmHWM') - start:.0f} MB")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
