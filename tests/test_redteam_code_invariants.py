"""Red team, fourth round (issue 30): nothing a response does changes another's verdict.

Five kinds of attack, each written here in variants of our own, on every backend named in
ASSAY_TEST_BACKENDS. Every attack is followed by an honest answer that must still be
rewarded *in the same worker or container*: the sandbox here has one worker per pool, and
`workers_started` shows whether a worker was replaced. The invariants these tests prove
are listed in docs/security.md ("Invariants"):

1. a response cannot end the grader's iteration (an exception from the candidate never
   stops `map`, `filter`, a `for` over a custom iterator or an `async for`);
2. a response cannot fail its group (a hostile module is that response's verdict, never
   a 422 for the task or null rewards for its neighbours);
3. a response cannot hold a worker (malformed, deep or oversized frames are the job's
   violation, the worker is returned or replaced, honest answers never get 503);
4. a response cannot outlive its job (no limit, priority, signal, file or IPC object of
   a job reaches the worker or the next job);
5. a response cannot name a flag or a metric label (fixed vocabulary, bounded evidence).

All attack code runs only inside the sandbox.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from sandboxes.factory import create_sandbox
from sandboxes.warm import WorkerTimings
from tests.conftest import BACKENDS, LiveServer
from verifiers.base import Flag, Verdict, VerifyContext
from verifiers.registry import get

LIMITS = {"time_limit_s": 2.0, "memory_mb": 256, "output_bytes": 65536}
PAIRS = [(2, 3), (-1, 1), (10, 20), (7, 8), (100, -4)]
HONEST_ADD = "def add(a, b):\n    return a + b\n"
WRONG_ADD = "def add(a, b):\n    return a - b\n"
HONEST_IO = "a, b = map(int, input().split())\nprint(a + b)\n"
IO_TASK = {**LIMITS, "io_cases": [{"stdin": "2 3\n", "stdout": "5\n"}, {"stdin": "40 2\n", "stdout": "42\n"}]}
# A sandbox of one worker per pool: the honest answer after an attack runs on the worker
# (or in the container) the attack ran on, unless the backend replaced it.
ACQUIRE_TIMEOUT_S = 15.0


def assert_task(tests: str) -> dict:
    return {"entry_point": "add", **LIMITS, "tests": tests}


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", params=BACKENDS)
def box(request):
    sandbox = create_sandbox(request.param, workers=1,
                             image=os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest"),
                             timings=WorkerTimings(acquire_timeout_s=ACQUIRE_TIMEOUT_S),
                             # No replacement by age: a replaced container is the attack's doing.
                             container_max_jobs=100_000)
    yield sandbox
    get("code").close(VerifyContext(sandbox=sandbox))
    sandbox.close()


@pytest.fixture(scope="module")
def judge(box):
    """judge(task, code) -> (outcome, reward) on the one-worker sandbox."""
    verifier, context = get("code"), VerifyContext(sandbox=box)
    verifier.warm(context)  # the pools' one worker each, before `started` is first read

    def run(task: dict, code: str):
        parsed = verifier.parse_task(task)
        outcome = verifier.verify(parsed, f"```python\n{code}\n```", context)
        return outcome, outcome.reward(parsed)

    return run


def started(box) -> dict[str, int]:
    return {pool: box.workers_started(pool) for pool in ("code-candidate", "code-grader")}


def attack_then_honest(judge, box, task: dict, attack: str, honest: str, *, same_worker: bool = True):
    before = started(box)
    outcome, reward = judge(task, attack)
    assert outcome.verdict is not Verdict.error, outcome.evidence
    assert reward == 0.0, (outcome.verdict, outcome.evidence)
    after, after_reward = judge(task, honest)
    assert (after.verdict, after_reward) == (Verdict.correct, 1.0), after.evidence
    if same_worker:
        assert started(box) == before, "the attack got its worker replaced"
    return outcome


# ------------------------------------------- 1. a response cannot end the grader's iteration

ITERATION_TESTS = {
    "all_map_lambda": f"PAIRS = {PAIRS!r}\ndef check(candidate):\n"
                      "    assert all(map(lambda p: candidate(*p) == p[0] + p[1], PAIRS))\n",
    "not_any_starmap": f"import itertools\nPAIRS = {PAIRS!r}\ndef check(candidate):\n"
                       "    assert not any(itertools.starmap(lambda a, b: candidate(a, b) != a + b, PAIRS))\n",
    "filter_finds_no_mistake": f"PAIRS = {PAIRS!r}\ndef check(candidate):\n"
                               "    assert list(filter(lambda p: candidate(*p) != sum(p), PAIRS)) == []\n",
    "custom_iterator": f"PAIRS = {PAIRS!r}\n"
                       "def check(candidate):\n"
                       "    class Results:\n"
                       "        def __init__(self):\n            self.i = 0\n"
                       "        def __iter__(self):\n            return self\n"
                       "        def __next__(self):\n"
                       "            if self.i == len(PAIRS):\n                raise StopIteration\n"
                       "            a, b = PAIRS[self.i]\n            self.i += 1\n"
                       "            return candidate(a, b), a + b\n"
                       "    seen = 0\n"
                       "    for got, want in Results():\n        assert got == want\n        seen += 1\n",
    "async_for": f"import asyncio\nPAIRS = {PAIRS!r}\n"
                 "def check(candidate):\n"
                 "    class Feed:\n"
                 "        def __init__(self):\n            self.i = 0\n"
                 "        def __aiter__(self):\n            return self\n"
                 "        async def __anext__(self):\n"
                 "            if self.i == len(PAIRS):\n                raise StopAsyncIteration\n"
                 "            a, b = PAIRS[self.i]\n            self.i += 1\n"
                 "            return candidate(a, b) == a + b\n"
                 "    async def main():\n"
                 "        async for ok in Feed():\n            assert ok\n"
                 "    asyncio.run(main())\n",
    "dict_from_map": f"PAIRS = {PAIRS!r}\ndef check(candidate):\n"
                     "    got = dict(map(lambda p: (p, candidate(*p)), PAIRS))\n"
                     "    assert all(got[p] == sum(p) for p in got)\n",
}
ITERATION_ENDERS = {
    "stop_iteration": "def add(a, b):\n    raise StopIteration\n",
    "stop_iteration_subclass": ("class Exhausted(StopIteration):\n    pass\n"
                                "def add(a, b):\n    raise Exhausted('done')\n"),
    "stop_async_iteration": "def add(a, b):\n    raise StopAsyncIteration\n",
    "stop_iteration_with_value": "def add(a, b):\n    raise StopIteration(a + b)\n",
    # Right on the first calls, then ends the iteration: an early stop must not pass either.
    "stop_after_the_easy_ones": "def add(a, b):\n    if abs(a) > 5:\n        raise StopIteration\n    return a + b\n",
    "generator_exit": "def add(a, b):\n    raise GeneratorExit\n",
    "keyboard_interrupt_subclass": "class Quit(KeyboardInterrupt):\n    pass\ndef add(a, b):\n    raise Quit()\n",
    "system_exit_zero": "def add(a, b):\n    raise SystemExit(0)\n",
    # The candidate lies about its exception's ancestors (it owns its side of the channel).
    "forged_exception_bases": (
        "import verifiers.code.inside.candidate as c\n"
        "c._describe = lambda exc: {'type': 'StopIteration', 'bases': ['StopIteration', 'StopAsyncIteration'],\n"
        "                           'message': '', 'exit': False}\n"
        "def add(a, b):\n    raise ValueError\n"),
}


@pytest.mark.parametrize("style", sorted(ITERATION_TESTS))
@pytest.mark.parametrize("attack", sorted(ITERATION_ENDERS))
def test_a_candidate_exception_never_ends_the_graders_iteration(judge, box, style, attack):
    task = assert_task(ITERATION_TESTS[style])
    attack_then_honest(judge, box, task, ITERATION_ENDERS[attack], HONEST_ADD)


def test_a_test_may_still_expect_an_ordinary_exception(judge):
    task = assert_task("def check(candidate):\n    try:\n        candidate(1, None)\n    except TypeError:\n"
                       "        pass\n    else:\n        raise AssertionError('no TypeError')\n"
                       "    assert candidate(2, 3) == 5\n")
    outcome, reward = judge(task, HONEST_ADD)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence


# ------------------------------------------------------ 2. a response cannot fail its group

HOSTILE_MODULES = {
    "module_named_by_a_list": "import types\nm = types.ModuleType('m')\nm.__name__ = ['math']\n",
    "module_named_by_a_dict": "import types\nm = types.ModuleType('m')\nm.__name__ = {'$dict': []}\n",
    "module_named_by_a_number": "import types\nm = types.ModuleType('m')\nm.__name__ = 7\n",
    "module_named_subprocess": "import types\nm = types.ModuleType('m')\nm.__name__ = 'subprocess'\n",
    "module_without_a_name_whose_getattr_raises": (
        "import types\nm = types.ModuleType('m')\ndel m.__name__\n"
        "def _boom(name):\n    raise SystemExit(name)\nm.__getattr__ = _boom\n"),
    "metaclass_module_attribute_raises": (
        "class Meta(type):\n    @property\n    def __module__(cls):\n        raise KeyboardInterrupt\n"
        "class Thing(metaclass=Meta):\n    pass\nthing = Thing()\n"),
    "metaclass_module_lies_numpy": (
        "class Meta(type):\n    __module__ = property(lambda cls: 'numpy')\n"
        "class Fake(metaclass=Meta):\n    def item(self):\n        return Fake()\nfake = Fake()\n"),
    "class_attribute_lies": (
        "import types\nclass Liar:\n    __class__ = property(lambda self: types.ModuleType)\n"
        "    __name__ = property(lambda self: 1 / 0)\nliar = Liar()\n"),
    "hostile_eq_hash_repr": (
        "class Bad:\n    def __eq__(self, other):\n        raise RuntimeError\n"
        "    def __hash__(self):\n        raise StopIteration\n    def __repr__(self):\n        raise GeneratorExit\n"
        "bad = Bad()\nbads = [Bad()]\n"),
    "non_string_global_names": "globals()[42] = 1\nglobals()[('x',)] = 2\nglobals()[b'y'] = 3\n",
    "hostile_string_global_names": "globals()['a\\nb'] = 1\nglobals()['c\\x00d'] = 2\nglobals()['x' * 5000] = 3\n",
    "many_globals": "for _i in range(5000):\n    globals()[f'v{_i}'] = _i\n",
    "deep_exported_value": "deep = []\nfor _ in range(190):\n    deep = [deep]\n",
    "dict_exported_with_tag_keys": "trap = {'$tuple': [1], '$int': 'zz', '$float': 'x'}\n",
    "exception_type_with_hostile_name": (
        "class Meta(type):\n    __name__ = property(lambda cls: ['StopIteration'])\n"
        "class E(Exception, metaclass=Meta):\n    pass\n"
        "def add(a, b):\n    raise E()\n"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_MODULES))
def test_a_hostile_module_is_its_own_verdict(judge, box, name):
    code = HOSTILE_MODULES[name]
    task = assert_task("def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n")
    wrong = code if "def add" in code else code + WRONG_ADD
    attack_then_honest(judge, box, task, wrong, HONEST_ADD)
    # The same hostile module with a right `add` is judged on its `add`: never the task's fault.
    if "def add" not in code:
        outcome, _ = judge(task, code + HONEST_ADD)
        assert outcome.verdict is not Verdict.error, outcome.evidence


# -------------------------------------------------------- 3. a response cannot hold a worker

FIND_CHANNEL = ("import gc, os\n"
                "def _channel():\n"
                "    return next(o for o in gc.get_objects() if type(o).__name__ == 'Channel')\n"
                "def _raw(frame: bytes):\n"
                "    data = len(frame).to_bytes(4, 'big') + frame\n"
                "    while data:\n"
                "        data = data[os.write(3, data):]\n"
                "def _nonce():\n"
                "    return _channel()._nonce\n")


def _nested(depth: int, inner: str = "1") -> str:
    return f"'[' * {depth} + '{inner}' + ']' * {depth}"


FRAME_ATTACKS = {
    # The job's own nonce is in its memory: these frames are well formed but hostile.
    "ask_with_a_deep_id_at_import": (
        FIND_CHANNEL + f"_raw(('{{\"t\":\"ask\",\"n\":\"' + _nonce() + '\",\"id\":' + {_nested(985)} + ',"
        "\"body\":null}').encode())\n" + WRONG_ADD),
    "ask_with_a_deep_id_in_call": (
        FIND_CHANNEL + "def add(a, b):\n"
        f"    _raw(('{{\"t\":\"ask\",\"n\":\"' + _nonce() + '\",\"id\":' + {_nested(600)} + ',"
        "\"body\":null}').encode())\n    return a + b\n"),
    "ask_with_a_deep_body": (
        FIND_CHANNEL + "def add(a, b):\n"
        f"    _raw(('{{\"t\":\"ask\",\"n\":\"' + _nonce() + '\",\"id\":1,\"body\":' "
        f"+ {_nested(400)} + '}}').encode())\n"
        "    return a + b\n"),
    "answer_with_a_deep_value": (
        FIND_CHANNEL + "def add(a, b):\n"
        f"    _raw(('{{\"t\":\"ans\",\"n\":\"' + _nonce() + '\",\"id\":2,\"body\":{{\"ok\":true,\"value\":' "
        f"+ {_nested(700)} + '}}}}').encode())\n    return a + b\n"),
    "answer_with_a_string_id": (
        FIND_CHANNEL + "def add(a, b):\n"
        "    _raw(('{\"t\":\"ask\",\"n\":\"' + _nonce() + '\",\"id\":\"' + 'i' * 100000 + '\",\"body\":1}').encode())\n"
        "    return a + b\n"),
    # Raw DEL characters are one byte in JSON and six once re-escaped by an encoder.
    "answer_that_grows_six_fold_when_escaped": (
        FIND_CHANNEL + "def add(a, b):\n"
        "    _raw(('{\"t\":\"ans\",\"n\":\"' + _nonce() + '\",\"id\":2,\"body\":{\"ok\":true,\"value\":\"' "
        "+ '\\x7f' * (15 * 1024 * 1024) + '\"}}').encode())\n    return a + b\n"),
    "result_that_grows_six_fold_when_escaped": (
        FIND_CHANNEL + "_raw(('{\"t\":\"result\",\"n\":\"' + _nonce() + '\",\"value\":\"' "
        "+ '\\x7f' * (15 * 1024 * 1024) + '\"}').encode())\n" + WRONG_ADD),
    # An honest encoder, a value near the channel's size: the grader gets it or the call ends.
    "return_value_near_the_frame_limit": "def add(a, b):\n    return '\\x7f' * (2_700_000)\n",
    "exported_value_near_the_frame_limit": "BLOB = '\\x01' * 2_700_000\n" + WRONG_ADD,
}


@pytest.mark.parametrize("name", sorted(FRAME_ATTACKS))
def test_a_hostile_frame_is_the_jobs_violation_and_frees_its_worker(judge, box, name):
    task = assert_task("def check(candidate):\n    assert candidate(2, 3) == 5\n")
    # Twice: a worker held by the first would leave the second waiting for a free one.
    for _ in range(2):
        attack_then_honest(judge, box, task, FRAME_ATTACKS[name], HONEST_ADD, same_worker=False)


def test_the_deepest_values_that_encode_still_cross_both_ways(judge):
    # Anything values.encode accepts fits a frame's nesting limit with its envelope: an
    # honest answer with deep data is never a refused frame (nor anyone's violation).
    task = assert_task("def check(candidate):\n    deep = []\n    for _ in range(195):\n        deep = [deep]\n"
                       "    assert candidate(deep, 0) == deep\n"
                       "    nested = {}\n    for _ in range(38):\n        nested = {'k': (nested,)}\n"
                       "    assert candidate(nested, 0) == nested\n")
    outcome, reward = judge(task, "def add(a, b):\n    return a\n")
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence


def test_a_deep_id_from_a_stdin_program_is_its_violation(judge, box):
    program = FIND_CHANNEL + (f"_raw(('{{\"t\":\"ask\",\"n\":\"' + _nonce() + '\",\"id\":' + {_nested(985)} + ',"
                              "\"body\":null}').encode())\nprint(4)\n")
    for _ in range(2):
        attack_then_honest(judge, box, IO_TASK, program, HONEST_IO, same_worker=False)


# ---------------------------------------------------- 4. a response cannot outlive its job

TOUCH_EVERYTHING = """
import os, resource, signal
MARK = 'assay-poison-6502'
SKIP = ('/proc', '/sys', '/usr', '/opt')
KEEP = ('/etc', '/var', '/home', '/root', '/srv', '/mnt', '/media')
def attempt(f, *args):
    try:
        f(*args)
    except (OSError, ValueError, TypeError, AttributeError, OverflowError):
        pass
