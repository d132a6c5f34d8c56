"""ASSAY_EXECUTOR=ray end to end, on one machine: a Ray head with no CPUs and two sandbox
nodes (1 CPU, `assay_sandbox` each), API replicas in front of them, all in a private
network namespace with only loopback; the audit store is the shared Postgres server,
reached through its Unix socket.

(a) the hostile cases of every verifier get the same verdicts on `ray` as on `local`;
(c) two replicas on one database serve alternating requests, idempotency keys,
    request ids and environment sessions across each other;
(b) a sandbox node killed mid-run by pid: every response still gets its result, no
    record twice, no `error` (last, as it takes a node away).
"""

from __future__ import annotations

import concurrent.futures
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import tests.test_tool_state_traps as tool_state_traps
from service.testing.ray_cluster import PrivateNet, RayCluster, UdsServer
from tests.test_code_exploits import ASSERT_EXPLOITS, ASSERT_TASK, HONEST_ASSERT, HONEST_IO, IO_EXPLOITS, IO_TASK
from tests.test_service_http import HOSTILE as HOSTILE_MATH
from tests.test_sql_traps import ATTACKS as SQL_ATTACKS
from tests.test_sql_traps import HONEST as SQL_HONEST
from tests.test_sql_traps import INSTANCES as SQL_INSTANCES
from tests.test_sql_traps import SCHEMA as SQL_SCHEMA
from tests.test_tool_state_traps import call
from verifiers.tool_state.examples import GOLD_TRANSFER, honest_response, transfer_task
from verifiers.tool_state.wire import dumps_trace

# Setting up a cluster and three servers takes well over a minute on a loaded 2-core machine.
pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(1200)]

MAX_RESPONSE_CHARS = 100_000
# Sleep-bound sandboxed work: each response waits in its sandbox, using no CPU.
SLEEP_S = 1.0
SLEEP_TASK = {"time_limit_s": 10, "io_cases": [{"stdin": "", "stdout": "ok\n"}]}
SLEEPER = f"```python\nimport time\ntime.sleep({SLEEP_S})\nprint('ok')\n```"


def fenced(language: str, code: str) -> str:
    return f"```{language}\n{code}\n```"


def parametrized(test: Any, name: str) -> list[Any]:
    """The values a test of another module is parametrized with: its inputs, not a copy."""
    for mark in getattr(test, "pytestmark", []):
        if mark.name == "parametrize" and mark.args[0] == name:
            return list(mark.args[1])
    raise LookupError(f"{test.__name__} has no parametrize over {name!r}")


def hostile_groups() -> dict[str, dict[str, Any]]:
    """The hostile cases of every verifier, each group ending with an honest response.
    `allowed` lists, per response, the verdicts its own test accepts where it accepts more
    than one (a fork bomb may hit the process limit or the clock first)."""
    tool_task = transfer_task()
    malformed = parametrized(tool_state_traps.test_malformed_json, "response")
    # Longer than the HTTP limit: refused with a 422 before any executor sees it.
    tool_traps = [r for r in malformed if len(r) <= MAX_RESPONSE_CHARS]
    tool_traps += [dumps_trace([call(tool, account_id="A2"), GOLD_TRANSFER], "Done, your balance is 450.")
                   for tool in parametrized(tool_state_traps.test_tool_that_does_not_exist, "tool")]
    tool_traps += [dumps_trace([GOLD_TRANSFER], message)
                   for message in parametrized(tool_state_traps.test_spraying_values_in_the_final_message, "message")]
    sql_task = {"dialect": "sqlite", "schema": SQL_SCHEMA, "instances": SQL_INSTANCES, "gold": SQL_HONEST}
    return {
        "math": {"verifier": "math", "task": {"answer": "1"}, "responses": [*HOSTILE_MATH, r"\boxed{1}"]},
        "code_assert": {"verifier": "code", "task": ASSERT_TASK,
                        "responses": [fenced("python", c) for c, _ in ASSERT_EXPLOITS.values()]
                        + [fenced("python", HONEST_ASSERT)],
                        "allowed": [{v.value for v in vs} for _, vs in ASSERT_EXPLOITS.values()] + [{"correct"}]},
        "code_io": {"verifier": "code", "task": IO_TASK,
                    "responses": [fenced("python", c) for c, _ in IO_EXPLOITS.values()]
                    + [fenced("python", HONEST_IO)],
                    "allowed": [{v.value for v in vs} for _, vs in IO_EXPLOITS.values()] + [{"correct"}]},
        "sql": {"verifier": "sql", "task": sql_task,
                "responses": [fenced("sql", a) for a in SQL_ATTACKS.values()] + [SQL_HONEST]},
        "tool_state": {"verifier": "tool_state", "task": tool_task, "responses": [*tool_traps, honest_response()]},
    }


