"""The viewer in a real browser (Debian's chromium via Playwright): hostile records run nothing and
break no layout on any page; keyboard navigation, charts, replay and the static export work.

Set ASSAY_VIEWER_SCREENSHOTS=DIR to also save a screenshot of each page (docs/viewer/ holds them)."""

from __future__ import annotations

import os
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from service.testing.live import LiveServer
from service.testing.ui import (
    CHROMIUM,
    CHROMIUM_ARGS,
    HOSTILE_RESPONSES,
    WATCH_SCRIPT,
    Populated,
    populate,
)

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed "
                                                   "(scripts/test.sh installs it)")]
SHOTS = os.environ.get("ASSAY_VIEWER_SCREENSHOTS")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    srv = LiveServer(tmp_path_factory.mktemp("viewer-browser"))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def data(server: LiveServer) -> Populated:
    return populate(server, mixed_groups=12)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 900}, accept_downloads=True)
        context.add_init_script(WATCH_SCRIPT)
        yield context
        context.close()


@pytest.fixture(scope="module")
def page(browser, server: LiveServer, data: Populated):
    """A tab signed in through the form with an audit and review key."""
    tab = browser.new_page()
    tab.on("dialog", lambda d: (setattr(tab, "dialog_seen", d.message), d.dismiss()))
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    tab.console_errors = errors
    tab.goto(server.url + "/ui/records")
    assert "/ui/?next=" in tab.url
    tab.fill("#api_key", server.create_key("audit,review"))
    tab.click("button[type=submit]")
    tab.wait_for_url("**/ui/records")
    return tab


def _assert_clean(page, name: str) -> None:
    """Nothing ran, nothing was blocked that the page needed, and the layout holds."""
    state = page.evaluate("""() => ({
        pwned: window.__pwned === undefined ? null : String(window.__pwned),
        violations: window.__violations,
        foreign: Array.from(document.querySelectorAll('main img, main svg, main iframe, main style, main object,'
                            + ' main script:not([type="application/json"]), main embed,'
                            + ' main form[action^="http"]')).length,
        jsLinks: Array.from(document.querySelectorAll('a')).filter(a => a.href.startsWith('javascript:')).length,
        overflow: document.documentElement.scrollWidth - window.innerWidth,
        header: document.querySelector('header.top').getBoundingClientRect().height,
        hidden: getComputedStyle(document.body).display,
    })""")
    assert state["pwned"] is None, (name, state)
    assert not getattr(page, "dialog_seen", None), name
    assert state["violations"] == [], (name, state["violations"])
    assert state["foreign"] == 0 and state["jsLinks"] == 0, (name, state)
    assert state["overflow"] <= 1, (name, "page wider than the window", state["overflow"])
    assert state["header"] > 20 and state["hidden"] != "none", name
    assert page.console_errors == [], (name, page.console_errors)
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=False)


def test_every_page_with_hostile_records_runs_nothing_and_keeps_its_layout(page, server: LiveServer,
                                                                          data: Populated):
    page.goto(server.url + "/ui/")
    page.wait_for_selector("body[data-charts-drawn]")
    _assert_clean(page, "overview")
    page.goto(server.url + "/ui/records")
    _assert_clean(page, "records")
    page.goto(server.url + "/ui/records?" + "verifier=math&sort=reward_desc")
    _assert_clean(page, "records-sorted")
    page.goto(server.url + f"/ui/groups/{data.group_ids[0]}")
    _assert_clean(page, "group")
    page.goto(server.url + f"/ui/records/{data.groups[0]['results'][6]['record_id']}")
    _assert_clean(page, "record")
    for i, record_id in enumerate(data.hostile_record_ids):
        page.goto(server.url + f"/ui/records/{record_id}")
        _assert_clean(page, f"hostile-record-{i}")
        # The hostile text is shown, as text.
        assert HOSTILE_RESPONSES[i][:40] in page.inner_text("pre.response")
    for record_id in data.sql_record_ids:
        page.goto(server.url + f"/ui/records/{record_id}")
        _assert_clean(page, "sql-record-hidden-gold")
    page.click("a[href^='/ui/records?task=']")
    _assert_clean(page, "records-by-task")
    page.goto(server.url + "/ui/records?" + "group=" + data.hostile_group.replace('"', "%22").replace(">", "%3E")
              .replace("<", "%3C").replace(" ", "%20").replace("=", "%3D"))
    assert len(page.query_selector_all("#records tbody tr[data-href]")) == len(HOSTILE_RESPONSES)
    _assert_clean(page, "hostile-records")
    page.click("#records tbody tr[data-href] td.mono a")  # the hostile group id, as a link
    page.wait_for_selector(".side-by-side")
    assert page.inner_text("h1").endswith(data.hostile_group)
    _assert_clean(page, "hostile-group")
    page.goto(server.url + "/ui/evals")
    _assert_clean(page, "evals")
    page.click("#evals tbody tr >> nth=0 >> a")
    _assert_clean(page, "eval")
    page.goto(server.url + f"/ui/evals/{data.eval_ids[0]}/compare/{data.eval_ids[1]}")
    page.wait_for_selector("body[data-charts-drawn]")
    _assert_clean(page, "eval-compare")
    page.goto(server.url + "/ui/review?verifier=math&flag=")
    _assert_clean(page, "review")