pids = set(range(1, 400))
try:
    pids |= {int(p) for p in os.listdir('/proc') if p.isdigit()}
except OSError:
    pass
pids.discard(os.getpid())
for pid in sorted(pids):
    for res, value in ((resource.RLIMIT_NOFILE, 3), (resource.RLIMIT_NPROC, 1), (resource.RLIMIT_AS, 1 << 20),
                       (resource.RLIMIT_CPU, 1), (resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_STACK, 1 << 16)):
        attempt(resource.prlimit, pid, res, (value, value))
    attempt(os.setpriority, os.PRIO_PROCESS, pid, 19)
    attempt(os.sched_setaffinity, pid, {0})
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP, signal.SIGQUIT):
        attempt(os.kill, pid, sig)
attempt(os.setpriority, os.PRIO_USER, os.getuid(), 19)
attempt(os.setpriority, os.PRIO_PGRP, 0, 19)
for top in ('/tmp', '/dev/shm', '/dev/mqueue', '/var/tmp', '/run', '/dev', os.path.expanduser('~'), '/'):
    for root, dirs, files in os.walk(top):
        if root.startswith(SKIP) or (top == '/' and root != '/' and not root.startswith(KEEP)):
            dirs[:] = []
            continue
        if os.access(root, os.W_OK):
            attempt(lambda: open(os.path.join(root, MARK), 'w').write(MARK))
