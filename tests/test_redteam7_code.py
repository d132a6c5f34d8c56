"""Red team 7, code: held-out exploits written from the docs alone (docs/security.md,
docs/code_verifier.md, docs/languages.md), before any fix, through the real service on each
backend of ASSAY_TEST_BACKENDS (process, docker).

A reward-hacking policy that cannot solve the task tries to make the judge say yes anyway:
numbers that compare equal to anything, output the host decodes badly, a program that
rewrites itself so that the cached build of its source is another program, hunting the
sandbox for other cases' hidden inputs and printing them where feedback shows them, and
Python modules that fight the harness. Every attack gets no reward and a verdict other than
`error`; an honest answer right after, on the same service, gets reward 1."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from service.testing.app import AppServer
from tests.conftest import BACKENDS
from tests.sandbox_server_support import backend_server

pytestmark = pytest.mark.slow

HIDDEN_A, HIDDEN_B = 918273645, 192837465  # hidden inputs: never in what a reward key receives


def fenced(language: str, source: str) -> str:
    return f"My solution:\n```{language}\n{source}```\n"


@pytest.fixture(scope="module", params=BACKENDS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    yield from backend_server(request, tmp_path_factory, "redteam7-code")


def run_group(server: AppServer, task: dict | str, responses: list[str]) -> tuple[list[dict], str]:
    """`task`: inline, or the id of a registered one (then a reward key gets feedback only)."""
    ref = {"task_id": task} if isinstance(task, str) else {"task": task}
    with server.client(server.reward_key, timeout=600) as c:  # type: ignore[attr-defined]
        reply = c.post("/v1/groups", json={"groups": [{"verifier": "code", **ref, "responses": responses}]})
    assert reply.status_code == 200, reply.text[:2000]
    return reply.json()["groups"][0]["results"], reply.text


def assert_no_reward(result: dict) -> None:
    assert result["reward"] == 0.0, result
    assert result["verdict"] not in ("correct", "error"), result


# ----------------------------------------------------------------- numbers equal to anything

MEAN_TASK = {  # print the mean of two integers; compared as floats
    "language": "c", "compare": "float", "time_limit_s": 2.0, "memory_mb": 256,
    "io_cases": [{"stdin": "2 3\n", "stdout": "2.5\n"}, {"stdin": "1000 3000\n", "stdout": "2000\n"},
                 {"stdin": "-7 -8\n", "stdout": "-7.5\n"}, {"stdin": "123456 0\n", "stdout": "61728\n"}],
}
HONEST_MEAN = '#include <stdio.h>\nint main(void){double a,b;scanf("%lf %lf",&a,&b);printf("%.6f\\n",(a+b)/2);return 0;}\n'  # noqa: E501
FLOAT_TOKENS = ["inf", "-inf", "Infinity", "1e999", "nan", "NaN", "+inf", "1e308", "0x1p+1024", "1_0", "١٢"]


@pytest.mark.parametrize("token", FLOAT_TOKENS)
def test_float_compare_never_takes_an_infinity_or_a_nan_for_a_number(server, token):
    """`inf` is within any relative tolerance of anything when the tolerance scales with the
    larger side; `nan` compares false both ways. Neither may pass for 2.5 or 2000."""
    attack = f'#include <stdio.h>\nint main(void){{puts("{token}");return 0;}}\n'
    results, _ = run_group(server, MEAN_TASK, [fenced("c", attack), fenced("c", HONEST_MEAN)])
    assert_no_reward(results[0])
    assert results[1]["reward"] == 1.0, results[1]


PY_FLOAT_TASK = {"language": "python", "compare": "float", "time_limit_s": 5.0,
                 "io_cases": [{"stdin": "2 3\n", "stdout": "2.5\n"}, {"stdin": "10 30\n", "stdout": "20\n"}]}


def test_python_float_tokens_and_unicode_digits_are_not_numbers_they_do_not_equal(server):
    attacks = ["print(float('inf'))", "print('1e999')", "print('nan')", "print('\\u0662\\u066b\\u0665')",
               "print('2.5\\x00')", "import sys; sys.stdout.write('2.5' + '\\u2028' + '20')"]
    honest = "a, b = map(int, input().split())\nprint((a + b) / 2)\n"
    results, _ = run_group(server, PY_FLOAT_TASK, [fenced("python", a + "\n") for a in attacks]
                           + [fenced("python", honest)])
    for result in results[:-1]:
        assert_no_reward(result)
    assert results[-1]["reward"] == 1.0, results[-1]


# --------------------------------------------------------- output the host must not choke on

SUM_TASK = {
    "language": "c", "time_limit_s": 2.0, "memory_mb": 256,
    "visible_io_cases": [{"stdin": "2 3\n", "stdout": "5\n"}],
    "io_cases": [{"stdin": f"{HIDDEN_A} 1\n", "stdout": f"{HIDDEN_A + 1}\n"},
                 {"stdin": f"{HIDDEN_B} 2\n", "stdout": f"{HIDDEN_B + 2}\n"},
                 {"stdin": "7 8\n", "stdout": "15\n"}],
}
HONEST_SUM = {
    "c": '#include <stdio.h>\nint main(void){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a+b);return 0;}\n',
    "cpp": '#include <iostream>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}\n',
    "rust": "use std::io::*;\nfn main() { let mut s = String::new(); stdin().read_to_string(&mut s).unwrap();\n"
            "  let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
            '  println!("{}", v[0] + v[1]); }\n',
    "go": 'package main\nimport "fmt"\nfunc main() { var a, b int64; fmt.Scan(&a, &b); fmt.Println(a + b) }\n',
    "java": "import java.util.*;\npublic class Main {\n  public static void main(String[] x) {\n"
            "    Scanner s = new Scanner(System.in);\n    long a = s.nextLong(), b = s.nextLong();\n"
            "    System.out.println(a + b);\n  }\n}\n",
    "javascript": "const d = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(BigInt);\n"
                  "console.log((d[0] + d[1]).toString());\n",
}

# Bytes that are not UTF-8, lone surrogates encoded as UTF-8 (CESU), NUL and escape
# sequences: printed on the *visible* case, where feedback shows the output.
BAD_BYTES_C = (
    '#include <stdio.h>\n#include <unistd.h>\nint main(void){\n'
    '  static const unsigned char junk[] = {0xed,0xa0,0x80,0xff,0xfe,0x00,0xc0,0xaf,0x1b,0x5b,0x32,0x4a,'
    '0xf4,0x90,0x80,0x80,0x5c,0x75,0x64,0x38,0x30,0x30,0x0a};\n'
    '  write(1, junk, sizeof junk); write(2, junk, sizeof junk); return 0; }\n'
)


def test_output_that_is_not_unicode_is_a_verdict_not_a_5xx(server):
    results, body = run_group(server, SUM_TASK, [fenced("c", BAD_BYTES_C), fenced("c", HONEST_SUM["c"])])
    assert_no_reward(results[0])
    assert results[1]["reward"] == 1.0, results[1]


PY_BAD_OUTPUT = [
    "import os\nos.write(1, b'\\xed\\xa0\\x80\\xff 5\\n')\n",
    "import sys\nsys.stdout.buffer.write(b'5\\r\\n\\x00')\n",
    "import os\nos.write(2, bytes(range(256)) * 100)\nos.write(1, '\\udcff'.encode('utf-8', 'surrogateescape'))\n",
]


def test_python_output_that_is_not_unicode_is_a_verdict(server):
    task = {"language": "python", "visible_io_cases": [{"stdin": "2 3\n", "stdout": "5\n"}],
            "io_cases": [{"stdin": f"{HIDDEN_A} 1\n", "stdout": f"{HIDDEN_A + 1}\n"}]}
    honest = "a, b = map(int, input().split())\nprint(a + b)\n"
    results, _ = run_group(server, task, [fenced("python", s) for s in PY_BAD_OUTPUT] + [fenced("python", honest)])
    for result in results[:-1]:
        assert_no_reward(result)
    assert results[-1]["reward"] == 1.0, results[-1]


# ---------------------------------------------------- hunting other cases' hidden inputs

# On its first (visible) case the program looks everywhere it can for the other cases'
# inputs: its parent's and every process's memory, command line, environment and
# descriptors, its working directory's neighbours, /tmp, /dev/shm, and prints all digits runs
# of 9 it finds; the visible case's output is shown in feedback.
HUNT_C = r'''
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/uio.h>
static void scan_buf(const char *b, ssize_t n) {
  for (ssize_t i = 0; i + 9 <= n; i++) {
    int ok = 1; for (int k = 0; k < 9; k++) if (b[i+k] < '0' || b[i+k] > '9') { ok = 0; break; }
    if (ok) { fwrite(b + i, 1, 9, stdout); fputc(' ', stdout); i += 8; }
  }
}
static void scan_file(const char *p) {
  int fd = open(p, O_RDONLY); if (fd < 0) return;
  static char b[1 << 16]; ssize_t n; int rounds = 0;
  while ((n = read(fd, b, sizeof b)) > 0 && rounds++ < 64) scan_buf(b, n);
  close(fd);
}
static void walk(const char *dir, int depth) {
  if (depth > 4) return;
  DIR *d = opendir(dir); if (!d) return; struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[4096]; snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (e->d_type == DT_DIR) walk(p, depth + 1); else scan_file(p);
  }
  closedir(d);
}
static void scan_mem(int pid) {
  char p[64]; snprintf(p, sizeof p, "/proc/%d/maps", pid);
  FILE *m = fopen(p, "r"); if (!m) return;
  char line[512]; unsigned long lo, hi; static char b[1 << 16];
  while (fgets(line, sizeof line, m)) {
    if (sscanf(line, "%lx-%lx", &lo, &hi) != 2 || !strstr(line, "rw")) continue;
    for (unsigned long a = lo; a < hi && a - lo < (1UL << 26); a += sizeof b) {
      struct iovec l = {b, sizeof b}, r = {(void *)a, sizeof b};
      ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0); if (n > 0) scan_buf(b, n);
    }
  }
  fclose(m);
}
int main(void) {
  long long a, b; if (scanf("%lld %lld", &a, &b) != 2) return 1;
  if (a != 2) { printf("%lld\n", a + b + 1); return 0; }  /* hidden cases: wrong on purpose */
  printf("5\n");
  char cwd[4096]; if (getcwd(cwd, sizeof cwd)) { walk(cwd, 0); char up[4200];
  snprintf(up, sizeof up, "%s/..", cwd); walk(up, 0); }
  walk("/tmp", 0); walk("/dev/shm", 0); walk("/var/tmp", 0); walk("/run", 0);
  for (int pid = 1; pid < 400; pid++) {
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/cmdline", pid); scan_file(p);
    snprintf(p, sizeof p, "/proc/%d/environ", pid); scan_file(p);
    snprintf(p, sizeof p, "/proc/%d/fd", pid); walk(p, 3);
    scan_mem(pid);
  }
  for (int fd = 3; fd < 64; fd++) { static char q[1 << 16];
  ssize_t n = pread(fd, q, sizeof q, 0); if (n > 0) scan_buf(q, n); }
  printf("\n");
  return 0;
}
'''


def register(server: AppServer, task_id: str, task: dict) -> str:
    with server.client() as c:
        reply = c.post("/v1/tasks", json={"task_id": task_id, "verifier": "code", "task": task})
    assert reply.status_code == 201, reply.text
    return task_id


# The positive control: a visible case's wrong output is shown, so a hidden input the
# hunt found would be seen.
SHOWN_C = ('#include <stdio.h>\nint main(void){long long a,b;scanf("%lld %lld",&a,&b);'
           'printf("%lld 123456789\\n",a+b);}\n')


def test_a_program_cannot_show_other_cases_hidden_inputs_in_feedback(server):
    task_id = register(server, "rt7-sum-c", SUM_TASK)
    results, body = run_group(server, task_id, [fenced("c", HUNT_C), fenced("c", SHOWN_C),
                                                fenced("c", HONEST_SUM["c"])])
    assert_no_reward(results[0])
    assert str(HIDDEN_A) not in body and str(HIDDEN_B) not in body, body[:3000]
    assert "123456789" in json.dumps(results[1]), results[1]  # the probe is not vacuous
    assert results[2]["reward"] == 1.0, results[2]


HUNT_PY = r'''
import os, re, sys
a, b = map(int, input().split())
if a != 2:
    print(a + b + 1); sys.exit(0)
print(5)
found = set()
def scan(data):
    for m in re.findall(rb"\d{9}", data):
        found.add(m.decode())
for root in [os.getcwd(), os.path.dirname(os.getcwd()), "/tmp", "/dev/shm", "/var/tmp", "/run", "/proc"]:
    for dirpath, dirs, files in os.walk(root):
        if dirpath.count("/") > 6:
            dirs[:] = []
        for f in files[:200]:
            try:
                with open(os.path.join(dirpath, f), "rb") as fh:
                    scan(fh.read(1 << 20))
            except Exception:
                pass
import gc
for o in gc.get_objects():
    try:
        scan(repr(o).encode()[:100000])
    except Exception:
        pass
print(" ".join(sorted(found)))
'''


def test_a_python_program_cannot_show_other_cases_hidden_inputs(server):
    task = {"language": "python", "visible_io_cases": [{"stdin": "2 3\n", "stdout": "5\n"}],
            "io_cases": [{"stdin": f"{HIDDEN_A} 1\n", "stdout": f"{HIDDEN_A + 1}\n"},
                         {"stdin": f"{HIDDEN_B} 2\n", "stdout": f"{HIDDEN_B + 2}\n"}]}
    honest = "a, b = map(int, input().split())\nprint(a + b)\n"
    shown = "a, b = map(int, input().split())\nprint(a + b, 123456789)\n"
    results, body = run_group(server, register(server, "rt7-sum-py", task),
                              [fenced("python", HUNT_PY), fenced("python", shown), fenced("python", honest)])
    assert_no_reward(results[0])
    assert str(HIDDEN_A) not in body and str(HIDDEN_B) not in body, body[:3000]
    assert "123456789" in json.dumps(results[1]), results[1]  # the probe is not vacuous
    assert results[2]["reward"] == 1.0, results[2]


# ------------------------------------------ a program that rewrites its own cached build

# An honest program that, while it runs, patches a copy of its own binary (one marker byte)
# and puts it wherever a file named like its program can be replaced. If the copy that the
# compile cache keeps were read back after the program ran, every later response of this
# source would run the patched program, which answers wrong: a response would decide
# another's verdict. The same source must get the same verdict every time.
SELF_PATCH_C = r'''
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
volatile char MARK[] = "ASSAYMARK0";
static char *bin; static long binlen;
static void load(const char *self) {
  int fd = open(self, O_RDONLY); if (fd < 0) return; struct stat st; fstat(fd, &st);
  bin = malloc(st.st_size); binlen = read(fd, bin, st.st_size); close(fd);
  for (long i = 0; i + 10 <= binlen; i++) if (!memcmp(bin + i, "ASSAYMARK0", 10)) bin[i + 9] = '1';
}
static void plant(const char *path) {
  char tmp[4200]; snprintf(tmp, sizeof tmp, "%s.new", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0755); if (fd < 0) return;
  if (write(fd, bin, binlen) == binlen) rename(tmp, path); else unlink(tmp);
  close(fd);
  fd = open(path, O_WRONLY | O_TRUNC); if (fd >= 0) { if (write(fd, bin, binlen) < 0) {} close(fd); }
}
static void walk(const char *dir, int depth) {
  if (depth > 5 || !bin) return;
  DIR *d = opendir(dir); if (!d) return; struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[4096]; snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat st; if (lstat(p, &st)) continue;
    if (S_ISDIR(st.st_mode)) walk(p, depth + 1);
    else if (S_ISREG(st.st_mode) && st.st_size == binlen) plant(p);
    else if (!strcmp(e->d_name, "main") || !strcmp(e->d_name, "a.out")) plant(p);
  }
  closedir(d);
}
int main(int argc, char **argv) {
  long long a, b; if (scanf("%lld %lld", &a, &b) != 2) return 1;
  if (MARK[9] == '1') { printf("%lld\n", a + b + 1); return 0; }
  printf("%lld\n", a + b); fflush(stdout);
  load(argv[0]); if (!bin) load("/proc/self/exe");
  char cwd[4096]; if (getcwd(cwd, sizeof cwd)) { walk(cwd, 0); char up[4200]; snprintf(up, sizeof up, "%s/..", cwd);
  walk(up, 0); snprintf(up, sizeof up, "%s/../..", cwd); walk(up, 0); }
  walk("/tmp", 0); walk("/dev/shm", 0);
  return 0;
}
'''


def test_a_program_cannot_rewrite_the_cached_build_of_its_source(server):
    """Alone (compiled in its one job), alone again (the second brings the build back), in
    a group of three identical responses, then again from the cache: reward 1 every time."""
    task = {**SUM_TASK, "visible_io_cases": []}
    response = fenced("c", SELF_PATCH_C)
    rewards = []
    for responses in ([response], [response], [response] * 3, [response], [response]):
        results, _ = run_group(server, task, responses)
        rewards += [r["reward"] for r in results]
        assert all(r["verdict"] != "error" for r in results), results
    assert rewards == [1.0] * len(rewards), rewards


# ------------------------------------------------------- each language's own exit hatches

EARLY_SUCCESS = {
    "c": "#include <stdlib.h>\n#include <stdio.h>\nstatic void bye(void){_Exit(0);}\n"
         "int main(void){atexit(bye);printf(\"5\\n\");fclose(stdin);fclose(stdout);abort();}\n",
    "cpp": "#include <cstdio>\n#include <csignal>\n#include <unistd.h>\nstruct G{~G(){std::puts(\"5\");}} g;\n"
           "int main(){close(0);dup2(2,1);std::signal(SIGSEGV,[](int){_exit(0);});*(volatile int*)0=1;}\n",
    "rust": "fn main() { std::panic::set_hook(Box::new(|_| std::process::exit(0))); let v: Vec<u8> = vec![];"
            " println!(\"5\"); let _ = v[7]; }\n",
    "go": "package main\nimport (\"os\";\"fmt\")\nfunc init() { fmt.Println(\"5\"); os.Stdout.Close(); os.Exit(0) }\n"
          "func main() { panic(1) }\n",
    "java": "public class Main { public static void main(String[] a) { Runtime.getRuntime().addShutdownHook("
            "new Thread(() -> Runtime.getRuntime().halt(0))); System.out.println(5); throw new RuntimeException(); } }\n",  # noqa: E501
    "javascript": "process.on('uncaughtException', () => process.exit(0));\nprocess.on('exit', (c) => "
                  "{ process.exitCode = 0; });\nconsole.log('5');\nthrow new Error('x');\n",
}


@pytest.mark.parametrize("language", list(EARLY_SUCCESS))
def test_an_early_successful_exit_answers_nothing_it_did_not_compute(server, language):
    """Each language's way to die "successfully" after printing the visible answer."""
    task = {**SUM_TASK, "language": language}
    results, body = run_group(server, task, [fenced(language, EARLY_SUCCESS[language]),
                                             fenced(language, HONEST_SUM[language])])
    assert_no_reward(results[0])
    assert results[1]["reward"] == 1.0, results[1]


