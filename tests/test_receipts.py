"""Signed reward receipts: every result carries one; trainer_client refuses what a proxy changed.

A real HTTP proxy on loopback sits between the trainer client and a real server and
rewrites answers the way a compromised hop would: a reward, the reward and the signed
payload, the receipt removed, two responses' results swapped, the rewards list, the
advantages, a receipt re-signed with another key. The client with the service's key
refuses each with ReceiptError; without the key it would have trained on the change
(checked once, so the proxy is known to work); through an honest proxy it accepts.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from service.testing.app import AppServer, app_settings
from tests.conftest import REPO
from trainer_client import ReceiptError, RewardClient
from trainer_client.receipts import ReceiptKey, canonical_json, check_result, response_hash
from verifiers.tool_state.examples import transfer_task

MATH = {"verifier": "math", "task": {"answer": "2"}}
GROUP = {**MATH, "responses": [r"\boxed{2}", r"\boxed{3}", r"\boxed{5}"]}
Rewrite = Callable[[str, dict[str, Any]], dict[str, Any]]


class RewritingProxy:
    """A loopback HTTP proxy that forwards to the service and passes JSON answers through `rewrite`."""

    def __init__(self, upstream: httpx.Client) -> None:
        self.rewrite: Rewrite = lambda _path, body: body
        self.rewritten = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                answer = upstream.post(self.path, content=body, headers=headers, timeout=120)
                data = answer.content
                if answer.status_code == 200:
                    before = answer.json()
                    after = proxy.rewrite(self.path, json.loads(answer.content))
                    proxy.rewritten += after != before
                    data = json.dumps(after).encode()
                self.send_response(answer.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    with AppServer(app_settings(tmp_path_factory.mktemp("receipts"))) as srv:
        yield srv


@pytest.fixture(scope="module")
def public_key(server: AppServer) -> str:
    with server.anonymous() as http:
        return http.get("/v1/receipts/key").json()["public_key"]


@pytest.fixture
def proxy(server: AppServer) -> Iterator[RewritingProxy]:
    with server.anonymous() as upstream:
        p = RewritingProxy(upstream)
        yield p
        p.close()


def _each_group(body: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    for group in body.get("groups", []):
        change(group)
    return body


def raise_wrong_reward(group: dict[str, Any]) -> None:
    """Give the wrong answers full reward, results and rewards list alike."""
    for i, result in enumerate(group["results"]):
        if result["reward"] == 0.0:
            result["reward"] = group["rewards"][i] = 1.0
            result["verdict"] = "correct"


def also_in_payload(group: dict[str, Any]) -> None:
    raise_wrong_reward(group)
    for result in group["results"]:
        result["receipt"]["payload"].update(reward=result["reward"], verdict=result["verdict"])


def strip_receipt(group: dict[str, Any]) -> None:
    group["results"][1].pop("receipt")


def swap_results(group: dict[str, Any]) -> None:
    """Move the right answer's result (and reward) onto a wrong response: every receipt is genuine."""
    results, rewards = group["results"], group["rewards"]
    results[0], results[1] = results[1], results[0]
    rewards[0], rewards[1] = rewards[1], rewards[0]


def rewards_list_only(group: dict[str, Any]) -> None:
    group["rewards"] = [1.0 for _ in group["rewards"]]


def advantages_only(group: dict[str, Any]) -> None:
    group["advantages"] = [1.0 for _ in group["advantages"]]


def resign_with_own_key(claim_real_id: bool) -> Callable[[dict[str, Any]], None]:
    attacker = Ed25519PrivateKey.generate()

    def change(group: dict[str, Any]) -> None:
        raise_wrong_reward(group)
        for result in group["results"]:
            receipt = result["receipt"]
            receipt["payload"].update(reward=result["reward"], verdict=result["verdict"])
            receipt["signature"] = base64.b64encode(attacker.sign(canonical_json(receipt["payload"]))).decode()
            if not claim_real_id:
                receipt["key_id"] = "attacker"
    return change


REWRITES = {
    "reward": (raise_wrong_reward, "reward 1.0 differs from the signed 0.0"),
    "reward and signed payload": (also_in_payload, "signature does not match"),
    "receipt removed": (strip_receipt, "carries no receipt"),
    "results swapped": (swap_results, "another response"),
    "rewards list": (rewards_list_only, "differ from the signed rewards"),
    "advantages": (advantages_only, "do not follow from the signed rewards"),
    "re-signed, own key id": (resign_with_own_key(False), "signed by key 'attacker'"),
    "re-signed, real key id": (resign_with_own_key(True), "signature does not match"),
}


@pytest.mark.parametrize("name", list(REWRITES))
def test_changed_reward_is_refused_then_honest_answer_accepted(server: AppServer, public_key: str,
                                                                proxy: RewritingProxy, name: str):
    change, message = REWRITES[name]
    proxy.rewrite = lambda _path, body: _each_group(body, change)
    with RewardClient(proxy.url, server.admin_key, receipt_key=public_key) as client, \
            pytest.raises(ReceiptError, match=message):
        client.score_groups([GROUP])
    assert proxy.rewritten >= 1
    proxy.rewrite = lambda _path, body: body
    with RewardClient(proxy.url, server.admin_key, receipt_key=public_key) as client:
        assert client.score_groups([GROUP])[0].rewards == [1.0, 0.0, 0.0]