import ctypes
libc = ctypes.CDLL(None)
libc.shmget(6502, 4096, 0o1000 | 0o666)
libc.msgget(6502, 0o1000 | 0o666)
libc.semget(6502, 1, 0o1000 | 0o666)
"""
# Looks for what TOUCH_EVERYTHING may have left: its files and its IPC objects.
LOOK_FOR_LEFTOVERS = """
import os, ctypes
SKIP = ('/proc', '/sys', '/usr', '/opt')
KEEP = ('/etc', '/var', '/home', '/root', '/srv', '/mnt', '/media')
found = []
for top in ('/tmp', '/dev/shm', '/dev/mqueue', '/var/tmp', '/run', '/dev', os.path.expanduser('~'), '/'):
    for root, dirs, files in os.walk(top):
        if root.startswith(SKIP) or (top == '/' and root != '/' and not root.startswith(KEEP)):
            dirs[:] = []
            continue
        if 'assay-poison-6502' in files:
            found.append(root)
libc = ctypes.CDLL(None)
for name, call in (('shm', lambda: libc.shmget(6502, 0, 0)), ('msg', lambda: libc.msgget(6502, 0)),
                   ('sem', lambda: libc.semget(6502, 0, 0))):
    if call() != -1:
        found.append(name)
print('clean' if not found else sorted(set(found)))
"""


def test_a_job_cannot_touch_what_outlives_it(judge, box):
    slow = {"time_limit_s": 20.0}  # walking the file system takes a while on a loaded machine
    clean_task = {**LIMITS, **slow, "io_cases": [{"stdin": "", "stdout": "clean\n"}]}
    for task, honest in (({**assert_task("def check(candidate):\n    assert candidate(2, 3) == 5\n"), **slow},
                          HONEST_ADD), ({**IO_TASK, **slow}, HONEST_IO)):
        code = TOUCH_EVERYTHING + (WRONG_ADD if "entry_point" in task else "print(0)\n")
        attack_then_honest(judge, box, task, code, honest)
    before = started(box)
    look, reward = judge(clean_task, LOOK_FOR_LEFTOVERS)
    assert (look.verdict, reward) == (Verdict.correct, 1.0), look.evidence
    assert started(box) == before


def test_a_job_cannot_poison_the_worker_while_it_loads(judge, box):
    # The attack runs at import of the candidate's module, and in a call of it.
    task = {**assert_task("def check(candidate):\n    assert candidate(2, 3) == 5\n"), "time_limit_s": 20.0}
    in_call = "def add(a, b):\n" + "".join(f"    {line}\n" for line in TOUCH_EVERYTHING.splitlines()) + "    return 0\n"
    for code in (TOUCH_EVERYTHING + WRONG_ADD, in_call):
        for _ in range(3):
            attack_then_honest(judge, box, task, code, HONEST_ADD)


# --------------------------------------------- 5. a response cannot name a flag or a label

FLOOD = ("import sys, verifiers.code.inside.candidate as c\n"
         "for i in range(20000):\n    c._events[f'k{i}'] = 1\n"
         "c._events['a\\x00b\\nc'] = 1\nc._events['runtime:evil'] = 1\n"
         "for i in range(300):\n    sys.stderr.write(f'\\n[assay-audit] flood{i}\\n')\n")
HIDDEN_VALUE = 7654321


def _flag_names_are_fixed(outcome) -> None:
    names = set(outcome.flag_map())
    vocabulary = get("code").flag_names
    assert names <= vocabulary, names - vocabulary
    for name in names:
        assert re.fullmatch(r"[a-z][a-z0-9_]*(:[a-z][a-z0-9_]*)?", name), name


def test_a_flag_flood_gives_a_bounded_record(judge, box):
    outcome = attack_then_honest(judge, box, IO_TASK, FLOOD + "print(0)\n", HONEST_IO)
    _flag_names_are_fixed(outcome)
    assert len(json.dumps({"flags": outcome.flag_map(), "evidence": outcome.evidence})) < 20_000
    task = assert_task("def check(candidate):\n    assert candidate(2, 3) == 5\n")
    outcome = attack_then_honest(judge, box, task, FLOOD + WRONG_ADD, HONEST_ADD)
    _flag_names_are_fixed(outcome)


def test_hidden_inputs_never_become_flag_names(judge, box):
    task = assert_task(f"def check(candidate):\n    assert candidate({HIDDEN_VALUE}, 1) == {HIDDEN_VALUE + 1}\n")
    spy = ("import sys, verifiers.code.inside.candidate as c\n"
           "def add(a, b):\n"
           "    c._note(f'in_{a}')\n    c._events[f'runtime:{a}'] = 1\n    c._paths.append(str(a))\n"
           "    sys.stderr.write(f'\\n[assay-audit] seen{a}\\n')\n    sys.stderr.flush()\n    return a - b\n")
    outcome = attack_then_honest(judge, box, task, spy, HONEST_ADD)
    _flag_names_are_fixed(outcome)
    assert str(HIDDEN_VALUE) not in json.dumps({"flags": outcome.flag_map(), "evidence": outcome.evidence})


def test_flag_names_with_control_characters_are_refused():
    for bad in ("a\x00b", "line\nbreak", "x" * 500, "", "Upper", "spaced name", "évil"):
        made = Flag(bad, {"k": "v"})
        assert str(made) == "unnamed_flag", repr(made)
        assert len(json.dumps(made.evidence)) < 2000
    assert str(Flag("runtime:network")) == "runtime:network"


def test_a_flood_of_flag_names_makes_a_bounded_number_of_metric_series():
    from service.metrics import Metrics

    metrics = Metrics()
    for verifier in ("code", "math"):
        for i in range(2000):
            metrics.verification(verifier, "incorrect", 0.01, [f"k{i}", f"x\n{i}", "runtime:network"], {})
    text = metrics.render().decode()
    series = [line for line in text.splitlines() if line.startswith("assay_flags_total{")]
    assert len(series) <= 2 * 70, len(series)
    assert 'assay_flags_total{flag="runtime:network",verifier="code"} 2000.0' in text


# ------------------------------------------------------------------------ over HTTP


@pytest.fixture(scope="module", params=BACKENDS)
def server(request, tmp_path_factory):
    env = {"ASSAY_SANDBOX": request.param, "ASSAY_SANDBOX_ACQUIRE_TIMEOUT_S": str(ACQUIRE_TIMEOUT_S)}
    if request.param == "docker":
        env["ASSAY_SANDBOX_IMAGE"] = os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest")
    live = LiveServer(tmp_path_factory.mktemp(f"redteam-{request.param}"), env=env)
    yield live
    live.stop()


def test_over_http_no_response_fails_its_group_holds_a_worker_or_floods_the_metrics(server):
    task = assert_task("def check(candidate):\n    assert candidate(2, 3) == 5\n")
    fence = "```python\n{}\n```"
    with server.client() as c:
        baseline = len(c.get("/metrics").content)
        hostile = HOSTILE_MODULES["module_named_by_a_list"] + WRONG_ADD
        alone = c.post("/v1/verify", json={"verifier": "code", "task": task, "response": fence.format(hostile)})
        assert alone.status_code == 200, alone.text
        assert alone.json()["verdict"] not in ("error",) and alone.json()["reward"] == 0.0
        group = c.post("/v1/groups", json={"groups": [{"verifier": "code", "task": task, "responses": [
            fence.format(hostile), fence.format(HONEST_ADD)]}]})
        assert group.status_code == 200, group.text
        assert group.json()["groups"][0]["rewards"] == [0.0, 1.0], group.text
        # Two responses that once each held a worker for good (the service has two per pool).
        deep = FRAME_ATTACKS["ask_with_a_deep_id_at_import"]
        for _ in range(2):
            r = c.post("/v1/verify", json={"verifier": "code", "task": task, "response": fence.format(deep)})
            assert r.status_code == 200 and r.json()["verdict"] != "error", r.text
        for _ in range(3):
            r = c.post("/v1/verify", json={"verifier": "code", "task": task, "response": fence.format(HONEST_ADD)})
            assert r.status_code == 200 and r.json()["reward"] == 1.0, r.text
        flood = c.post("/v1/verify", json={"verifier": "code", "task": IO_TASK,
                                           "response": fence.format(FLOOD + "print(0)\n")})
        assert flood.status_code == 200 and len(flood.content) < 20_000, len(flood.content)
        grown = len(c.get("/metrics").content) - baseline
        assert grown < 20_000, grown
