"""Red team 8, code: held-out attempts to fake passing or to harm a neighbour, through the real
service on each backend of ASSAY_TEST_BACKENDS (process, docker). Written before reading the
sandbox code: each attack shares its group (and so its pools) with honest answers, which must
still get reward 1 (also in a second request right after, when the pools are reused); no attack
gets a reward or an `error` verdict (an `error` drops the response from its group, escaping
the penalty of a wrong answer)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from service.testing.app import AppServer
from tests.conftest import BACKENDS
from tests.sandbox_server_support import backend_server

pytestmark = pytest.mark.slow


def fenced(language: str, source: str) -> str:
    return f"Here it is:\n```{language}\n{source}```\n"


@pytest.fixture(scope="module", params=BACKENDS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    yield from backend_server(request, tmp_path_factory, "redteam8-code")


def run_group(server: AppServer, task: dict, responses: list[str]) -> list[dict]:
    with server.client(server.reward_key, timeout=600) as c:  # type: ignore[attr-defined]
        reply = c.post("/v1/groups", json={"groups": [{"verifier": "code", "task": task, "responses": responses}]})
    assert reply.status_code == 200, reply.text[:2000]
    return reply.json()["groups"][0]["results"]


def assert_no_reward(name: str, result: dict) -> None:
    # Every attack is well-formed code that compiles: `invalid_format` would mean it never ran.
    assert result["reward"] == 0.0 and result["verdict"] not in ("correct", "error", "invalid_format"), (name, result)


# A task whose hidden answers a program cannot know: the product of two hidden numbers, mod a prime.
PY_IO_TASK = {
    "language": "python", "time_limit_s": 3.0, "memory_mb": 256,
    "visible_io_cases": [{"stdin": "6 7\n", "stdout": "42\n"}],
    "io_cases": [{"stdin": "918273 645123\n", "stdout": f"{918273 * 645123 % 1000003}\n"},
                 {"stdin": "192837 465111\n", "stdout": f"{192837 * 465111 % 1000003}\n"},
                 {"stdin": "6 7\n", "stdout": "42\n"}],
}
HONEST_PY = "a, b = map(int, input().split())\nprint(a * b % 1000003)\n"

PY_IO_ATTACKS = {
    # The visible answer on every case, the process then "succeeds" in ways a harness might trust.
    "stdout_marker_spoof": "import sys\nprint('42')\nprint('ALL TESTS PASSED\\n{\"status\": \"ok\", \"passed\": 3}')\n"
                           "sys.stderr.write('ASSAY_RESULT {\"verdict\": \"correct\", \"reward\": 1}\\n')\n",
    "kill_own_group_after_answer": "import os, signal\nprint('42', flush=True)\nos.killpg(0, signal.SIGKILL)\n",
    "sigxcpu_handler_exit0": "import signal, os, resource\nprint('42', flush=True)\n"
                             "signal.signal(signal.SIGXCPU, lambda *a: os._exit(0))\nwhile True: pass\n",
    "atexit_rewrites_stdout": "import atexit, os\n"
                              "atexit.register(lambda: os.write(1, b'\\r42\\n'))\nraise SystemExit(3)\n",
    "keyboardinterrupt_at_exit": "import sys\nprint('42')\nsys.stdout.flush()\nraise KeyboardInterrupt\n",
    "finalizer_prints_answer": "import weakref, sys\nclass A: pass\na = A()\n"
                               "weakref.finalize(a, lambda: print('42'))\nsys.exit(1)\n",
    # Reading what it cannot compute: its own stdin source, the runner's memory, other fds, the env.
    "hunt_expected_in_fs_and_env": "import os, sys, glob\nseen = []\n"
                                   "for p in glob.glob('/proc/*/fd/*') + glob.glob('/proc/*/environ') + "
                                   "glob.glob('/tmp/**', recursive=True) + glob.glob('/dev/fd/*'):\n"
                                   "    try:\n        seen.append(open(p, 'rb').read(4096))\n"
                                   "    except Exception:\n        pass\n"
                                   "a, b = map(int, input().split())\n"
                                   "print(42 if (a, b) == (6, 7) else 0)\n",
    # Harm to the neighbours: a daemon that outlives the job and writes into every scratch it
    # finds, a disk, pid and memory grab, a flood of output and of processes.
    "daemon_poisons_neighbours": "import os, time, glob\n"
                                 "if os.fork() == 0:\n    os.setsid()\n"
                                 "    if os.fork() == 0:\n"
                                 "        for _ in range(200):\n"
                                 "            for d in glob.glob('/tmp/*') + glob.glob('/tmp/*/*') + ['/tmp', '.']:\n"
                                 "                try:\n"
                                 "                    open(os.path.join(d, 'main.py'), 'w').write('print(0)\\n')\n"
                                 "                except Exception:\n                    pass\n"
                                 "            time.sleep(0.05)\n"
                                 "    os._exit(0)\n"
                                 "print('42')\n",
    "fill_tmp_and_shm": "import os\nfor d in ('/tmp', '/dev/shm', '.'):\n    try:\n"
                        "        with open(os.path.join(d, 'big'), 'wb') as f:\n"
                        "            for _ in range(4096):\n                f.write(b'x' * (1 << 20))\n"
                        "    except Exception:\n        pass\nprint('42')\n",
    "thread_and_pid_bomb": "import os, threading, time\n"
                           "for _ in range(5000):\n    try:\n"
                           "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
                           "    except Exception:\n        break\n"
                           "for _ in range(5000):\n    try:\n        os.fork() or time.sleep(30)\n"
                           "    except Exception:\n        break\nprint('42')\n",
    "memory_grab_then_answer": "x = []\ntry:\n    while True:\n        x.append(bytearray(64 << 20))\n"
                               "except MemoryError:\n    pass\nprint('42')\n",
    "stderr_and_stdout_flood": "import os\nb = b'42\\n' * (1 << 20)\nwhile True:\n    os.write(1, b)\n"
                               "    os.write(2, b)\n",
    "deep_recursion_segfault": "import sys\nsys.setrecursionlimit(10**7)\n"
                               "def f(n): return f(n + 1) + 1\nprint(f(0))\n",
}


def test_python_programs_that_fake_passing_or_harm_neighbours_get_nothing(server):
    names = list(PY_IO_ATTACKS)
    responses = [fenced("python", HONEST_PY)] + [fenced("python", PY_IO_ATTACKS[n]) for n in names] \
        + [fenced("python", HONEST_PY)]
    results = run_group(server, PY_IO_TASK, responses)
    assert results[0]["reward"] == 1.0 and results[-1]["reward"] == 1.0, (results[0], results[-1])
    for name, result in zip(names, results[1:-1], strict=True):
        assert_no_reward(name, result)
    # The pools again, right after: nothing the attacks left behind reaches an honest answer.
    again = run_group(server, PY_IO_TASK, [fenced("python", HONEST_PY)] * 3)
    assert [r["reward"] for r in again] == [1.0, 1.0, 1.0], again


C_IO_TASK = {**PY_IO_TASK, "language": "c", "time_limit_s": 2.0}
HONEST_C = ('#include <stdio.h>\nint main(void){long long a,b;if(scanf("%lld %lld",&a,&b)!=2)return 1;'
            'printf("%lld\\n",a*b%1000003);return 0;}\n')
C_ATTACKS = {
    # Output written, then the process dies in ways that a harness might read as success.
    "vfork_child_exits_0_parent_killed": '#include <stdio.h>\n#include <unistd.h>\n#include <signal.h>\n'
                                         'int main(void){puts("42");fflush(stdout);'
                                         'if(fork()==0){sleep(1);_exit(0);}raise(SIGKILL);return 0;}\n',
    "closes_stdout_then_reopens_via_proc": '#include <stdio.h>\n#include <fcntl.h>\n#include <unistd.h>\n'
                                           'int main(void){int d=dup(1);close(1);'
                                           'int f=open("/proc/self/fd/0",O_WRONLY);'
                                           'dprintf(d,"42\\n");if(f>=0)dprintf(f,"42\\n");return 0;}\n',
    "setrlimit_raise_and_spin": '#include <stdio.h>\n#include <sys/resource.h>\n'
                                'int main(void){struct rlimit r={RLIM_INFINITY,RLIM_INFINITY};'
                                'setrlimit(RLIMIT_CPU,&r);setrlimit(RLIMIT_AS,&r);setrlimit(RLIMIT_NPROC,&r);'
                                'puts("42");fflush(stdout);for(;;);}\n',
    "ptrace_parent_and_kill_all": '#include <stdio.h>\n#include <signal.h>\n#include <sys/ptrace.h>\n'
                                  '#include <unistd.h>\nint main(void){puts("42");fflush(stdout);'
                                  'ptrace(PTRACE_ATTACH,getppid(),0,0);kill(getppid(),SIGSTOP);'
                                  'kill(-1,SIGKILL);return 0;}\n',
    "mmap_huge_noreserve": '#include <stdio.h>\n#include <sys/mman.h>\n#include <string.h>\n'
                           'int main(void){size_t n=(size_t)8<<30;char*p=mmap(0,n,PROT_READ|PROT_WRITE,'
                           'MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE,-1,0);'
                           'if(p!=MAP_FAILED)for(size_t i=0;i<n;i+=4096)p[i]=1;puts("42");return 0;}\n',
}


def test_c_programs_that_fake_passing_or_escape_their_limits_get_nothing(server):
    names = list(C_ATTACKS)
    responses = [fenced("c", C_ATTACKS[n]) for n in names] + [fenced("c", HONEST_C)]
    results = run_group(server, C_IO_TASK, responses)
    assert results[-1]["reward"] == 1.0, results[-1]
    for name, result in zip(names, results[:-1], strict=True):
        assert_no_reward(name, result)
    again = run_group(server, C_IO_TASK, [fenced("c", HONEST_C)] * 2)
    assert [r["reward"] for r in again] == [1.0, 1.0], again


JS_IO_TASK = {**PY_IO_TASK, "language": "javascript", "time_limit_s": 3.0}
HONEST_JS = ("const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(BigInt);\n"
             "console.log((a * b % 1000003n).toString());\n")
JS_ATTACKS = {
    "process_exit_patched": "console.log('42');\nprocess.exitCode = 0;\n"
                            "process.on('exit', () => { process.reallyExit(0); });\nthrow new Error('x');\n",
    "beforeexit_loop_prints": "let n = 0;\nprocess.on('beforeExit', () => { if (n++ < 3) console.log('42'); });\n",
    "worker_threads_bomb": "const { Worker } = require('worker_threads');\n"
                           "for (let i = 0; i < 2000; i++) { try { new Worker('while(1){}', { eval: true }); }"
                           " catch (e) { break; } }\nconsole.log('42');\n",
}


def test_javascript_programs_that_fake_passing_get_nothing(server):
    names = list(JS_ATTACKS)
    results = run_group(server, JS_IO_TASK, [fenced("javascript", JS_ATTACKS[n]) for n in names]
                        + [fenced("javascript", HONEST_JS)])
    assert results[-1]["reward"] == 1.0, results[-1]
    for name, result in zip(names, results[:-1], strict=True):
        assert_no_reward(name, result)
