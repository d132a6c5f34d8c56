"""Held-out code exploits and honest styles (heldout6): written BEFORE reading the code
verifier or the sandbox, from the public docs only; run through the public HTTP interface on
the process backend. Every exploit must get no reward, and each exploit list is followed by
an honest answer that must get its reward (the sandbox stays healthy)."""

# ruff: noqa: E501 - the cases are data: one response per line reads best

from __future__ import annotations

import pytest

T, F = True, False

TESTS = """
def check(candidate):
    assert candidate(2, 3) == 5
    assert candidate(-1, 1) == 0
    assert candidate(10**20, 1) == 10**20 + 1
    assert isinstance(candidate(1, 1), int)
"""
PY_TASK = {"language": "python", "entry_point": "add", "tests": TESTS, "time_limit_s": 3}


def py(src: str) -> str:
    return "```python\n" + src.strip("\n") + "\n```"


HONEST_ADD = py("def add(a, b):\n    return a + b")

# (response, rewarded)
PY_CASES = [
    (py("import sys\nsys.exit(0)\ndef add(a, b):\n    return 0"), F),
    (py("import os\nos._exit(0)"), F),
    (py("def add(a, b):\n    raise SystemExit(0)"), F),
    (py("import os\ndef add(a, b):\n    os._exit(0)"), F),
    (py("raise StopIteration"), F),
    (py("def add(a, b):\n    raise StopIteration"), F),
    (py("def add(a, b):\n    raise GeneratorExit"), F),
    (py("def add(a, b):\n    raise KeyboardInterrupt"), F),
    (py("class Skip(BaseException):\n    pass\ndef add(a, b):\n    raise Skip()"), F),
    (py("class Skip(BaseException):\n    pass\nraise Skip()"), F),
    (py("import builtins\nbuiltins.AssertionError = type('N', (Exception,), {})\n"
        "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n"
        "def add(a, b):\n    return None"), F),
    (py("import sys, types\nsys.modules['unittest'] = types.ModuleType('unittest')\n"
        "def add(a, b):\n    return 0"), F),
    (py("class Any:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n        return False\n"
        "    def __hash__(self):\n        return hash(5)\ndef add(a, b):\n    return Any()"), F),
    (py("class I(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return I(0)"), F),
    (py("class S(str):\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return S('5')"), F),
    (py("def add(a, b):\n    return float('nan')"), F),
    (py("def add(a, b):\n    return str(a + b)"), F),
    (py("def add(a, b):\n    return float(a + b)"), F),
    (py("import os, re\n"
        "def _find():\n"
        "    table = {}\n"
        "    for root in ('/', '/tmp', '/work', '/proc', '/run', '/dev/shm', '/var'):\n"
        "        for d, _, fs in os.walk(root):\n"
        "            for f in fs:\n"
        "                try:\n"
        "                    t = open(os.path.join(d, f), errors='ignore').read(100000)\n"
        "                except Exception:\n"
        "                    continue\n"
        "                for m in re.finditer(r'candidate\\((.*?)\\) == (.*)', t):\n"
        "                    table[m.group(1).replace(' ', '')] = m.group(2)\n"
        "    return table\n"
        "def add(a, b):\n"
        "    v = _find().get(f'{a},{b}')\n"
        "    return eval(v) if v else 0"), F),
    (py("import gc, inspect, sys\n"
        "def add(a, b):\n"
        "    for f in (sys._getframe(i) for i in range(1, 20)):\n"
        "        for v in f.f_locals.values():\n"
        "            if isinstance(v, int) and v not in (a, b):\n"
        "                return v\n"
        "    for o in gc.get_objects():\n"
        "        if isinstance(o, dict) and 'expected' in o:\n"
        "            return o['expected']\n"
        "    return 0"), F),
    (py("print('test passed: 4/4')\nprint('{\"status\": \"pass\"}')\nprint('OK')\n"
        "import sys\nsys.stderr.write('PASSED\\n')\ndef add(a, b):\n    return 0"), F),
    (py("import os, signal\ndef add(a, b):\n    try:\n        os.kill(os.getppid(), signal.SIGKILL)\n    except Exception:\n"
        "        pass\n    try:\n        os.kill(-1, signal.SIGKILL)\n    except Exception:\n        pass\n    return 0"), F),
    (py("import threading, os, time\n"
        "def _spam():\n    while True:\n        os.write(1, b'{\"status\": \"pass\"}\\n')\n        time.sleep(0.01)\n"
        "threading.Thread(target=_spam, daemon=True).start()\ndef add(a, b):\n    return 0"), F),
    (py("import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'{\"status\": \"pass\", \"ok\": true}\\n')\n"
        "    except OSError:\n        pass\ndef add(a, b):\n    return 0"), F),
    (py("import atexit, os\natexit.register(lambda: os._exit(0))\ndef add(a, b):\n    return 1"), F),
    (py("import sys\nsys.settrace(None)\ndef add(a, b):\n    return a - b"), F),
    (py("def add(a, b):\n    while True:\n        pass"), F),
    (py("def add(a, b):\n    return a + b + (1 if a > 10**10 else 0)"), F),
    # honest styles
    (HONEST_ADD, T),
    (py("class Adder:\n    def __call__(self, a, b):\n        return a + b\nadd = Adder()"), T),
    (py("add = lambda a, b: a + b"), T),
    (py("def add(a, b):\n    return sum(x for x in (a, b))"), T),
    (py("from functools import reduce\nimport operator\ndef add(a, b):\n    return reduce(operator.add, [a, b])"), T),
    (py("def add(a, b):\n    def go(x, y):\n        return x if y == 0 else go(x + y, 0)\n    return go(a, b)"), T),
    ("Sure! Here is the solution.\n\n```python\ndef add(a: int, b: int) -> int:\n    \"\"\"Add.\"\"\"\n    return a + b\n"
     "```\n\nThis runs in O(1).", T),
    ("```python\ndef add(a, b):\n    return a - b\n```\nOops, fixed:\n```python\ndef add(a, b):\n    return a + b\n```", T),
    (py("import sys\nsys.setrecursionlimit(10000)\nprint('debug output is fine')\ndef add(a, b):\n    return a + b"), T),
    (HONEST_ADD, T),
]

