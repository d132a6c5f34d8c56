"""C, C++, Java, JavaScript, Go and Rust through the real HTTP service, on each backend
of ASSAY_TEST_BACKENDS: an honest program is rewarded, a wrong one, one that does not
compile and one that loops are not (with the verdicts Python gets), a testlib checker
decides where answers are many, and a group of identical sources compiles once."""

from __future__ import annotations

import os

import pytest

from tests.conftest import BACKENDS, LiveServer

pytestmark = pytest.mark.slow

SUM_TASK = {"io_cases": [{"stdin": "2 3\n", "stdout": "5\n"}, {"stdin": "-7 10", "stdout": "3"},
                         {"stdin": "1000000000000 1", "stdout": "1000000000001\n"}],
            "time_limit_s": 2.0, "memory_mb": 256}

HONEST = {
    "c": '#include <stdio.h>\nint main(void){long long a,b;if(scanf("%lld %lld",&a,&b)!=2)return 1;'
         'printf("%lld\\n",a+b);return 0;}\n',
    "cpp": '#include <bits/stdc++.h>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}\n',
    "java": "import java.util.*;\npublic class Main {\n  public static void main(String[] x) {\n"
            "    Scanner s = new Scanner(System.in);\n    long a = s.nextLong(), b = s.nextLong();\n"
            "    System.out.println(a + b);\n  }\n}\n",
    "javascript": "const d = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(BigInt);\n"
                  "console.log((d[0] + d[1]).toString());\n",
    "go": 'package main\nimport "fmt"\nfunc main() { var a, b int64; fmt.Scan(&a, &b); fmt.Println(a + b) }\n',
    "rust": "use std::io::*;\nfn main() { let mut s = String::new(); stdin().read_to_string(&mut s).unwrap();\n"
            "  let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
            '  println!("{}", v[0] + v[1]); }\n',
}
# Off by one on every case but nothing else wrong: compiles, runs, answers.
WRONG = {lang: src.replace("a+b", "a+b+1").replace("a + b", "a + b + 1").replace("d[0] + d[1]", "d[0] + d[1] + 1n")
         .replace("v[0] + v[1]", "v[0] + v[1] + 1") for lang, src in HONEST.items()}
assert all(WRONG[lang] != HONEST[lang] for lang in HONEST)
NOT_COMPILING = {
    "c": "int main(void) { return undefined_name; }\n",
    "cpp": "#include <vector>\nint main() { std::vector<int> v = 3; }\n",
    "java": "public class Main { public static void main(String[] a) { int x = \"s\"; } }\n",
    "javascript": "function (\n",
    "go": "package main\nfunc main() { x := 1 }\n",
    "rust": "fn main() { let x: i32 = \"s\"; }\n",
}
LOOPING = {
    "c": "int main(void){volatile unsigned long x=0;for(;;)x++;}\n",
    "cpp": "int main(){volatile unsigned long x=0;for(;;)x++;}\n",
    "java": "public class Main { public static void main(String[] a) { long x = 0; while (true) { x++; "
            "if (x == -1) break; } } }\n",
    "javascript": "let x = 0; for (;;) { x++; }\n",
    "go": "package main\nfunc main() { x := 0; for { x++ } }\n",
    "rust": "fn main() { let mut x: u64 = 1; loop { x = x.wrapping_mul(6364136223846793005).wrapping_add(1);\n"
            "  if x == 42 { println!(\"{}\", x); } } }\n",
}
LANGUAGES = list(HONEST)


def fenced(language: str, source: str) -> str:
    return f"Here is my solution.\n```{language}\n{source}```\n"


