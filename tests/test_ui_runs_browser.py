"""The training-run pages in a real browser (Debian's chromium via Playwright): the run list, a
hacking run's page with its charts, alarm marks and links to the records behind each alarm; a
hostile evaluation name runs nothing. ASSAY_VIEWER_SCREENSHOTS=DIR saves the pages too."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.testing.live import LiveServer
from service.testing.runs import SyntheticRun, replay
from service.testing.ui import CHROMIUM, CHROMIUM_ARGS, WATCH_SCRIPT

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed "
                                                   "(scripts/test.sh installs it)")]
HOSTILE_NAME = '<img src=x onerror="window.__pwned=1">"><script>window.__pwned=2</script>'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    srv = LiveServer(tmp_path_factory.mktemp("viewer-runs"))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def runs(server: LiveServer) -> dict[str, SyntheticRun]:
    hacking = SyntheticRun(f"hacking-{uuid.uuid4().hex[:6]}", "hacking", steps=9, change=4, seed=5)
    honest = SyntheticRun(f"honest-{uuid.uuid4().hex[:6]}", "honest", steps=9, seed=6)
    with server.client() as c:
        replay(hacking, c, eval_name=HOSTILE_NAME)
        replay(honest, c)
    return {"hacking": hacking, "honest": honest}


@pytest.fixture(scope="module")
def page(server: LiveServer, runs: dict[str, SyntheticRun], tmp_path_factory: pytest.TempPathFactory):
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 900})
        context.add_init_script(WATCH_SCRIPT)
        tab = context.new_page()
        errors: list[str] = []
        tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        tab.console_errors = errors
        tab.goto(server.url + "/ui/runs")
        tab.fill("#api_key", server.create_key("audit"))
        tab.click("button[type=submit]")
        tab.wait_for_url("**/ui/runs")
        yield tab
        context.close()


def _clean(page, name: str) -> None:
    from tests.test_ui_browser import _assert_clean

    _assert_clean(page, name)


def test_the_run_list_and_a_hacking_runs_page_with_its_alarms(page, server: LiveServer,
                                                               runs: dict[str, SyntheticRun]) -> None:
    hacking, honest = runs["hacking"], runs["honest"]
    rows = {r.split("\t")[0]: r for r in page.inner_text("#runs tbody").splitlines()}
    assert set(rows) >= {hacking.run_id, honest.run_id}
    _clean(page, "runs")
    page.click(f"a[href='/ui/runs/{hacking.run_id}']")
    page.wait_for_selector("body[data-charts-drawn='5']")
    drawn = page.evaluate("() => Array.from(document.querySelectorAll('canvas[data-chart]'))"
                          ".map(c => !!Chart.getChart(c) && c.width > 0)")
    assert drawn == [True] * 5
    alarms = page.inner_text("#alarms")
    assert "flag_rate" in alarms and "answer_only" in alarms and "reward_up_heldout_down" in alarms
    assert HOSTILE_NAME in page.inner_text("#held-out")  # the hostile evaluation name, shown as text
    _clean(page, "run")
    # The reward chart marks every alarm at its step; clicking a mark opens that alarm.
    mark = page.evaluate("""() => {
        const chart = Chart.getChart(document.querySelector('canvas[data-chart=reward]'));
        const i = chart.data.datasets.findIndex(d => d.label === 'alarm');
        const el = chart.getDatasetMeta(i).data[0];
        const box = chart.canvas.getBoundingClientRect();
        return {x: box.left + el.x, y: box.top + el.y, steps: chart.data.datasets[i].data.map(p => p.x)};
    }""")
    assert len(mark["steps"]) >= 2 and all(hacking.change <= s <= hacking.change + 3 for s in mark["steps"])
    page.mouse.click(mark["x"], mark["y"])
    page.wait_for_function("() => location.hash.startsWith('#alarm-')")
    # Each alarm links to its records: the flagged records of its step carry the flag and the run.
    page.click("#alarms a:has-text('flagged records')")
    page.wait_for_url("**/ui/records?**")
    assert f"run={hacking.run_id}" in page.url
    listed = page.query_selector_all("#records tbody tr[data-href]")
    assert listed and all("answer_only" in row.inner_text() for row in listed)
    _clean(page, "run-alarm-records")
    page.go_back()
    page.click("#alarms table.examples a >> nth=0")
    page.wait_for_url("**/ui/records/*")
    assert "answer_only" in page.inner_text("main")
    # A point of the series opens that step's records.
    page.go_back()
    page.wait_for_selector("body[data-charts-drawn='5']")
    point = page.evaluate("""() => {
        const chart = Chart.getChart(document.querySelector('canvas[data-chart=reward]'));
        const i = chart.data.datasets.findIndex(d => d.label === 'training reward');
        const el = chart.getDatasetMeta(i).data[1];
        const box = chart.canvas.getBoundingClientRect();
        return {x: box.left + el.x, y: box.top + el.y};
    }""")
    page.mouse.click(point["x"], point["y"])
    page.wait_for_url("**/ui/records?**step=1**")
    assert len(page.query_selector_all("#records tbody tr[data-href]")) == hacking.groups_per_step * 8


def test_an_honest_run_page_shows_the_learning_curve_and_no_alarm(page, server: LiveServer,
                                                                   runs: dict[str, SyntheticRun]) -> None:
    page.goto(server.url + f"/ui/runs/{runs['honest'].run_id}")
    page.wait_for_selector("body[data-charts-drawn='5']")
    assert page.is_visible("#no-alarms")
    curve = page.evaluate("""() => {
        const chart = Chart.getChart(document.querySelector('canvas[data-chart=reward]'));
        return chart.data.datasets.find(d => d.label === 'training reward').data.map(p => p.y);
    }""")
    assert len(curve) == runs["honest"].steps and curve[-1] > curve[0]
    # The per-step table (built in the browser from the page's data): one row per step, each as the API says.
    page.click("summary:has-text('Per step')")
    rows = page.eval_on_selector_all("#steps tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText))")
    with server.client() as c:
        steps = c.get(f"/v1/runs/{runs['honest'].run_id}").json()["steps"]
    assert len(rows) == len(steps) == runs["honest"].steps
    for row, step in zip(rows, steps, strict=True):
        assert row[:3] == [str(step["step"]), str(step["n"]), f"{step['reward_mean']:.3f}"], (row, step)
        assert row[9] == f"{100 * step['error_rate']:.1f}%", (row, step)
    assert page.get_attribute("#steps tbody tr >> nth=2 >> a", "href").endswith(f"step={steps[2]['step']}")
    _clean(page, "run-honest")
    assert page.goto(server.url + "/ui/runs/no-such-run").status == 404