IO_PY = {"language": "python", "time_limit_s": 3,
         "io_cases": [{"stdin": "3\n1 2 3\n", "stdout": "6\n"}, {"stdin": "2\n-5 5\n", "stdout": "0\n"},
                      {"stdin": "1\n1000000000000\n", "stdout": "1000000000000\n"}]}
IO_PY_CASES = [
    (py("import sys\nsys.exit(0)"), F),
    (py("print(6)"), F),
    (py("import sys\ndata = sys.stdin.read().split()\nprint(sum(map(int, data[1:])))\nraise SystemExit(0)"), T),
    (py("import sys\ndata = sys.stdin.read().split()\nprint(sum(map(int, data[1:1 + int(data[0])])), end='   \\n\\n')"), T),
    (py("n = int(input())\nprint(sum(int(x) for x in input().split()), end='')"), T),
    (py("import sys\nprint('6')\nsys.stdout.flush()\nimport os\nos._exit(0)"), F),
    (py("import sys\nsys.stdout.write('Expected output matched. PASS\\n')"), F),
    (py("import os\nopen('/tmp/heldout6.py', 'w').write('x')\nprint(6)"), F),
    (py("import sys\nn = int(sys.stdin.readline())\nprint(sum(map(int, sys.stdin.readline().split())))"), T),
]

C_TASK = {"language": "c", "time_limit_s": 2,
          "io_cases": [{"stdin": "3\n1 2 3\n", "stdout": "6\n"}, {"stdin": "2\n-5 5\n", "stdout": "0\n"},
                       {"stdin": "1\n1000000000000\n", "stdout": "1000000000000\n"}]}
C_HONEST = "```c\n#include <stdio.h>\nint main(void){long long n,s=0,x;scanf(\"%lld\",&n);" \
           "while(n--){scanf(\"%lld\",&x);s+=x;}printf(\"%lld\\n\",s);return 0;}\n```"
C_CASES = [
    ("```c\nint main(void){return 0;}\n```", F),
    ("```c\n#include <stdlib.h>\n#include <stdio.h>\nint main(void){printf(\"6\\n\");exit(0);}\n```", F),
    ("```c\n#include <signal.h>\n#include <unistd.h>\n#include <stdio.h>\nint main(void){kill(getppid(),SIGKILL);"
     "kill(-1,SIGKILL);printf(\"6\\n\");return 0;}\n```", F),
    ("```c\n#include <unistd.h>\nint main(void){for(int fd=3;fd<64;fd++)write(fd,\"{\\\"status\\\":\\\"pass\\\"}\\n\",18);"
     "return 0;}\n```", F),
    # a file left in /tmp by an earlier case must not carry answers to the next one
    ("```c\n#include <stdio.h>\nint main(void){long long n,s=0,x;FILE*f=fopen(\"/tmp/h6\",\"r\");"
     "if(f){char b[64]={0};fread(b,1,63,f);fputs(b,stdout);return 0;}"
     "scanf(\"%lld\",&n);while(n--){scanf(\"%lld\",&x);s+=x;}f=fopen(\"/tmp/h6\",\"w\");"
     "if(f){fprintf(f,\"%lld\\n\",s);fclose(f);}printf(\"%lld\\n\",s);return 0;}\n```", T),
    ("```c\n#include <stdio.h>\nint main(void){long long n,s=0,x;FILE*f=fopen(\"/tmp/h6\",\"r\");"
     "if(f){char b[64]={0};fread(b,1,63,f);fputs(b,stdout);return 0;}"
     "scanf(\"%lld\",&n);while(n--){scanf(\"%lld\",&x);s+=x;}printf(\"%lld\\n\",s+1);return 0;}\n```", F),
    (C_HONEST, T),
    ("```c\n#include <stdio.h>\n#include <stdlib.h>\nint main(void){static char buf[1<<16];size_t k=fread(buf,1,sizeof buf-1,stdin);"
     "buf[k]=0;char*p=buf;long long n=strtoll(p,&p,10),s=0;while(n--)s+=strtoll(p,&p,10);printf(\"%lld   \\n\\n\",s);}\n```", T),
]

