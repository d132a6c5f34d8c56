"""Shared by the viewer's tests: sign in through the form, and fill a store with honest and hostile records."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import httpx

from service.testing.app import AppServer
from service.testing.live import LiveServer

GOLD_MARKER = "QZX-hidden-gold-5521"
# Each payload would set window.__pwned or open a dialog if it ever ran.
HOSTILE_RESPONSES = [
    "<script>window.__pwned = 1; alert(1)</script> so the answer is \\boxed{4}",
    "<img src=x onerror=\"window.__pwned = 2; alert(2)\"> \\boxed{<img src=x onerror=alert(3)>}",
    "[click](javascript:alert(4)) <a href=\"javascript:window.__pwned=4\" id=\"evil-link\">link</a> \\boxed{4}",
    "\"><svg onload=\"window.__pwned=5\"></svg></pre></td></tr></table><style>body{display:none}</style>"
    "<h1 style=\"position:fixed;top:0;left:0;font-size:200px\">defaced</h1> \\boxed{3}",
    "x" * 60_000 + " \\boxed{4}",
    "<iframe src=\"javascript:parent.__pwned=6\"></iframe><form action=\"https://evil.example/\"><button>go</button></form>"
    " \\boxed{4}",
]
HOSTILE_GROUP_ID = "\"><img src=x onerror=window.__pwned=7>"
HOSTILE_EVAL_NAME = "<script>window.__pwned=11</script>held-out"
HOSTILE_SQL_TASK = {
    "dialect": "sqlite",
    "schema": "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT); -- <script>window.__pwned=8</script>"
              "<img src=x onerror=window.__pwned=9>",
    "instances": ["INSERT INTO emp VALUES (1,'ann'),(2,'bob');"],
    "gold": f"SELECT name FROM emp /* {GOLD_MARKER} */",
}


@dataclass
class Populated:
    group_ids: list[str] = field(default_factory=list)
    zero_variance_group: str = ""
    hostile_group: str = ""
    groups: list[dict] = field(default_factory=list)
    hostile_record_ids: list[str] = field(default_factory=list)
    sql_record_ids: list[str] = field(default_factory=list)
    eval_ids: list[str] = field(default_factory=list)


def populate(server: LiveServer | AppServer, mixed_groups: int = 8) -> Populated:
    """Honest math groups (mixed rewards), one zero-variance group, a hostile group, hostile SQL records."""
    out = Populated()
    responses = ["\\boxed{4}", "so $\\boxed{2+2}$", "\\boxed{5}", "no idea", "The answer is 4.", "\\boxed{3}",
                 "2+2 = 4, hence \\boxed{4}", "\\boxed{4} or \\boxed{5}"]
    with server.client() as c:
        body = {"groups": [{"verifier": "math", "task": {"answer": "4"}, "responses": responses}] * mixed_groups
                + [{"verifier": "math", "task": {"answer": "4"}, "responses": ["\\boxed{4}"] * 4}]
                + [{"verifier": "math", "task": {"answer": "4"}, "responses": HOSTILE_RESPONSES,
                    "group_id": HOSTILE_GROUP_ID}]}
        reply = c.post("/v1/groups", json=body)
        reply.raise_for_status()
        groups = reply.json()["groups"]
        out.groups = groups
        out.group_ids = [g["group_id"] for g in groups[:mixed_groups]]
        out.zero_variance_group = groups[mixed_groups]["group_id"]
        out.hostile_group = groups[-1]["group_id"]
        out.hostile_record_ids = [r["record_id"] for r in groups[-1]["results"]]
        sql = c.post("/v1/groups", json={"groups": [{"verifier": "sql", "task": HOSTILE_SQL_TASK, "responses": [
            "SELECT name FROM emp", "SELECT '<script>window.__pwned=10</script>' AS name"]}]})
        sql.raise_for_status()
        out.sql_record_ids = [r["record_id"] for r in sql.json()["groups"][0]["results"]]
        for checkpoint, responses in (("step-100", ["\\boxed{4}", "\\boxed{5}", "no", "\\boxed{4}"]),
                                      ("step-200", ["\\boxed{4}", "\\boxed{4}", "\\boxed{4}", "\\boxed{3}"])):
            tasks = [{"verifier": "math", "task": {"answer": str(k)}, "responses": [r.replace("4", str(k))
                                                                                   for r in responses]}
                     for k in (4, 6, 8)]
            run = c.post("/v1/evals", json={"name": HOSTILE_EVAL_NAME, "checkpoint": checkpoint,
                                            "families": {"math": tasks, "<b>arith</b>": tasks[:2]}})
            run.raise_for_status()
            out.eval_ids.append(run.json()["id"])
    return out


def csrf_field(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]*)"', html)
    assert match, "the page has no CSRF field"
    return match.group(1)


def sign_in(server: LiveServer | AppServer, key: str) -> httpx.Client:
    """A browser-like client (cookies kept, redirects not followed) signed in through the form."""
    client = server.anonymous()
    form = client.get("/ui/")
    reply = client.post("/ui/sign-in", data={"api_key": key, "csrf_token": csrf_field(form.text), "next": "/ui/"})
    assert reply.status_code == 303, reply.text
    return client


CHROMIUM = "/usr/bin/chromium"
# Debian's chromium (scripts/test.sh installs it): no sandbox as root, nothing fetched in the background.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--disable-quic", "--disable-dev-shm-usage"]
# Runs before any page script: notes anything a hostile payload could trigger, and CSP violations.
WATCH_SCRIPT = """
window.__violations = [];
document.addEventListener('securitypolicyviolation',
                          (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
window.alert = window.confirm = window.prompt = () => { window.__pwned = 'dialog'; };
"""
