"""Compiled languages through the service (HTTP) against the same programs compiled and
run bare, with the same parallelism; and a group of 16 identical C++ sources.

    .venv/bin/python bench/code_languages.py [--backend process] [--solutions 4] [--problems 2]
        [--cases 5] [--parallel 2] [--languages c,cpp,java,javascript,go,rust]

Each language: N solutions of each of M problems (sum of pairs, `cases` cases each); every
one of the N x M sources is distinct (a comment), so neither side compiles one twice.
Service side: a real `assay serve` (subprocess, loopback HTTP, SQLite audit store) on the
chosen sandbox backend with `--parallel` warm workers per pool (ASSAY_SANDBOX_WORKERS),
sent one `POST /v1/groups` with the M groups of N responses. Bare side: the same compile
command and the same run command per case as plain subprocesses in a temporary directory,
no sandbox, `--parallel` at a time, with the environment a sandbox job gets (PATH, LANG,
HOME, TMPDIR and the language's own variables), not this shell's: a host's variables can
slow a toolchain down (NODE_EXTRA_CA_CERTS makes every `node` start load certificates).
Each bare process gets a session of its own, as each sandbox worker has (bwrap
--new-session): with the kernel's autogroup scheduling on, a session is a CPU share, and
bare processes left in the benchmark's one session got half the CPU of the sandboxed ones
on a loaded machine.
Service and bare alternate for `--rounds` rounds per language; the best round of each
is reported (other work on a shared machine drifts). Prints seconds and the ratio
(target <= 1.5x).
Last, one group of 16 identical C++ sources (one compile expected) is timed against one
bare compile and 16 runs of every case.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service.testing.live import LiveServer  # noqa: E402
from verifiers.code.languages import LANGUAGES, fill, fill_env, main_name  # noqa: E402

# What a sandbox job's PATH is (sandboxes/inside/worker.py).
JOB_PATH = "/usr/local/bin:/usr/bin:/bin"

SOURCES = {
    "c": '#include <stdio.h>\nint main(void){long long a,b;while(scanf("%lld %lld",&a,&b)==2)printf("%lld\\n",a+b);'
         'return 0;}\n',
    "cpp": '#include <bits/stdc++.h>\nint main(){long long a,b;while(std::cin>>a>>b)std::cout<<a+b<<"\\n";}\n',
    "java": "import java.util.*;\npublic class Main { public static void main(String[] x) {\n"
            "Scanner s = new Scanner(System.in); while (s.hasNextLong()) { long a = s.nextLong(), b = s.nextLong();\n"
            "System.out.println(a + b); } } }\n",
    "javascript": "const d = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(BigInt);\n"
                  "const o = []; for (let i = 0; i + 1 < d.length; i += 2) o.push((d[i] + d[i + 1]).toString());\n"
                  "console.log(o.join('\\n'));\n",
    "go": 'package main\nimport "fmt"\nfunc main() { var a, b int64\n'
          '  for { if _, e := fmt.Scan(&a, &b); e != nil { break }; fmt.Println(a + b) } }\n',
    "rust": "use std::io::*;\nfn main() { let mut s = String::new(); stdin().read_to_string(&mut s).unwrap();\n"
            "  let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
            "  for p in v.chunks(2) { println!(\"{}\", p[0] + p[1]); } }\n",
}


def problem(index: int, cases: int) -> list[dict[str, str]]:
    out = []
    for case in range(cases):
        pairs = [(index * 1000 + case * 7 + k, k * k - index) for k in range(50)]
        out.append({"stdin": "\n".join(f"{a} {b}" for a, b in pairs) + "\n",
                    "stdout": "\n".join(str(a + b) for a, b in pairs) + "\n"})
    return out


def variant(language: str, tag: str) -> str:
    return f"// solution {tag}\n{SOURCES[language]}"


def task(language: str, cases: list[dict[str, str]]) -> dict:
    return {"language": language, "io_cases": cases, "time_limit_s": 5}


def fenced(language: str, source: str) -> str:
    return f"```{language}\n{source}```"


def bare(language: str, source: str, cases: list[dict[str, str]], compile_it: bool = True,
         work: str | None = None) -> bool:
    """Compile (unless `compile_it` is False: `work` holds the program) and run every case."""
    lang = LANGUAGES[language]
    main = main_name(lang, source)
    with tempfile.TemporaryDirectory() as tmp:
        work = work or tmp
        job_env = {"PATH": JOB_PATH, "LANG": "C.UTF-8", "HOME": work, "TMPDIR": work}
        if compile_it:
            # The same files the sandbox's compile gets: ours (languages.py) beside the source.
            for name, text in {**lang.support_files, lang.source.format(main=main): source}.items():
                with open(os.path.join(work, name), "w") as f:
                    f.write(text)
            if lang.compile:
                subprocess.run(fill(lang.compile, main=main), cwd=work, check=True, capture_output=True,
                               env={**job_env, **fill_env(lang.compile_env)}, start_new_session=True)
        ok = True
        for case in cases:
            run_env = {**job_env, **fill_env(lang.run_env, memory_mb=512, main=main)}
            got = subprocess.run(fill(lang.run, memory_mb=512, main=main), cwd=work, env=run_env,
                                 input=case["stdin"].encode(), capture_output=True, check=True,
                                 start_new_session=True).stdout
            ok = ok and got.split() == case["stdout"].encode().split()
        return ok


def post_groups(client, groups: list[dict]) -> list[list[dict]]:
    reply = client.post("/v1/groups", json={"groups": groups})
    reply.raise_for_status()
    return [group["results"] for group in reply.json()["groups"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="process")
    parser.add_argument("--image", default=os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest"))
    parser.add_argument("--solutions", type=int, default=4)
    parser.add_argument("--problems", type=int, default=2)
    parser.add_argument("--cases", type=int, default=5)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--languages", default="c,cpp,java,javascript,go,rust")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    languages = args.languages.split(",")
    env = {"ASSAY_SANDBOX": args.backend, "ASSAY_SANDBOX_WORKERS": str(args.parallel),
           "ASSAY_SANDBOX_IMAGE": args.image, "ASSAY_SANDBOX_ACQUIRE_TIMEOUT_S": "600"}
    print(f"backend={args.backend} solutions={args.solutions} problems={args.problems} cases={args.cases} "
          f"parallel={args.parallel} load_average={tuple(round(x, 2) for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.parallel) as pool:
        server = LiveServer(Path(tmp), env=env)
        try:
            with server.client(timeout=1800) as client:
                # Warm-up, not timed: each language's pools start and the disk cache fills.
                for language in languages:
                    warm = post_groups(client, [{"verifier": "code", "task": task(language, problem(99, 1)),
                                                 "responses": [fenced(language, variant(language, "warm"))]}])
                    assert warm[0][0]["verdict"] == "correct", warm
                    bare(language, variant(language, "warm-bare"), problem(99, 1))
                for language in languages:
                    jobs = [(p, s) for p in range(args.problems) for s in range(args.solutions)]
                    service_s, bare_s = [], []
                    for _ in range(args.rounds):
                        stamp = time.time_ns()
                        groups = [{"verifier": "code", "task": task(language, problem(p, args.cases)),
                                   "responses": [fenced(language, variant(language, f"{stamp} {p} {s}"))
                                                 for s in range(args.solutions)]} for p in range(args.problems)]
                        started = time.perf_counter()
                        results = post_groups(client, groups)
                        service_s.append(time.perf_counter() - started)
                        verdicts = {r["verdict"] for group in results for r in group}
                        assert verdicts == {"correct"}, [r.get("evidence") for group in results for r in group][:2]
                        started = time.perf_counter()
                        oks = list(pool.map(lambda job, language=language, stamp=stamp: bare(
                            language, variant(language, f"{stamp} bare {job[0]} {job[1]}"),
                            problem(job[0], args.cases)), jobs))
                        bare_s.append(time.perf_counter() - started)
                        assert all(oks)
                    print(f"{language:10s} {len(jobs)} responses x {args.cases} cases: "
                          f"service {min(service_s):6.2f} s, "
                          f"bare {min(bare_s):6.2f} s, ratio {min(service_s) / min(bare_s):4.2f}x  "
                          f"(rounds: service {' '.join(f'{x:.2f}' for x in service_s)}, "
                          f"bare {' '.join(f'{x:.2f}' for x in bare_s)})  load={os.getloadavg()[0]:.2f}", flush=True)
                source = variant("cpp", f"{time.time_ns()} identical")
                cases = problem(1, args.cases)
                started = time.perf_counter()
                results = post_groups(client, [{"verifier": "code", "task": task("cpp", cases),
                                                "responses": [fenced("cpp", source)] * 16}])[0]
                group_s = time.perf_counter() - started
                assert all(r["verdict"] == "correct" for r in results)
                compiles = sum(not r["evidence"]["compile"]["compile_cached"] for r in results)
                started = time.perf_counter()
                with tempfile.TemporaryDirectory() as work:
                    assert bare("cpp", source, [], work=work)
                    assert all(pool.map(lambda _: bare("cpp", source, cases, compile_it=False, work=work), range(16)))
                bare1_s = time.perf_counter() - started
                print(f"group of 16 identical C++ sources: service {group_s:.2f} s, compiles run: {compiles}; "
                      f"bare 1 compile + 16 x {args.cases} runs {bare1_s:.2f} s (ratio {group_s / bare1_s:.2f}x)")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