def test_without_the_key_the_change_goes_through(server: AppServer, proxy: RewritingProxy):
    """What the receipts guard against: the same proxy, a client that does not check."""
    proxy.rewrite = lambda _path, body: _each_group(body, raise_wrong_reward)
    with RewardClient(proxy.url, server.admin_key, receipt_key="") as client:
        assert client.score_groups([GROUP])[0].rewards == [1.0, 1.0, 1.0]


def test_verify_endpoint_reward_changed_is_refused(server: AppServer, public_key: str, proxy: RewritingProxy):
    def change(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == "/v1/verify":
            body["reward"] = 1.0
        return body

    proxy.rewrite = change
    with RewardClient(proxy.url, server.admin_key, receipt_key=public_key) as client:
        with pytest.raises(ReceiptError, match="reward 1.0 differs"):
            client.verify("math", r"\boxed{3}", task={"answer": "2"})
        proxy.rewrite = lambda _path, body: body
        assert client.verify("math", r"\boxed{3}", task={"answer": "2"}).reward == 0.0


def test_adapters_check_when_the_key_is_configured(server: AppServer, public_key: str, proxy: RewritingProxy,
                                                   monkeypatch: pytest.MonkeyPatch):
    """ASSAY_RECEIPT_KEY turns checking on for every client the adapters build (verl reads the env)."""
    from trainer_client.adapters.verl import VerlScorer

    monkeypatch.setenv("ASSAY_RECEIPT_KEY", public_key)
    proxy.rewrite = lambda _path, body: _each_group(body, raise_wrong_reward)
    scorer = VerlScorer(RewardClient(proxy.url, server.admin_key))
    with pytest.raises(ReceiptError):
        scorer.compute_score("math", r"\boxed{3}", "2")
    proxy.rewrite = lambda _path, body: body
    assert scorer.compute_score("math", r"\boxed{3}", "2")["score"] == 0.0
    assert scorer.compute_score("math", r"\boxed{2}", "2")["score"] == 1.0


def test_every_result_kind_carries_a_valid_receipt(server: AppServer, public_key: str):
    key = ReceiptKey.parse(public_key)
    with server.client() as c:
        # /v1/verify, and its replay by request_id: the same receipt (Ed25519 is deterministic).
        body = {**MATH, "response": r"\boxed{2}", "request_id": os.urandom(8).hex()}
        first, again = c.post("/v1/verify", json=body).json(), c.post("/v1/verify", json=body).json()
        assert check_result(first, key, r"\boxed{2}")["reward"] == 1.0
        assert again["receipt"] == first["receipt"]
        record = c.get(f"/v1/records/{first['record_id']}").json()
        assert first["receipt"]["payload"]["time"].startswith(record["created_at"][:19])
        assert first["receipt"]["payload"]["response_hash"] == record["response_hash"] == response_hash(r"\boxed{2}")
        # /v1/groups, and its idempotent replay.
        headers = {"Idempotency-Key": os.urandom(8).hex()}
        one = c.post("/v1/groups", json={"groups": [GROUP]}, headers=headers).json()
        two = c.post("/v1/groups", json={"groups": [GROUP]}, headers=headers).json()
        assert one == two
        for result, text in zip(one["groups"][0]["results"], GROUP["responses"], strict=True):
            check_result(result, key, text)
        # /v1/openrlhf: one receipt per sample.
        o = c.post("/v1/openrlhf", json={"query": ["Q: \\boxed{2}", "Q: \\boxed{4}"], "prompts": ["Q: ", "Q: "],
                                         "labels": ["2", "2"]}).json()
        assert [key.verify(r)["reward"] for r in o["receipts"]] == o["rewards"] == [1.0, 0.0]
        # /v1/evals: every record of the run.
        e = c.post("/v1/evals", json={"name": "n", "checkpoint": "c", "families": {"f": [GROUP]}}).json()
        assert sorted(key.verify(r)["reward"] for r in e["receipts"]) == [0.0, 0.0, 1.0]
    with RewardClient(server.url, server.admin_key, receipt_key=public_key, transport=server.transport) as client:
        report = client.evaluate("n2", "c", {"f": [GROUP]})
        assert report["overall"]["n_responses"] == 3


def test_env_finish_carries_a_receipt(server: AppServer, public_key: str):
    key = ReceiptKey.parse(public_key)
    with server.client() as c:
        opened = c.post("/v1/envs", json={"task": transfer_task()})
        assert opened.status_code == 201, opened.text
        env_id = opened.json()["env_id"]
        done = c.post(f"/v1/envs/{env_id}/finish", json={"final_message": "done"})
        assert done.status_code == 200, done.text
        again = c.post(f"/v1/envs/{env_id}/finish", json={"final_message": "done"})
    assert check_result(done.json(), key)["record_id"] == done.json()["record_id"]
    assert again.json()["receipt"] == done.json()["receipt"]


@pytest.mark.slow
def test_key_is_private_and_the_cli_prints_the_public_half(server: AppServer, tmp_path: Path):
    key_file = server.workdir / "audit.signing-key.pem"
    assert key_file.stat().st_mode & 0o777 == 0o600
    out = subprocess.run([sys.executable, "-m", "service.cli", "receipts", "key"], env=server.env(), cwd=REPO,
                         capture_output=True, text=True, check=True)
    with server.anonymous() as http:
        assert json.loads(out.stdout) == http.get("/v1/receipts/key").json()
    # A key file others may read is refused at start.
    loose = tmp_path / "loose.pem"
    loose.write_bytes(key_file.read_bytes())
    loose.chmod(0o644)
    with pytest.raises(RuntimeError, match="may be read by others"):
        AppServer(app_settings(tmp_path, signing_key_path=loose)).start()