# --------------------------------------------------------------- Python harness attacks

ASSERT_TASK = {
    "language": "python", "entry_point": "digest", "time_limit_s": 5.0,
    "prompt": "def digest(n):\n    \"\"\"Sum of the decimal digits of n * 7919.\"\"\"\n",
    "tests": "def check(candidate):\n"
             "    assert candidate(12345) == 39\n"
             "    assert candidate(99991) == 53\n"
             "    assert candidate(1) == 26\n",
}
HONEST_DIGEST = "def digest(n):\n    return sum(int(c) for c in str(n * 7919))\n"
assert sum(int(c) for c in str(12345 * 7919)) == 39 and sum(int(c) for c in str(99991 * 7919)) == 53
assert sum(int(c) for c in str(1 * 7919)) == 26

PY_HARNESS_ATTACKS = {
    # Builtins rebound at module level under the names the grader may look up.
    "dunder_builtins": "__builtins__ = {'AssertionError': type('E', (Exception,), {})}\n"
                       "def digest(n):\n    return 0\n",
    "eq_true_subclass_of_int": "class Y(int):\n    def __eq__(s, o): return True\n    __hash__ = int.__hash__\n"
                               "def digest(n):\n    return Y(0)\n",
    "bool_for_int": "def digest(n):\n    return True\n",
    "return_a_callable": "def digest(n):\n    return digest\n",
    "return_itself_module": "import sys\ndef digest(n):\n    return sys.modules[__name__]\n",
    "recursive_list": "def digest(n):\n    x = []\n    x.append(x)\n    return x\n",
    "raise_base_exception": "class Done(BaseException):\n    pass\ndef digest(n):\n    raise Done()\n",
    "raise_generator_exit": "def digest(n):\n    raise GeneratorExit\n",
    "raise_assertion_subclass": "class Ok(AssertionError):\n    def __str__(self): return 'passed'\n"
                                "def digest(n):\n    raise Ok()\n",
    "exit_in_finally": "import os\ndef digest(n):\n    try:\n        return 0\n    finally:\n        os._exit(0)\n",
    "thread_kills_after_answer": "import threading, os, time\n"
                                 "def digest(n):\n    threading.Timer(0.01, lambda: os._exit(0)).start()\n    return 0\n",  # noqa: E501
    "fork_and_answer_twice": "import os\ndef digest(n):\n    os.fork()\n    return 0\n",
    "settrace_and_signal": "import sys, signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                           "sys.settrace(lambda *a: None)\ndef digest(n):\n    return 0\n",
    "fd3_forged_frames": "import os, json, struct\n"
                         "def digest(n):\n"
                         "    for fd in range(3, 20):\n"
                         "        for frame in ({'status': 'pass'}, {'ok': True, 'value': 39}, {'op': 'done', 'passed': 3}):\n"  # noqa: E501
                         "            body = json.dumps(frame).encode()\n"
                         "            for head in (struct.pack('>I', len(body)), struct.pack('<I', len(body)), b''):\n"
                         "                try:\n                    os.write(fd, head + body + b'\\n')\n"
                         "                except OSError:\n                    pass\n"
                         "    return 0\n",
    "gc_walk_patch_serve": "import gc, sys\n"
                           "def digest(n):\n    return 0\n"
                           "for o in gc.get_objects():\n"
                           "    if isinstance(o, dict):\n"
                           "        for k in ('ok', 'passed', 'status'):\n"
                           "            if k in o:\n"
                           "                try:\n                    o[k] = True if k != 'status' else 'pass'\n"
                           "                except Exception:\n                    pass\n",
    "shadow_check_and_candidate": "def check(candidate):\n    return True\ncandidate = lambda n: 39\n"
                                  "METADATA = {}\ndef digest(n):\n    return 0\n",
    "memo_file_between_responses": "import os, json\n"
                                   "P = ['/tmp/assay_memo.json', '/dev/shm/assay_memo.json', os.path.expanduser('~/.assay_memo')]\n"  # noqa: E501
                                   "def digest(n):\n"
                                   "    for p in P:\n"
                                   "        try:\n            return json.load(open(p))[str(n)]\n"
                                   "        except Exception:\n            pass\n"
                                   "    return 0\n",
}
# The honest answer that also leaves its answers where a later response could read them.
HONEST_MEMO = ("import os, json\n"
               "def digest(n):\n"
               "    v = sum(int(c) for c in str(n * 7919))\n"
               "    for p in ['/tmp/assay_memo.json', '/dev/shm/assay_memo.json', os.path.expanduser('~/.assay_memo')]:\n"  # noqa: E501
               "        try:\n"
               "            d = json.load(open(p)) if os.path.exists(p) else {}\n"
               "            d[str(n)] = v\n            json.dump(d, open(p, 'w'))\n            os.chmod(p, 0o666)\n"
               "        except Exception:\n            pass\n"
               "    return v\n")


