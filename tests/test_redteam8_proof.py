"""Red team 8, Metamath proofs: what a response may smuggle into a proof block to prove a
theorem without proving it (an include, its own `$a` axiom or `$e` hypothesis inside a block,
in a comment or after the proof, a `$c`, the theorem cited by itself, a later theorem, unknown
steps, a database whose text adds an axiom after the theorem), through the public HTTP API.
None gets a reward or an `error`; the honest proof in the same group does. Blind: written
before reading the proof verifier."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from service.testing.app import AppServer, app_settings

pytestmark = pytest.mark.slow

DEMO0 = (Path(__file__).parent / "data" / "demo0.mm").read_text()
HONEST_SYL = "```metamath\nwph wps wch syl.1 wps wch wi wph syl.2 a1i mpd\n```"
SYL_ATTACKS = [
    "```metamath\n$[ /etc/passwd $]\nwph wch syl\n```",
    "```metamath\n$[ set.mm $]\n```",
    "```metamath\n${ h $e |- ( ph -> ch ) $. $}\nh\n```",
    "```metamath\nsyl.3 $e |- ( ph -> ch ) $.\nsyl.3\n```",
    "```metamath\nwph wps wch syl.1 syl.2 syl\n```",
    "```metamath\n( syl ) ABCDEF\n```",
    "```metamath\nx $p |- ( ph -> ch ) $= ? $.\nwph wch x\n```",
    "```metamath\n$c cheat $.\nax-ch $a |- ( ph -> ch ) $.\nax-ch\n```",
    "```metamath\n$( $) ax-ch $a |- ( ph -> ch ) $. $( $)\nax-ch\n```",
    "```metamath\nwph wps wch syl.1 wps wch wi wph syl.2 a1i mpd $. ax-x $a |- ph $.\n```",
    "```metamath\nsyl $p |- ( ph -> ch ) $= ( sylcom ) ? $.\n```",
    "```metamath\n( wi a1i mpd ) ABCDBCFAEGH $. ax-y $a |- ch $. $= ax-y\n```",
    HONEST_SYL + "\nand also ```metamath\nax-z $a |- ph $.\n```",
    "```metamath\nsyl.1 syl.2 syl\n```",
    "```metamath\nwph wch wi ax-mp\n```",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    with AppServer(app_settings(tmp_path_factory.mktemp("redteam8-proof"))) as s:
        s.reward_key = s.create_key("reward")  # type: ignore[attr-defined]
        yield s


def _group(server: AppServer, task: dict, responses: list[str]) -> list[dict]:
    with server.client(server.reward_key, timeout=600) as c:  # type: ignore[attr-defined]
        reply = c.post("/v1/groups", json={"groups": [{"verifier": "proof", "task": task, "responses": responses}]})
    assert reply.status_code == 200, reply.text[:2000]
    return reply.json()["groups"][0]["results"]


def test_smuggled_axioms_hypotheses_and_includes_prove_nothing(server):
    results = _group(server, {"theorem": "syl"}, [*SYL_ATTACKS, HONEST_SYL])
    for attack, result in zip(SYL_ATTACKS, results, strict=False):
        assert result["reward"] == 0.0 and result["verdict"] not in ("correct", "error"), (attack, result)
    assert results[-1]["reward"] == 1.0, results[-1]


def test_an_axiom_after_the_theorem_in_the_task_database_proves_nothing(server):
    """The database text (the task's, not the response's) with an axiom added after `th1`."""
    task = {"database": "demo0", "database_text": DEMO0 + "\nax-cheat $a |- t = t $.\n", "theorem": "th1"}
    honest = ("```metamath\ntt tze tpl tt weq tt tt weq tt a2 tt tze tpl tt weq tt tze tpl tt weq tt tt "
              "weq wim tt a2 tt tze tpl tt tt a1 mp mp\n```")
    results = _group(server, task, ["```metamath\nax-cheat\n```", honest])
    assert results[0]["reward"] == 0.0 and results[0]["verdict"] not in ("correct", "error"), results[0]
    assert results[1]["reward"] == 1.0, results[1]
