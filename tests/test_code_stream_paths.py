"""Programs that open their streams by path (`/dev/stdin`, `/dev/fd/0`, `/proc/self/fd/0`,
`/dev/stdout`) instead of using fds 0 and 1, on every backend of ASSAY_TEST_BACKENDS.

Contest code does this often (`fs.readFileSync('/dev/stdin')` in JavaScript above all).
Those paths lead through /proc/self/fd; a process-backend job's /proc is its own, and its
`self/fd` leads to the case's stream files (verifiers/code/inside/streams.py). Before
round 16 every program here got 0 on the process backend. Also here: what a program does
with those paths stays within its own case, and the job's /proc stays as the sandbox made it.
"""

from __future__ import annotations

import pytest

from tests.conftest import verify_program as judge
from verifiers.base import Verdict, VerifyContext

pytestmark = pytest.mark.slow

SUM = {"io_cases": [{"stdin": "2 3\n", "stdout": "5\n"}, {"stdin": "-7 10", "stdout": "3\n"},
                    {"stdin": "40\n2\n", "stdout": "42\n"}], "time_limit_s": 3.0, "memory_mb": 256}

BY_PATH = {
    "javascript /dev/stdin and /dev/stdout":
        ("javascript", "const fs = require('fs');\n"
                       "const [a, b] = fs.readFileSync('/dev/stdin', 'utf8').trim().split(/\\s+/).map(Number);\n"
                       "fs.writeFileSync('/dev/stdout', `${a + b}\\n`);\n"),
    "javascript /dev/fd/0":
        ("javascript", "const d = require('fs').readFileSync('/dev/fd/0').toString().trim().split(/\\s+/);\n"
                       "console.log(Number(d[0]) + Number(d[1]));\n"),
    "python /dev/stdin":
        ("python", "a, b = map(int, open('/dev/stdin').read().split())\nprint(a + b)\n"),
    "c /proc/self/fd/0":
        ("c", "#include <stdio.h>\nint main(void){FILE *in = fopen(\"/proc/self/fd/0\", \"r\");long long a, b;\n"
              "if (!in || fscanf(in, \"%lld %lld\", &a, &b) != 2) return 1;\nprintf(\"%lld\\n\", a + b);return 0;}\n"),
    "cpp ifstream and ofstream":
        ("cpp", "#include <fstream>\nint main(){std::ifstream in(\"/dev/stdin\");std::ofstream out(\"/dev/stdout\");\n"
                "long long a, b;in >> a >> b;out << a + b << \"\\n\";}\n"),
    "go os.Open":
        ("go", "package main\nimport (\"bufio\"; \"fmt\"; \"os\")\nfunc main() {\n"
               "  in, err := os.Open(\"/dev/stdin\"); if err != nil { os.Exit(1) }\n"
               "  out, err := os.OpenFile(\"/dev/stdout\", os.O_WRONLY, 0); if err != nil { os.Exit(1) }\n"
               "  var a, b int64; fmt.Fscan(bufio.NewReader(in), &a, &b); fmt.Fprintln(out, a+b) }\n"),
    "rust File::open":
        ("rust", "use std::io::Read;\nfn main() { let mut s = String::new();\n"
                 "  std::fs::File::open(\"/dev/stdin\").unwrap().read_to_string(&mut s).unwrap();\n"
                 "  let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
                 "  println!(\"{}\", v[0] + v[1]); }\n"),
    "java FileInputStream":
        ("java", "import java.io.*;\nimport java.util.*;\npublic class Main {\n"
                 "  public static void main(String[] x) throws Exception {\n"
                 "    Scanner in = new Scanner(new FileInputStream(\"/dev/stdin\"));\n"
                 "    PrintStream out = new PrintStream(new FileOutputStream(\"/dev/stdout\"));\n"
                 "    out.println(in.nextLong() + in.nextLong()); out.flush(); } }\n"),
}


@pytest.fixture(scope="module")
def ctx(sandbox) -> VerifyContext:
    return VerifyContext(sandbox=sandbox, reveal_hidden=True)



@pytest.mark.parametrize("label", list(BY_PATH))
def test_a_program_that_opens_its_streams_by_path_gets_its_reward(ctx, label):
    language, code = BY_PATH[label]
    outcome, reward = judge(ctx, SUM, language, code)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence
    wrong, reward = judge(ctx, SUM, language, code.replace("a + b", "a - b").replace("a+b", "a-b")
                          .replace("v[0] + v[1]", "v[0] - v[1]").replace("in.nextLong() + in", "in.nextLong() - in")
                          .replace("Number(d[0]) + Number", "Number(d[0]) - Number"))
    assert (wrong.verdict, reward) == (Verdict.incorrect, 0.0), wrong.evidence


def test_writes_by_descriptor_and_by_path_arrive_in_order(ctx):
    # Both reach one stream: a path that opened anything else would reorder or lose a line.
    code = ("#include <stdio.h>\nint main(void){for (int i = 0; i < 3; i++) {printf(\"fd %d\\n\", i);fflush(stdout);\n"
            "FILE *f = fopen(\"/dev/stdout\", \"w\");if (!f) return 1;fprintf(f, \"path %d\\n\", i);fclose(f);\n"
            "fprintf(stderr, \"err %d\\n\", i);}return 0;}\n")
    expected = "".join(f"fd {i}\npath {i}\n" for i in range(3))
    outcome, reward = judge(ctx, {"io_cases": [{"stdin": "", "stdout": expected}], "time_limit_s": 2.0}, "c", code)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence


def test_what_a_program_leaves_at_its_stream_paths_is_gone_for_the_next_case(ctx):
    # Case 1 stashes its input beside its stream files (and wherever else the link leads);
    # case 2, with no input, would print the stash if anything of case 1 were left.
    stash = ("const fs = require('fs');\nconst d = fs.readFileSync('/dev/stdin', 'utf8').trim();\n"
             "const places = ['/proc/self/fd/stash', '/dev/fd/stash', '/proc/self/fd/0.keep'];\n"
             "if (d) { for (const p of places) { try { fs.writeFileSync(p, d); } catch (e) {} } console.log(d); }\n"
             "else { let got = 'nothing';\n"
             "  for (const p of places) { try { got = fs.readFileSync(p, 'utf8'); break; } catch (e) {} }\n"
             "  console.log(got); }\n")
    task = {"io_cases": [{"stdin": "41\n", "stdout": "41\n"}, {"stdin": "", "stdout": "nothing\n"}],
            "time_limit_s": 3.0}
    outcome, reward = judge(ctx, task, "javascript", stash)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence


def test_a_program_cannot_change_the_jobs_proc(ctx):
    probe = ("import os\nresults = []\n"
             "for change in (lambda: os.unlink('/proc/self/fd'), lambda: os.symlink('/', '/proc/self/root'),\n"
             "               lambda: os.mkdir('/proc/1'), lambda: os.chmod('/proc', 0o777)):\n"
             "    try:\n        change()\n        results.append('changed')\n"
             "    except OSError:\n        results.append('refused')\n"
             "print(' '.join(results))\nprint(int(open('/dev/stdin').read()) * 2)\n")
    task = {"io_cases": [{"stdin": "21\n", "stdout": "refused refused refused refused\n42\n"}], "time_limit_s": 2.0}
    outcome, reward = judge(ctx, task, "python", probe)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence
