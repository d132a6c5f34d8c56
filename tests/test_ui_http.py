"""The audit viewer through HTTP, as a browser would use it: sign-in, CSRF, pages, filters, export."""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.testing.app import AppServer, app_settings
from service.testing.ui import GOLD_MARKER, Populated, csrf_field, populate, sign_in


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    with AppServer(app_settings(tmp_path_factory.mktemp("viewer-http"))) as srv:
        yield srv


@pytest.fixture(scope="module")
def data(server: AppServer) -> Populated:
    return populate(server)


@pytest.fixture(scope="module")
def auditor(server: AppServer, data: Populated) -> Iterator[httpx.Client]:
    client = sign_in(server, server.create_key("audit"))
    yield client
    client.close()


def test_sign_in_sets_a_strict_httponly_cookie_and_never_puts_the_key_in_a_url(server: AppServer):
    key = server.create_key("audit")
    with server.anonymous() as browser:
        form = browser.get("/ui/")
        assert form.status_code == 200 and 'name="api_key"' in form.text and 'type="password"' in form.text
        assert 'method="post"' in form.text
        reply = browser.post("/ui/sign-in", data={"api_key": key, "csrf_token": csrf_field(form.text),
                                                  "next": "/ui/records?verdict=correct"})
        assert reply.status_code == 303
        assert reply.headers["location"] == "/ui/records?verdict=correct"
        assert key not in reply.headers["location"] and key not in reply.text
        cookie = next(v for k, v in reply.headers.multi_items() if k == "set-cookie" and "assay_session=" in v)
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower() and "path=/ui" in cookie.lower()
        assert key.split("_", 2)[2] not in cookie
        assert browser.get("/ui/records").status_code == 200


def test_sign_in_refuses_bad_keys_and_missing_scope_without_echoing_them(server: AppServer):
    reward_only = server.create_key("reward")
    with server.anonymous() as browser:
        token = csrf_field(browser.get("/ui/").text)
        for key, message in ((reward_only, "lacks the 'audit' scope"), ("ak_nope_nope", "unknown or revoked")):
            reply = browser.post("/ui/sign-in", data={"api_key": key, "csrf_token": token})
            assert reply.status_code == 401 and message.replace("'", "&#39;") in reply.text
            assert key not in reply.text
            assert "assay_session" not in browser.cookies


def test_sign_in_without_the_form_token_or_from_another_origin_is_refused(server: AppServer):
    key = server.create_key("audit")
    with server.anonymous() as browser:
        token = csrf_field(browser.get("/ui/").text)
        assert browser.post("/ui/sign-in", data={"api_key": key}).status_code == 403
        assert browser.post("/ui/sign-in", data={"api_key": key, "csrf_token": "forged"}).status_code == 403
        cross = browser.post("/ui/sign-in", data={"api_key": key, "csrf_token": token},
                             headers={"Origin": "https://evil.example"})
        assert cross.status_code == 403 and "assay_session" not in browser.cookies
    with server.anonymous() as fresh:  # a form token without its cookie (another browser)
        assert fresh.post("/ui/sign-in", data={"api_key": key, "csrf_token": token}).status_code == 403


def test_pages_need_a_session_and_send_the_visitor_back_after_sign_in(server: AppServer, data: Populated):
    with server.anonymous() as anonymous:
        for path in ("/ui/records?verdict=correct", f"/ui/groups/{data.group_ids[0]}", "/ui/export"):
            reply = anonymous.get(path)
            assert reply.status_code == 303 and reply.headers["location"].startswith("/ui/?next=")
        # An API key in a header does not open the viewer: it takes the sign-in form.
        assert anonymous.get("/ui/records", headers={"Authorization": f"Bearer {server.admin_key}"}).status_code == 303
        form = anonymous.get("/ui/", params={"next": "https://evil.example/"})
        assert 'name="next" value="/ui/"' in form.text


def test_sign_out_ends_the_session_on_the_server(server: AppServer):
    browser = sign_in(server, server.create_key("audit"))
    stolen = browser.cookies["assay_session"]
    page = browser.get("/ui/records")
    assert browser.post("/ui/sign-out", data={}).status_code == 403  # no CSRF token
    reply = browser.post("/ui/sign-out", data={"csrf_token": csrf_field(page.text)})
    assert reply.status_code == 303 and reply.headers["location"] == "/ui/"
    with server.anonymous() as replayer:
        replayer.cookies.set("assay_session", stolen)
        assert replayer.get("/ui/records").status_code == 303
    browser.close()