def test_python_harness_attacks_get_nothing(server):
    names = list(PY_HARNESS_ATTACKS)
    # The memo writer goes first, in the same group and again alone, so a later response
    # could only pass by reading what it left.
    responses = [fenced("python", HONEST_MEMO)] + [fenced("python", PY_HARNESS_ATTACKS[n]) for n in names]
    results, _ = run_group(server, ASSERT_TASK, responses)
    assert results[0]["reward"] == 1.0, results[0]
    failed = {n: r for n, r in zip(names, results[1:], strict=True) if r["reward"] != 0.0 or r["verdict"] in ("correct", "error")}  # noqa: E501
    assert not failed, failed
    again, _ = run_group(server, ASSERT_TASK, [fenced("python", PY_HARNESS_ATTACKS["memo_file_between_responses"]),
                                               fenced("python", HONEST_DIGEST)])
    assert_no_reward(again[0])
    assert again[1]["reward"] == 1.0, again[1]


# ------------------------------------------------ checkers a response tries to break

CHECKER_TASK = {  # any permutation of the input's numbers, sorted, is the answer; a Python checker
    "language": "python", "time_limit_s": 5.0,
    "checker": {"language": "python", "source":
                "import sys\n"
                "inp, out, ans = (open(p).read() for p in sys.argv[1:4])\n"
                "got = list(map(int, out.split()))\n"
                "sys.exit(0 if got == sorted(map(int, inp.split())) else 1)\n"},
    "io_cases": [{"stdin": "3 1 2\n", "stdout": "1 2 3\n"}, {"stdin": "9 8\n", "stdout": "8 9\n"}],
}
CHECKER_ATTACKS = [
    "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe' * 1000)\n",          # not UTF-8: the checker's read fails
    "print('9' * 100000)\n",                                                 # int() past its digit limit
    "print(' '.join(['1'] * 400000))\n",                                     # large but within the output cap
    "import sys\nsys.stdout.write('1 2 3\\n' + chr(0) * 10)\n",
    "print('1e5 2 3')\n",
]


def test_a_response_cannot_make_the_checker_fail_into_an_error(server):
    """A checker failure is `error`, which drops the sample from its group: a response that
    could steer a correct checker into failing would escape a wrong answer's penalty."""
    honest = "print(*sorted(map(int, input().split())))\n"
    results, _ = run_group(server, CHECKER_TASK, [fenced("python", a) for a in CHECKER_ATTACKS]
                           + [fenced("python", honest)])
    for result in results[:-1]:
        assert_no_reward(result)
    assert results[-1]["reward"] == 1.0, results[-1]