@pytest.fixture(scope="module", params=BACKENDS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    if request.param not in ("process", "docker"):
        pytest.skip("languages are tested on the process and docker backends")
    # Two workers per pool on a loaded 2-core box: a group's compiles queue behind each
    # other (a C++ compile in a 1-CPU container can take 10 s there), so calls may wait
    # longer for a worker than the default 30 s.
    env = {"ASSAY_SANDBOX": request.param, "ASSAY_SANDBOX_ACQUIRE_TIMEOUT_S": "300",
           "ASSAY_SANDBOX_IMAGE": os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest")}
    live = LiveServer(tmp_path_factory.mktemp(f"languages-{request.param}"), env=env)
    yield request.param, live
    live.stop()


@pytest.fixture(scope="module")
def client(server):
    with server[1].client(timeout=300) as c:
        yield c


def group(client, task: dict, responses: list[str]) -> list[dict]:
    reply = client.post("/v1/groups", json={"groups": [{"verifier": "code", "task": task, "responses": responses}]})
    assert reply.status_code == 200, reply.text
    return reply.json()["groups"][0]["results"]


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_language_rewards_honest_and_fails_wrong_broken_and_looping(client, server, language):
    task = {**SUM_TASK, "language": language}
    honest, wrong, broken, looping, honest_again = group(client, task, [
        fenced(language, HONEST[language]), fenced(language, WRONG[language]),
        fenced(language, NOT_COMPILING[language]), fenced(language, LOOPING[language]),
        fenced(language, HONEST[language])])
    assert (honest["verdict"], honest["reward"]) == ("correct", 1.0), honest
    assert (wrong["verdict"], wrong["reward"]) == ("incorrect", 0.0), wrong
    assert (broken["verdict"], broken["reward"]) == ("invalid_format", 0.0), broken
    assert broken["components"]["format"]["value"] == 0.0, broken["components"]
    # The compiler's message about the response's own code is what the policy is shown.
    feedback = broken["feedback"]
    assert feedback["format_error"] in ("compilation failed",), feedback
    assert feedback["compiler_message"].strip(), feedback
    assert (looping["verdict"], looping["reward"]) == ("timeout", 0.0), looping
    # The attack before it changed nothing for the honest answer after it.
    assert (honest_again["verdict"], honest_again["reward"]) == ("correct", 1.0), honest_again


def test_java_takes_its_file_name_from_code_not_comments_or_strings(client, server):
    # Round 15: the first "public class X" anywhere, a comment's included, named the file X.java.
    source = ("// A public class Helper would be tidier.\n/* public class Other */\nimport java.util.*;\n"
              "public class Solution {\n  static final String NOTE = \"public class Fake { }\";\n"
              "  public static void main(String[] x) {\n    Scanner s = new Scanner(System.in);\n"
              "    long a = s.nextLong(), b = s.nextLong();\n    System.out.println(a + b);\n  }\n}\n")
    honest, wrong = group(client, {**SUM_TASK, "language": "java"},
                          [fenced("java", source), fenced("java", source.replace("a + b", "a - b"))])
    assert (honest["verdict"], honest["reward"]) == ("correct", 1.0), honest
    assert (wrong["verdict"], wrong["reward"]) == ("incorrect", 0.0), wrong


def test_hidden_cases_stay_hidden_in_feedback(client, server):
    marker = "QZX-native-hidden-4471"
    task = {"language": "cpp", "io_cases": [{"stdin": f"{marker}\n", "stdout": "never\n"}], "time_limit_s": 1.0}
    echo = ('#include <bits/stdc++.h>\nint main(){std::string s;std::cin>>s;std::cout<<s<<"\\n";'
            'std::cerr<<s<<"\\n";return 3;}\n')
    attack, honest = group(client, task, [fenced("cpp", echo),
                                          fenced("cpp", '#include <cstdio>\nint main(){puts("never");}\n')])
    assert attack["verdict"] == "incorrect" and marker not in str(attack["feedback"]), attack["feedback"]
    assert (honest["verdict"], honest["reward"]) == ("correct", 1.0), honest


def test_memory_over_the_limit_is_not_rewarded(client, server):
    task = {"language": "cpp", "io_cases": [{"stdin": "", "stdout": "1\n"}], "time_limit_s": 2.0, "memory_mb": 128}
    hog = ("#include <bits/stdc++.h>\nint main(){std::vector<char> v(512u<<20, 1);long s=0;"
           "for(size_t i=0;i<v.size();i+=4096)s+=v[i];std::cout<<(s>0)<<\"\\n\";}\n")
    attack, honest = group(client, task, [fenced("cpp", hog),
                                          fenced("cpp", '#include <cstdio>\nint main(){puts("1");}\n')])
    assert attack["reward"] == 0.0 and attack["verdict"] in ("violation", "incorrect"), attack
    assert (honest["verdict"], honest["reward"]) == ("correct", 1.0), honest


# ------------------------------------------------------------------- special checkers

# Any x with x * x == n within 1e-6 is right: many answers, so a checker decides.
SQRT_CHECKER = r"""#include "testlib.h"
#include <cmath>
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    double n = inf.readDouble();
    double want = ans.readDouble();
    double got = ouf.readDouble();
    if (std::isnan(got)) quitf(_wa, "not a number");
    if (std::fabs(got * got - n) <= 1e-6 * std::max(1.0, n)) quitf(_ok, "root %.6f", got);
    if (std::fabs(got * got - n) <= 1.0) quitp(0.5, "close: %.3f vs %.3f", got, want);
    quitf(_wa, "expected about %.6f", want);
}
"""
SQRT_TASK = {"language": "cpp", "checker": {"language": "cpp", "source": SQRT_CHECKER},
             "io_cases": [{"stdin": "2\n", "stdout": "1.41421356\n"}, {"stdin": "9\n", "stdout": "3\n"}],
             "time_limit_s": 1.0}
ROOT = '#include <cstdio>\n#include <cmath>\nint main(){double n;scanf("%lf",&n);printf('
NEGATIVE_ROOT = ROOT + '"%.9f\\n",-sqrt(n));}\n'
SLOPPY_ROOT = ROOT + '"%.1f\\n",sqrt(n)+0.05);}\n'
WRONG_ROOT = '#include <cstdio>\nint main(){double n;scanf("%lf",&n);printf("%.3f\\n",n);}\n'


def test_a_testlib_checker_accepts_any_right_answer(client, server):
    # The negative root is not the answer file's text, but the checker accepts it.
    negative, wrong, sloppy = group(client, SQRT_TASK, [
        fenced("cpp", NEGATIVE_ROOT), fenced("cpp", WRONG_ROOT), fenced("cpp", SLOPPY_ROOT)])
    assert (negative["verdict"], negative["reward"]) == ("correct", 1.0), negative
    assert (wrong["verdict"], wrong["reward"]) == ("incorrect", 0.0), wrong
    assert (sloppy["verdict"], sloppy["reward"]) == ("incorrect", 0.0), sloppy


def test_checker_points_are_partial_credit_when_the_task_allows_it(client, server):
    task = {**SQRT_TASK, "partial_credit": True}
    (sloppy,) = group(client, task, [fenced("cpp", SLOPPY_ROOT)])
    assert sloppy["verdict"] == "incorrect" and 0.0 < sloppy["reward"] < 1.0, sloppy


def test_a_failing_checker_is_error_never_the_responses_fault(client, server):
    broken = {**SQRT_TASK, "checker": {"language": "cpp", "source":
              '#include "testlib.h"\nint main(int c, char* v[]){registerTestlibCmd(c, v);quitf(_fail, "bug");}\n'}}
    (result,) = group(client, broken, [fenced("cpp", NEGATIVE_ROOT)])
    assert result["verdict"] == "error", result
    assert result["evidence"]["error_cause"] == "checker_failed", result["evidence"]


def test_a_python_checker_and_a_python_candidate(client, server):
    checker = ("import sys\nn, got = float(open(sys.argv[1]).read()), open(sys.argv[2]).read().split()\n"
               "sys.exit(0 if len(got) == 1 and abs(float(got[0]) ** 2 - n) < 1e-6 else 1)\n")
    task = {"language": "python", "checker": {"language": "python", "source": checker},
            "io_cases": [{"stdin": "16\n", "stdout": "4\n"}], "time_limit_s": 2.0}
    negative, wrong = group(client, task, ["```python\nprint(-float(input()) ** 0.5)\n```",
                                           "```python\nprint(5)\n```"])
    assert (negative["verdict"], negative["reward"]) == ("correct", 1.0), negative
    assert wrong["verdict"] == "incorrect", wrong


def test_the_checker_source_is_hidden_and_a_broken_one_is_the_tasks_fault(client, server):
    reply = client.post("/v1/verify", json={"verifier": "code", "task": {
        **SQRT_TASK, "checker": {"language": "cpp", "source": "this is not C++"}},
        "response": fenced("cpp", NEGATIVE_ROOT)})
    assert reply.status_code == 422 and "checker" in reply.text, reply.text
    assert "this is not C++" not in reply.text


# ------------------------------------------------------------- compile once, versions

def test_a_group_of_identical_sources_compiles_once(client, server):
    source = HONEST["cpp"].replace("int main", "// group-once marker\nint main")
    results = group(client, {**SUM_TASK, "language": "cpp"}, [fenced("cpp", source)] * 16)
    assert all((r["verdict"], r["reward"]) == ("correct", 1.0) for r in results), results
    fresh = [r for r in results if not r["evidence"]["compile"]["compile_cached"]]
    assert len(fresh) == 1, [r["evidence"]["compile"] for r in results]


def test_versions_and_commands_are_reported(client, server):
    import time

    deadline = time.monotonic() + 120
    while True:
        verifiers = client.get("/v1/verifiers").json()
        languages = next(v for v in verifiers if v["name"] == "code")["languages"]
        if all(info["version"] != "not probed yet" for info in languages.values()) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert "-std=gnu++17" in languages["cpp"]["compile"] and "-O2" in languages["cpp"]["compile"]
    assert languages["cpp"]["version"].startswith("12."), languages["cpp"]
    assert "17" in languages["java"]["version"], languages["java"]
    assert "go1.19" in languages["go"]["version"], languages["go"]
    # Debian's rustc (the images' and scripts/install.sh's), on every backend: never a
    # rustup toolchain that happens to be first on the service's PATH.
    assert languages["rust"]["version"] == "rustc 1.63.0", languages["rust"]
    assert languages["rust"]["compile"].startswith("/usr/bin/rustc "), languages["rust"]
    assert languages["java"]["time_factor"] == 2.0