def test_revoking_the_key_ends_its_sessions(server: AppServer):
    import sqlite3

    key = server.create_key("audit")
    browser = sign_in(server, key)
    assert browser.get("/ui/records").status_code == 200
    with sqlite3.connect(server.db_url.removeprefix("sqlite:///")) as db:
        db.execute("UPDATE api_keys SET revoked = 1 WHERE key_id = ?", (key.split("_")[1],))
    assert browser.get("/ui/records").status_code == 303
    browser.close()


def test_every_viewer_response_carries_a_strict_content_security_policy(auditor: httpx.Client, data: Populated):
    for path in ("/ui/", "/ui/records", f"/ui/records/{data.hostile_record_ids[0]}", f"/ui/groups/{data.group_ids[0]}",
                 "/ui/static/viewer.css", "/ui/records/nope"):
        reply = auditor.get(path)
        csp = reply.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp, path
        assert reply.headers["x-content-type-options"] == "nosniff"
    assert auditor.get("/ui/records/nope").status_code == 404


def _record_ids(html: str) -> list[str]:
    return re.findall(r'data-href="/ui/records/([0-9a-f]{32})"', html)


def test_records_filter_by_verdict_verifier_group_task_and_flag(auditor: httpx.Client, data: Populated):
    correct = auditor.get("/ui/records", params={"verdict": "correct", "verifier": "math"})
    assert correct.status_code == 200
    rows = re.findall(r'<span class="verdict v-(\w+)">', correct.text)
    assert rows and set(rows) == {"correct"}
    group = auditor.get("/ui/records", params={"group": data.group_ids[1], "sort": "oldest"})
    assert _record_ids(group.text) == [r["record_id"] for r in data.groups[1]["results"]]
    sql = auditor.get("/ui/records", params={"verifier": "sql"})
    assert set(_record_ids(sql.text)) == set(data.sql_record_ids)
    flagged = auditor.get("/ui/records", params={"flag": "no-such-flag"})
    assert "No records match." in flagged.text
    bad = auditor.get("/ui/records", params={"verdict": "bogus"})
    assert bad.status_code == 422 and "verdict" in bad.text
    bad_time = auditor.get("/ui/records", params={"since": "yesterday"})
    assert bad_time.status_code == 422 and "since" in bad_time.text
    assert auditor.get("/ui/records", params={"after": "not-a-cursor"}).status_code == 422


def _walk(auditor: httpx.Client, params: dict[str, str]) -> list[str]:
    pages, url = [], "/ui/records?" + httpx.QueryParams(params).__str__()
    while url:
        reply = auditor.get(url)
        assert reply.status_code == 200
        pages.append(reply.text)
        match = re.search(r'href="([^"]+)" id="next-page"', reply.text)
        url = match.group(1).replace("&amp;", "&") if match else ""
    return pages


@pytest.mark.parametrize("sort", ["newest", "oldest", "reward_desc", "slowest"])
def test_keyset_pages_cover_every_record_once_in_order(server: AppServer, auditor: httpx.Client, data: Populated,
                                                       sort: str):
    pages = _walk(auditor, {"verifier": "math", "sort": sort})
    assert len(pages) >= 2  # 8 groups of 8 + 4 + 6 math records and the evaluation runs' at 50 a page
    ids = [i for p in pages for i in _record_ids(p)]
    with server.client() as api:
        export = api.get("/v1/records/export", params={"verifier": "math"}).text
    expected = {json.loads(line)["id"] for line in export.splitlines()}
    assert len(ids) == len(set(ids)) and set(ids) == expected
    if sort == "reward_desc":
        rewards = [float(x) for p in pages for x in re.findall(r'<td class="num">([0-9.]+)</td>\s*<td>', p)]
        assert rewards == sorted(rewards, reverse=True)