# ------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def net() -> Iterator[PrivateNet]:
    if shutil.which("unshare") is None or shutil.which("nsenter") is None or shutil.which("ip") is None:
        pytest.fail("the Ray tests need unshare, nsenter and ip (scripts/install.sh test installs them)")
    space = PrivateNet()
    yield space
    space.close()


@pytest.fixture(scope="module")
def cluster(net: PrivateNet) -> Iterator[RayCluster]:
    ray_cluster = RayCluster(net, nodes=2, sandbox_slots=1, node_cpus=1)
    yield ray_cluster
    ray_cluster.close()


@pytest.fixture(scope="module")
def database() -> Iterator[tuple[str, str]]:
    """A fresh Postgres database: (URL from here, URL through the server's Unix socket)."""
    import os

    admin_url = os.environ.get("ASSAY_TEST_POSTGRES_URL")
    if not admin_url:
        pytest.fail("ASSAY_TEST_POSTGRES_URL is not set (scripts/test.sh sets it)")
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"assay_ray_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
        socket_dir = conn.exec_driver_sql("SHOW unix_socket_directories").scalar_one().split(",")[0].strip()
        port = conn.exec_driver_sql("SHOW port").scalar_one()
    here = sa.engine.make_url(admin_url).set(database=name)
    there = here.set(host=None, port=None, query={"host": socket_dir, "port": str(port)})
    yield here.render_as_string(hide_password=False), there.render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.dispose()