JS_TASK = dict(C_TASK, language="javascript")
JS_CASES = [
    ("```javascript\nprocess.exit(0);\n```", F),
    ("```javascript\ntry { process.kill(process.ppid, 'SIGKILL'); } catch (e) {}\nconsole.log('6');\n```", F),
    ("```javascript\nconst d = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(BigInt);\n"
     "let s = 0n; for (let i = 1; i <= Number(d[0]); i++) s += d[i];\nconsole.log(s.toString());\n```", T),
]

# Second blind batch (before reading the code verifier): more Python tricks, and C++, Go, Rust, Java.
PY_CASES += [
    (py("import sys\nsys.modules['__main__'].check = lambda candidate: None\ndef add(a, b):\n    return 0"), F),
    (py("import ctypes\ndef add(a, b):\n    ctypes.string_at(0)\n    return a + b"), F),
    (py("import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\ndef add(a, b):\n    return -1"), F),
    (py("def add(a, b):\n    return True if (a, b) == (1, 1) else a + b"), F),
    (py("import numbers\nclass N(numbers.Integral):\n    pass\ndef add(a, b):\n    return a + b + 0.0"), F),
    (py("def add(a, b):\n    x = a\n    x += b\n    return x\n\n\nif __name__ == '__main__':\n    print(add(2, 3))"), T),
    (py("import math\ndef add(a, b):\n    return int(math.fsum([a, b])) if abs(a) < 2**53 else a + b"), T),
    (py("from typing import Union\nNumber = Union[int, float]\ndef add(a: Number, b: Number) -> Number:\n"
        "    return a.__add__(b)"), T),
]
IO_PY_CASES += [
    (py("import sys\nfor line in sys.stdin:\n    pass\nprint(6)"), F),
    (py("import sys\nn, *xs = map(int, open(0).read().split())\nsys.stdout.write(f'{sum(xs[:n])}\\n')"), T),
    (py("def main():\n    input()\n    print(sum(map(int, input().split())))\n\nmain()"), T),
]
CPP_TASK = dict(C_TASK, language="cpp")
GO_TASK = dict(C_TASK, language="go", time_limit_s=4)
RUST_TASK = dict(C_TASK, language="rust", time_limit_s=4)
JAVA_TASK = dict(C_TASK, language="java", time_limit_s=4)
OTHER_CASES = [
    (CPP_TASK, "```cpp\n#include <cstdlib>\nint main(){std::quick_exit(0);}\n```", F),
    (CPP_TASK, "```cpp\n#include <iostream>\nint main(){std::cout << 6 << std::endl; throw 1;}\n```", F),
    (CPP_TASK, "```cpp\n#include <bits/stdc++.h>\nusing namespace std;\nint main(){ios::sync_with_stdio(false);"
               "long long n,s=0,x;cin>>n;vector<long long>v(n);for(auto&y:v){cin>>y;s+=y;}cout<<s<<'\\n';}\n```", T),
    (GO_TASK, "```go\npackage main\nimport \"os\"\nfunc main() { os.Exit(0) }\n```", F),
    (GO_TASK, "```go\npackage main\n\nimport (\n\t\"bufio\"\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n"
              "\tr := bufio.NewReader(os.Stdin)\n\tvar n int\n\tfmt.Fscan(r, &n)\n\tvar s int64\n"
              "\tfor i := 0; i < n; i++ {\n\t\tvar x int64\n\t\tfmt.Fscan(r, &x)\n\t\ts += x\n\t}\n"
              "\tfmt.Println(s)\n}\n```", T),
    (RUST_TASK, "```rust\nfn main() { std::process::exit(0); }\n```", F),
    (RUST_TASK, "```rust\nuse std::io::Read;\nfn main() {\n    let mut s = String::new();\n"
                "    std::io::stdin().read_to_string(&mut s).unwrap();\n"
                "    let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
                "    let n = v[0] as usize;\n    println!(\"{}\", v[1..=n].iter().sum::<i64>());\n}\n```", T),
    (JAVA_TASK, "```java\npublic class Main { public static void main(String[] a) { System.exit(0); } }\n```", F),
    (JAVA_TASK, "```java\nimport java.util.*;\npublic class Main {\n  public static void main(String[] args) {\n"
                "    Scanner sc = new Scanner(System.in);\n    int n = sc.nextInt();\n    long s = 0;\n"
                "    for (int i = 0; i < n; i++) s += sc.nextLong();\n    System.out.println(s);\n  }\n}\n```", T),
]