def test_group_page_shows_each_response_with_reward_advantage_and_the_group_statistics(
        auditor: httpx.Client, data: Populated):
    group = data.groups[0]
    html = auditor.get(f"/ui/groups/{group['group_id']}").text
    assert re.search(r'id="group-mean">([0-9.]+)<', html).group(1) == f"{group['mean']:.4f}"
    assert re.search(r'id="group-std">([0-9.]+)<', html).group(1) == f"{group['std']:.4f}"
    assert ">no<" in re.search(r'id="zero-variance">.*?</dd>', html).group(0)
    assert html.count('class="response-card') == len(group["results"])
    for advantage in group["advantages"]:
        assert f"{advantage:.4f}" in html
    zero = auditor.get(f"/ui/groups/{data.zero_variance_group}").text
    assert "no relative signal" in zero
    assert auditor.get("/ui/groups/no-such-group").status_code == 404


def test_record_page_highlights_the_answer_hides_hidden_fields_and_marks_hard_components(
        auditor: httpx.Client, data: Populated):
    math = auditor.get(f"/ui/records/{data.groups[0]['results'][6]['record_id']}").text
    assert "hence \\boxed{<mark>4</mark>}" in math
    assert '<span class="kind hard">hard</span>' in math
    sql = auditor.get(f"/ui/records/{data.sql_record_ids[0]}").text
    assert GOLD_MARKER not in sql and "hidden · hmac-sha256" in sql
    assert "&lt;script&gt;window.__pwned=8&lt;/script&gt;" in sql and "<script>window" not in sql


def test_replay_button_shows_its_outcome_and_needs_the_form_token(auditor: httpx.Client, data: Populated):
    record_id = data.groups[0]["results"][0]["record_id"]
    page = auditor.get(f"/ui/records/{record_id}")
    assert auditor.post(f"/ui/records/{record_id}/replay", data={}).status_code == 403
    reply = auditor.post(f"/ui/records/{record_id}/replay", data={"csrf_token": csrf_field(page.text)})
    assert reply.status_code == 200
    assert re.search(r'id="replay-outcome" class="same">.*same verdict', reply.text, re.S)


def test_hostile_text_is_escaped_in_every_page(auditor: httpx.Client, data: Populated):
    pages = [auditor.get(f"/ui/records/{i}").text for i in data.hostile_record_ids]
    pages += [auditor.get("/ui/records", params={"group": data.hostile_group}).text,
              auditor.get(f"/ui/groups/{data.hostile_group}").text]
    for html in pages:
        assert "<script>window" not in html and "<img src=x" not in html and "<svg onload" not in html
        assert 'href="javascript:' not in html and "<iframe" not in html and "<style>body" not in html
    assert "&lt;img src=x onerror=" in pages[1]


def test_export_is_a_static_bundle_of_the_filtered_records(auditor: httpx.Client, data: Populated, tmp_path: Path):
    reply = auditor.get("/ui/export", params={"group": data.hostile_group})
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(reply.content)) as z:
        names = {n.split("/", 1)[1] for n in z.namelist()}
        assert names == {"index.html", "data.js", "bundle.js", "viewer.css", "records.jsonl"}
        lines = next(z.read(n) for n in z.namelist() if n.endswith("records.jsonl")).decode().splitlines()
    assert len(lines) == len(data.hostile_record_ids)


def test_static_files_are_only_the_packaged_ones(auditor: httpx.Client):
    assert auditor.get("/ui/static/vendor/chart.umd.min.js").status_code == 200
    for path in ("/ui/static/../pages.py", "/ui/static/%2e%2e/pages.py", "/ui/static/nothing.js"):
        assert auditor.get(path).status_code == 404


@pytest.fixture(scope="module")
def reviewer(server: AppServer, data: Populated) -> Iterator[httpx.Client]:
    client = sign_in(server, server.create_key("audit,review"))
    yield client
    client.close()