def test_overview_draws_every_chart_with_the_vendored_library(page, server: LiveServer, data: Populated):
    page.goto(server.url + "/ui/")
    page.wait_for_selector("body[data-charts-drawn]")
    drawn = page.evaluate("() => Array.from(document.querySelectorAll('canvas[data-chart]'))"
                          ".map(c => !!Chart.getChart(c) && c.width > 0)")
    assert len(drawn) == 8 and all(drawn)  # math and sql, four charts each
    assert "math" in page.inner_text("section#verifier-math table.summary") or page.is_visible("#verifier-math")


def test_keyboard_moves_through_records_and_enter_opens_one(page, server: LiveServer):
    page.goto(server.url + "/ui/records")
    hrefs = page.eval_on_selector_all("#records tbody tr[data-href]", "rows => rows.map(r => r.dataset.href)")
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    assert page.eval_on_selector("#records tbody tr.selected", "r => r.dataset.href") == hrefs[1]
    page.keyboard.press("Enter")
    page.wait_for_url(f"**{hrefs[1]}")
    page.goto(server.url + "/ui/records")
    page.keyboard.press("n")
    page.wait_for_url("**after=*")
    assert page.eval_on_selector_all("#records tbody tr[data-href]", "rows => rows.map(r => r.dataset.href)")[0] \
        not in hrefs


def test_replay_button_reports_the_outcome(page, server: LiveServer, data: Populated):
    page.goto(server.url + f"/ui/records/{data.groups[0]['results'][2]['record_id']}")
    page.click("#replay")
    page.wait_for_selector("#replay-outcome")
    assert "same verdict" in page.inner_text("#replay-outcome")
    _assert_clean(page, "record-replayed")


def test_export_bundle_opens_from_disk_without_a_server(page, server: LiveServer, data: Populated, tmp_path: Path):
    page.goto(server.url + "/ui/records?" + urlencode({"group": data.hostile_group}))
    with page.expect_download() as download:
        page.click("#export")
    archive = tmp_path / "bundle.zip"
    download.value.save_as(archive)
    with zipfile.ZipFile(archive) as z:
        z.extractall(tmp_path)
    index = next(tmp_path.glob("assay-records-*/index.html"))
    page.goto(index.as_uri())
    page.wait_for_selector("body[data-rendered]")
    assert page.get_attribute("body", "data-rendered") == str(len(HOSTILE_RESPONSES))
    page.click("#records tbody tr >> nth=0")
    assert page.inner_text("#detail pre.response")
    page.fill("#f-text", "onerror")
    assert len(page.query_selector_all("#records tbody tr")) >= 1
    page.click("#records tbody tr >> nth=0")
    _assert_clean(page, "export-bundle")
    shutil.rmtree(index.parent)


def test_review_labels_with_one_key_and_loads_the_next_item(page, server: LiveServer, data: Populated):
    page.goto(server.url + "/ui/review?verifier=math")
    first = page.get_attribute("#review-item", "data-record")
    page.keyboard.press("a")
    page.wait_for_function(f"() => document.querySelector('#review-item')?.dataset.record !== '{first}'")
    second = page.get_attribute("#review-item", "data-record")
    page.keyboard.press("x")  # exploit, pattern = its first flag, or the pattern field takes the focus
    if page.evaluate("() => document.activeElement.id") == "label-pattern":
        page.keyboard.type("shortcut")
        page.keyboard.press("Enter")
    page.wait_for_function(f"() => document.querySelector('#review-item')?.dataset.record !== '{second}'")
    page.goto(server.url + f"/ui/records/{first}")
    assert "agree" in page.inner_text("#labels")
    page.goto(server.url + f"/ui/records/{second}")
    assert "exploit" in page.inner_text("#labels")
    _assert_clean(page, "record-labelled")