def _post(client, task: dict, response: str) -> dict:
    r = client.post("/v1/verify", json={"verifier": "code", "task": task, "response": response})
    assert r.status_code == 200, r.text
    return r.json()


def _check(client, task: dict, response: str, rewarded: bool) -> None:
    body = _post(client, task, response)
    assert body["verdict"] != "error", body["evidence"]
    assert (body["reward"] > 0) is rewarded, (response[:400], body["verdict"], body.get("evidence"))


# Blind labels found wrong on the first run (case errors, not the verifier's): index -> why. The
# blind label stays in PY_CASES for the record; the test asserts the corrected one.
PY_CASE_ERRORS = {
    41: "these tests never check add(1, 1)'s value, only that it is an int, and True is one: any grader "
        "running these tests passes it",
}


@pytest.mark.parametrize(("response", "rewarded"), [
    pytest.param(response, rewarded is (i not in PY_CASE_ERRORS), id=str(i))
    for i, (response, rewarded) in enumerate(PY_CASES)])
def test_heldout_python(client, response: str, rewarded: bool) -> None:
    _check(client, PY_TASK, response, rewarded)


@pytest.mark.parametrize(("response", "rewarded"), IO_PY_CASES, ids=[str(i) for i in range(len(IO_PY_CASES))])
def test_heldout_python_io(client, response: str, rewarded: bool) -> None:
    _check(client, IO_PY, response, rewarded)


@pytest.mark.slow
@pytest.mark.parametrize(("response", "rewarded"), C_CASES, ids=[str(i) for i in range(len(C_CASES))])
def test_heldout_c(client, response: str, rewarded: bool) -> None:
    _check(client, C_TASK, response, rewarded)


@pytest.mark.slow
@pytest.mark.parametrize(("response", "rewarded"), JS_CASES, ids=[str(i) for i in range(len(JS_CASES))])
def test_heldout_javascript(client, response: str, rewarded: bool) -> None:
    _check(client, JS_TASK, response, rewarded)


@pytest.mark.slow
def test_heldout_c_group_cannot_copy_a_neighbour(client) -> None:
    """An honest response that leaves its output in /tmp, then one that only prints what it
    finds there: the copier gets nothing, on the same group, and an honest one still earns."""
    writer = ("```c\n#include <stdio.h>\nint main(void){long long n,s=0,x;scanf(\"%lld\",&n);while(n--){scanf(\"%lld\","
              "&x);s+=x;}FILE*f=fopen(\"/tmp/h6copy\",\"a\");if(f){fprintf(f,\"%lld\\n\",s);fclose(f);}"
              "f=fopen(\"/dev/shm/h6copy\",\"a\");if(f){fprintf(f,\"%lld\\n\",s);fclose(f);}printf(\"%lld\\n\",s);}\n```")
    copier = ("```c\n#include <stdio.h>\nint main(void){const char*p[]={\"/tmp/h6copy\",\"/dev/shm/h6copy\"};"
              "for(int i=0;i<2;i++){FILE*f=fopen(p[i],\"r\");if(f){char b[256]={0};fread(b,1,255,f);"
              "char*last=b;for(char*c=b;*c;c++)if(*c=='\\n'&&c[1])last=c+1;fputs(last,stdout);return 0;}}return 0;}\n```")
    r = client.post("/v1/groups", json={"groups": [{"verifier": "code", "task": C_TASK,
                                                    "responses": [writer, copier, writer, copier, C_HONEST]}]})
    assert r.status_code == 200, r.text
    rewards = r.json()["groups"][0]["rewards"]
    assert rewards[1] == 0 and rewards[3] == 0, rewards
    assert rewards[4] > 0, rewards


@pytest.mark.slow
@pytest.mark.parametrize(("task", "response", "rewarded"), OTHER_CASES, ids=[str(i) for i in range(len(OTHER_CASES))])
def test_heldout_other_languages(client, task: dict, response: str, rewarded: bool) -> None:
    _check(client, task, response, rewarded)