def test_labelling_needs_the_review_scope_and_keeps_the_history(auditor: httpx.Client, reviewer: httpx.Client,
                                                              data: Populated):
    record_id = data.groups[2]["results"][0]["record_id"]
    audit_page = auditor.get(f"/ui/records/{record_id}").text
    assert 'id="label-form"' not in audit_page and "needs a key with the <code>review</code> scope" in audit_page
    refused = auditor.post(f"/ui/records/{record_id}/labels", data={"csrf_token": csrf_field(audit_page),
                                                                   "label": "agree"})
    assert refused.status_code == 403
    page = reviewer.get(f"/ui/records/{record_id}").text
    token = csrf_field(page)
    assert reviewer.post(f"/ui/records/{record_id}/labels", data={"label": "agree"}).status_code == 403
    first = reviewer.post(f"/ui/records/{record_id}/labels",
                          data={"csrf_token": token, "label": "agree", "note": "<b>looks</b> right"})
    assert first.status_code == 303 and first.headers["location"] == f"/ui/records/{record_id}"
    bad = reviewer.post(f"/ui/records/{record_id}/labels", data={"csrf_token": token, "label": "disagree"})
    assert bad.status_code == 422 and "corrected_verdict" in bad.text
    assert reviewer.post(f"/ui/records/{record_id}/labels", data={
        "csrf_token": token, "label": "disagree", "corrected_verdict": "incorrect"}).status_code == 303
    history = reviewer.get(f"/ui/records/{record_id}").text
    labels = re.search(r'<table class="labels" id="labels">.*?</table>', history, re.S).group(0)
    assert labels.index("agree") < labels.index("disagree") and "&lt;b&gt;looks&lt;/b&gt; right" in labels
    # Filters go by the latest label.
    assert record_id in _record_ids(reviewer.get("/ui/records", params={"label": "disagree"}).text)
    assert record_id not in _record_ids(reviewer.get("/ui/records", params={"label": "agree"}).text)
    assert record_id not in _record_ids(reviewer.get("/ui/records", params={"label": "none"}).text)
    assert record_id in _record_ids(reviewer.get("/ui/records", params={"label": "any"}).text)


def test_review_queue_labels_one_item_then_loads_the_next(auditor: httpx.Client, reviewer: httpx.Client,
                                                         data: Populated):
    assert auditor.get("/ui/review").status_code == 403
    seen = []
    for _ in range(3):
        page = reviewer.get("/ui/review", params={"verifier": "math"})
        assert page.status_code == 200
        record_id = re.search(r'id="review-item" data-record="([0-9a-f]{32})"', page.text).group(1)
        assert record_id not in seen
        seen.append(record_id)
        next_url = re.search(r'name="next" value="([^"]*)"', page.text).group(1).replace("&amp;", "&")
        reply = reviewer.post(f"/ui/records/{record_id}/labels",
                              data={"csrf_token": csrf_field(page.text), "label": "agree", "next": next_url})
        assert reply.status_code == 303 and reply.headers["location"].startswith("/ui/review?verifier=math")
    skipped_page = reviewer.get("/ui/review", params={"verifier": "math"}).text
    skip = re.search(r'href="([^"]+)" id="skip"', skipped_page).group(1).replace("&amp;", "&")
    first = re.search(r'data-record="([0-9a-f]{32})"', skipped_page).group(1)
    assert re.search(r'data-record="([0-9a-f]{32})"', reviewer.get(skip).text).group(1) != first


def test_eval_pages_report_and_compare_runs(auditor: httpx.Client, data: Populated):
    listing = auditor.get("/ui/evals").text
    assert all(eval_id in listing for eval_id in data.eval_ids)
    assert "&lt;script&gt;window.__pwned=11&lt;/script&gt;held-out" in listing and "<script>window" not in listing
    report = auditor.get(f"/ui/evals/{data.eval_ids[1]}").text
    assert "pass@1" in report and "&lt;b&gt;arith&lt;/b&gt;" in report
    a, b = data.eval_ids
    moved = auditor.get("/ui/evals/compare", params={"a": a, "b": b})
    assert moved.status_code == 303 and moved.headers["location"] == f"/ui/evals/{a}/compare/{b}"
    compared = auditor.get(f"/ui/evals/{a}/compare/{b}")
    assert compared.status_code == 200 and "b − a" in compared.text and "pass@1" in compared.text
    assert auditor.get(f"/ui/evals/{a}/compare/nope").status_code == 404
    assert auditor.get("/ui/evals/nope").status_code == 404
    assert auditor.get("/ui/records", params={"eval": a}).status_code == 200
    assert len(_record_ids(auditor.get("/ui/records", params={"eval": a}).text)) == 3 * 4 + 2 * 4