@pytest.fixture(scope="module")
def servers(net: PrivateNet, cluster: RayCluster, database: tuple[str, str],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two `ray` replicas and one `local` server, all on the same database."""
    _, url = database
    workdir = tmp_path_factory.mktemp("ray-api")
    base = {"ASSAY_DATABASE_URL": url, "HOME": cluster.env["HOME"], "RAY_USAGE_STATS_ENABLED": "0",
            "ASSAY_MAX_RESPONSE_CHARS": str(MAX_RESPONSE_CHARS)}
    ray_env = {**base, "ASSAY_EXECUTOR": "ray", "ASSAY_RAY_ADDRESS": cluster.address}
    started: list[UdsServer] = []
    try:
        for env in (ray_env, ray_env, {**base, "ASSAY_EXECUTOR": "local"}):
            started.append(UdsServer(net, workdir, env))
        key = started[0].create_key("reward,audit,admin")
        yield {"a": started[0], "b": started[1], "local": started[2], "key": key}
    finally:
        for server in started:
            server.stop()


def post_groups(server: UdsServer, key: str, groups: list[dict[str, Any]], **headers: str) -> dict[str, Any]:
    with server.client(key) as c:
        r = c.post("/v1/groups", json={"groups": groups}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


# ------------------------------------------------------------------------ (a)


@pytest.mark.parametrize("family", sorted(hostile_groups()))
def test_hostile_cases_get_the_same_verdicts_on_ray_as_on_local(servers: dict[str, Any], family: str) -> None:
    case = hostile_groups()[family]
    allowed = case.pop("allowed", None) or [set() for _ in case["responses"]]
    group = case
    key = servers["key"]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        on_ray, on_local = pool.map(lambda s: post_groups(s, key, [group])["groups"][0],
                                    (servers["a"], servers["local"]))
    ray_verdicts = [r["verdict"] for r in on_ray["results"]]
    local_verdicts = [r["verdict"] for r in on_local["results"]]
    differ = [(response[:80], on_ray_v, on_local_v)
              for response, on_ray_v, on_local_v, either in zip(group["responses"], ray_verdicts, local_verdicts,
                                                               allowed, strict=True)
              if on_ray_v != on_local_v and not (len(either) > 1 and {on_ray_v, on_local_v} <= either)]
    assert not differ, differ
    assert on_ray["rewards"] == on_local["rewards"]
    # Every hostile case gets nothing, the honest answer after them gets its reward,
    # and no hostile case was an infrastructure failure on either executor.
    assert on_ray["rewards"][:-1] == [0.0] * (len(group["responses"]) - 1)
    assert on_ray["rewards"][-1] == 1.0 and ray_verdicts[-1] == "correct"
    assert "error" not in ray_verdicts
    with servers["a"].client(key) as c:
        record = c.get(f"/v1/records/{on_ray['results'][0]['record_id']}").json()
    assert record["sandbox_backend"] == "ray/process"


# ------------------------------------------------------------------------ (c)


def test_two_replicas_share_idempotency_request_ids_and_records(servers: dict[str, Any]) -> None:
    a, b, key = servers["a"], servers["b"], servers["key"]
    group = {"verifier": "math", "task": {"answer": "2"}, "responses": [r"\boxed{2}", r"\boxed{3}", "no idea"]}
    for turn in range(4):
        first, second = (a, b) if turn % 2 == 0 else (b, a)
        idem = f"idem-{uuid.uuid4().hex}"
        answered = post_groups(first, key, [group], **{"Idempotency-Key": idem})
        again = post_groups(second, key, [group], **{"Idempotency-Key": idem})
        assert again == answered  # the stored response, same record ids: nothing verified twice
        assert answered["groups"][0]["rewards"] == [1.0, 0.0, 0.0]
        with second.client(key) as c:
            records = c.get("/v1/records", params={"group_id": answered["groups"][0]["group_id"]}).json()
        assert len(records["records"]) == 3
    # The same key sent to both replicas at once: one verification is stored, both answer it.
    idem = f"idem-{uuid.uuid4().hex}"
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        both = list(pool.map(lambda s: post_groups(s, key, [group], **{"Idempotency-Key": idem}), (a, b)))
    assert both[0] == both[1]
    # A request_id repeated on the other replica returns the logged result.
    body = {"verifier": "math", "task": {"answer": "2"}, "response": r"\boxed{2}", "request_id": uuid.uuid4().hex}
    with a.client(key) as ca, b.client(key) as cb:
        one, two = ca.post("/v1/verify", json=body).json(), cb.post("/v1/verify", json=body).json()
        assert one["record_id"] == two["record_id"] and one["verdict"] == "correct"
        assert cb.post("/v1/groups", json={"groups": [group]}, headers={"Idempotency-Key": idem}).json() == both[0]
        other = cb.post("/v1/groups", json={"groups": [{**group, "responses": ["2"]}]},
                        headers={"Idempotency-Key": idem})
        assert other.status_code == 422 and "Idempotency-Key" in other.json()["detail"]


def test_an_environment_session_moves_between_replicas(servers: dict[str, Any]) -> None:
    a, b, key = servers["a"], servers["b"], servers["key"]
    task = transfer_task()
    with a.client(key) as ca, b.client(key) as cb:
        opened = ca.post("/v1/envs", json={"task": task})
        assert opened.status_code == 201, opened.text
        env_id = opened.json()["env_id"]
        first = cb.post(f"/v1/envs/{env_id}/step", json={"tool": "list_accounts"})
        assert first.status_code == 200 and first.json()["step"] == 0
        second = ca.post(f"/v1/envs/{env_id}/step", json=GOLD_TRANSFER)
        assert second.status_code == 200 and second.json()["ok"] is True and second.json()["step"] == 1
        # The transfer made on replica a is seen from replica b: the state is in the database.
        balance = cb.post(f"/v1/envs/{env_id}/step", json={"tool": "get_balance", "args": {"account_id": "A1"}})
        assert balance.json()["result"]["balance"] == 450
        finished = cb.post(f"/v1/envs/{env_id}/finish", json={"final_message": "Done, your balance is 450."})
        assert finished.status_code == 200 and finished.json()["verdict"] == "correct", finished.text
        retried = ca.post(f"/v1/envs/{env_id}/finish", json={"final_message": "Done, your balance is 450."})
        assert retried.json() == finished.json()  # same answer from the other replica, no second record
        assert cb.post(f"/v1/envs/{env_id}/step", json={"tool": "list_accounts"}).status_code == 409


def test_concurrent_steps_on_two_replicas_all_land_in_order(servers: dict[str, Any]) -> None:
    a, b, key = servers["a"], servers["b"], servers["key"]
    with a.client(key) as ca:
        env_id = ca.post("/v1/envs", json={"task": transfer_task()}).json()["env_id"]

    def step(server: UdsServer) -> int:
        with server.client(key) as c:
            r = c.post(f"/v1/envs/{env_id}/step", json={"tool": "list_accounts"})
            assert r.status_code == 200, r.text
            return r.json()["step"]

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        steps = list(pool.map(step, [a, b] * 3))
    assert sorted(steps) == list(range(6))


# ------------------------------------------------------------------------ (b)


def test_a_node_killed_mid_run_loses_no_response_and_logs_none_twice(
        servers: dict[str, Any], cluster: RayCluster, database: tuple[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    a, key = servers["a"], servers["key"]
    count = 8  # on two 1-slot nodes: about four rounds of SLEEP_S
    group = {"verifier": "code", "task": SLEEP_TASK, "responses": [SLEEPER] * count}
    post_groups(a, key, [{**group, "responses": [SLEEPER] * 2}])  # both nodes warm
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        pending = pool.submit(post_groups, a, key, [group])
        time.sleep(1.5 * SLEEP_S)  # both nodes are running a response
        assert not pending.done()
        killed_at = time.monotonic()
        killed = cluster.kill_node(1)
        answer = pending.result(timeout=180)
    done_at = time.monotonic()
    result = answer["groups"][0]
    verdicts = [r["verdict"] for r in result["results"]]
    assert verdicts == ["correct"] * count, [r["evidence"] for r in result["results"]]
    # The surviving node alone would need count * SLEEP_S for everything; what the kill cost:
    recovery = done_at - killed_at
    with capsys.disabled():
        print(f"\nray node kill: {len(killed)} processes killed; group of {count} done {done_at - started:.1f}s "
              f"after submission, {recovery:.1f}s after the kill")
    here, _ = database
    engine = sa.create_engine(here)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT submission_id, submission_index, group_index FROM records "
                                    "WHERE group_id = :g"), {"g": result["group_id"]}).all()
        duplicates = conn.execute(sa.text("SELECT count(*) FROM (SELECT submission_id, submission_index FROM records "
                                          "GROUP BY 1, 2 HAVING count(*) > 1) d")).scalar_one()
    engine.dispose()
    assert sorted(r.group_index for r in rows) == list(range(count))
    assert len({(r.submission_id, r.submission_index) for r in rows}) == count and duplicates == 0
    assert recovery < 90
    # The cluster works on with one node; a node that joins again takes work.
    cluster.wait_for({"assay_sandbox": 1})
    cluster.add_node()
    assert [r["verdict"] for r in post_groups(a, key, [{**group, "responses": [SLEEPER] * 2}])["groups"][0]
            ["results"]] == ["correct", "correct"]


def test_the_replica_process_runs_no_sandbox(servers: dict[str, Any]) -> None:
    with servers["a"].client(servers["key"]) as c:
        ready = c.get("/readyz").json()
    assert ready["sandbox"]["executor"] == "ray" and ready["sandbox"]["assay_sandbox"] >= 1
    # Nothing sandboxed runs below the replica: its children are Ray's own, none is bwrap.
    from service.testing.ray_cluster import descendants

    below = descendants(servers["a"].proc.pid)[1:]
    names = [Path(f"/proc/{pid}/comm").read_text().strip() for pid in below if Path(f"/proc/{pid}/comm").exists()]
    assert "bwrap" not in names, names


def test_a_node_whose_sandbox_cannot_start_is_a_503_as_on_local(
        net: PrivateNet, cluster: RayCluster, database: tuple[str, str], servers: dict[str, Any],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The saturation rule is the same on every executor: a node that has no sandbox for the
    call (here `remote` without a runner to reach) answers so, and the replica says 503 +
    Retry-After, as a local executor does, instead of logging verdict `error`."""
    _, url = database
    env = {"ASSAY_DATABASE_URL": url, "HOME": cluster.env["HOME"], "RAY_USAGE_STATS_ENABLED": "0",
           "ASSAY_EXECUTOR": "ray", "ASSAY_RAY_ADDRESS": cluster.address, "ASSAY_SANDBOX": "remote",
           "ASSAY_RETRY_AFTER_S": "9"}
    broken = UdsServer(net, tmp_path_factory.mktemp("ray-no-sandbox"), env)
    request_id = f"no-sandbox-{uuid.uuid4().hex}"
    try:
        with broken.client(servers["key"]) as c:
            reply = c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "2"}, "response": r"\boxed{2}",
                                               "request_id": request_id})
        assert reply.status_code == 503, reply.text
        assert reply.headers["Retry-After"] == "9"
        assert "ASSAY_SANDBOXD_URL" in reply.json()["detail"]
    finally:
        broken.stop()
    here, _ = database
    engine = sa.create_engine(here)
    with engine.connect() as conn:
        logged = conn.execute(sa.text("SELECT count(*) FROM records WHERE request_id = :r"),
                              {"r": request_id}).scalar_one()
    engine.dispose()
    assert logged == 0  # nothing was logged: retrying loses nothing
    # The same request on a replica whose nodes have their sandbox gets its reward.
    with servers["a"].client(servers["key"]) as c:
        honest = c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "2"}, "response": r"\boxed{2}",
                                            "request_id": request_id})
    assert honest.status_code == 200 and honest.json()["reward"] == 1.0
