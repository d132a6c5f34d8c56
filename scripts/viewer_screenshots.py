"""Screenshots of every viewer page for docs/viewer/ (and the README), in Debian's chromium.

    .venv/bin/python scripts/viewer_screenshots.py [OUT_DIR] [--runs-only]

A real server gets real groups through /v1/groups (honest and hostile ones, as the browser test
uses); a week of synthetic history is added to its store so the overview's charts have a shape.
The training-run pages get a hacking and an honest synthetic run (tests/run_support.py);
`--runs-only` takes only those screenshots.
"""

from __future__ import annotations

import random
import sys
import tempfile
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service.store import AuditStore
from service.tables import RecordRow, new_record_id  # noqa: E402
from service.testing.live import LiveServer  # noqa: E402
from service.testing.runs import SyntheticRun, replay  # noqa: E402
from service.testing.ui import CHROMIUM, CHROMIUM_ARGS, populate  # noqa: E402

VERDICT_WEIGHTS = {"math": (0.55, 0.3, 0.08, 0.0, 0.04, 0.03), "code": (0.4, 0.35, 0.05, 0.1, 0.07, 0.03),
                   "sql": (0.6, 0.3, 0.05, 0.03, 0.01, 0.01)}
VERDICTS = ("correct", "incorrect", "invalid_format", "violation", "timeout", "error")
FLAGS = {"math": ["answer_only", "false_step"], "code": ["exits_process", "overrides_equality"],
         "sql": ["constant_result"]}


def history(store: AuditStore, days: int = 7, per_hour: int = 12) -> None:
    """Synthetic records over the last `days`, in groups of 8, with drifting rates."""
    rng = random.Random(7)
    now = datetime.now(UTC)
    rows = []
    for hour in range(days * 24, 0, -1):
        drift = (days * 24 - hour) / (days * 24)
        for verifier, weights in VERDICT_WEIGHTS.items():
            for g in range(per_hour // 8 + 1):
                group_id = new_record_id()
                verdicts = rng.choices(VERDICTS, weights=[weights[0] + 0.2 * drift, *weights[1:]], k=8)
                rewards = [1.0 if v == "correct" else 0.0 for v in verdicts]
                mean = sum(rewards) / 8
                for i, verdict in enumerate(verdicts):
                    length = int(rng.lognormvariate(6, 1))
                    flags = [f for f in FLAGS[verifier] if rng.random() < 0.03 + 0.05 * drift]
                    rows.append(RecordRow(
                        id=new_record_id(), created_at=now - timedelta(hours=hour, minutes=g * 7 + i),
                        task_id=f"{verifier}-task-{rng.randrange(40)}", task_hash="0" * 64, task_public={},
                        verifier=verifier, verifier_version="1", response_hash="0" * 64,
                        response="step " * (length // 5),
                        components={"correctness": {"value": rewards[i], "hard": True}},
                        reward=rewards[i], verdict=verdict, evidence={}, flags=flags, sandbox_backend="process",
                        duration_ms=rng.lognormvariate(3 + (verifier == "code"), 0.5), group_id=group_id,
                        group_index=i, advantage=rewards[i] - mean, group_mean=mean, group_std=0.5,
                        group_zero_variance=len(set(rewards)) == 1))
    store.append(rows, [])


def run_shots(server: LiveServer, page, out: Path) -> None:  # type: ignore[no-untyped-def]
    """The run list, a hacking run (its alarms and charts) and an honest run (its learning curve)."""
    hacking = SyntheticRun("qwen-math-grpo-7", "hacking", steps=14, change=6, seed=2)
    honest = SyntheticRun("qwen-math-grpo-8", "honest", steps=14, seed=1)
    with server.client() as c:
        replay(hacking, c)
        replay(honest, c)
    page.goto(server.url + "/ui/runs")
    page.screenshot(path=str(out / "runs.png"))
    for run, name in ((hacking, "run-hacking"), (honest, "run-honest")):
        page.goto(server.url + f"/ui/runs/{run.run_id}")
        page.wait_for_selector("body[data-charts-drawn]")
        page.screenshot(path=str(out / f"{name}.png"), full_page=True)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs_only = "--runs-only" in sys.argv[1:]
    out = Path(args[0] if args else "docs/viewer").resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(Path(tmp))
        try:
            if not runs_only:
                data = populate(server, mixed_groups=3)
                store = AuditStore(server.db_url)
                history(store)
                store.engine.dispose()
            with sync_playwright() as p:
                context = p.chromium.launch_persistent_context(
                    str(Path(tmp) / "profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                    viewport={"width": 1400, "height": 1000}, accept_downloads=True)
                page = context.new_page()
                page.goto(server.url + "/ui/")
                page.screenshot(path=str(out / "sign-in.png"))
                page.fill("#api_key", server.create_key("audit,review"))
                page.click("button[type=submit]")
                if runs_only:
                    page.wait_for_url("**/ui/")
                    run_shots(server, page, out)
                    context.close()
                    return
                page.wait_for_selector("body[data-charts-drawn]")
                page.screenshot(path=str(out / "overview.png"), full_page=True)
                page.goto(server.url + "/ui/records?sort=newest")
                page.keyboard.press("j")
                page.keyboard.press("j")
                page.screenshot(path=str(out / "records.png"))
                page.goto(server.url + f"/ui/groups/{data.group_ids[0]}")
                page.screenshot(path=str(out / "group.png"), full_page=True)
                page.goto(server.url + f"/ui/records/{data.groups[0]['results'][6]['record_id']}")
                page.click("#replay")
                page.wait_for_selector("#replay-outcome")
                page.screenshot(path=str(out / "record.png"), full_page=True)
                page.goto(server.url + f"/ui/records/{data.sql_record_ids[1]}")
                page.screenshot(path=str(out / "record-sql-hidden-gold.png"), full_page=True)
                page.goto(server.url + f"/ui/groups/{data.hostile_group.replace('#', '%23')}")
                page.screenshot(path=str(out / "group-hostile.png"))
                page.goto(server.url + "/ui/review?verifier=math")
                page.screenshot(path=str(out / "review.png"), full_page=True)
                page.goto(server.url + "/ui/evals")
                page.screenshot(path=str(out / "evals.png"))
                page.goto(server.url + f"/ui/evals/{data.eval_ids[1]}")
                page.screenshot(path=str(out / "eval.png"), full_page=True)
                page.goto(server.url + f"/ui/evals/{data.eval_ids[0]}/compare/{data.eval_ids[1]}")
                page.wait_for_selector("body[data-charts-drawn]")
                page.screenshot(path=str(out / "eval-compare.png"), full_page=True)
                page.goto(server.url + "/ui/records?verifier=math")
                with page.expect_download() as download:
                    page.click("#export")
                archive = Path(tmp) / "bundle.zip"
                download.value.save_as(archive)
                with zipfile.ZipFile(archive) as z:
                    z.extractall(tmp)
                page.goto(next(Path(tmp).glob("assay-records-*/index.html")).as_uri())
                page.click("#records tbody tr >> nth=3")
                page.screenshot(path=str(out / "export-bundle.png"))
                run_shots(server, page, out)
                context.close()
        finally:
            server.stop()
    print("screenshots in", out)


if __name__ == "__main__":
    main()
