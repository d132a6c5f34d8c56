"""Compiled languages through the code verifier against the same programs compiled and
run bare, with the same parallelism; and a group of 16 identical C++ sources.

    .venv/bin/python bench/code_languages.py [--backend process] [--solutions 4] [--problems 2]
        [--cases 5] [--parallel 2] [--languages c,cpp,java,javascript,go]

Each language: N distinct solutions (each source differs by a comment, so none is served
from the compile cache) of M problems (sum of pairs, with `cases` cases each). Service
side: `CodeVerifier.verify` per response on the chosen sandbox backend (the work a
`/v1/groups` call does, without HTTP and the audit store). Bare side: the same compile
command and the same run command per case as plain subprocesses in a temporary directory,
no sandbox. Prints seconds and the ratio (target <= 1.5x).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from sandboxes.factory import create_sandbox
from verifiers.base import Verdict, VerifyContext
from verifiers.code import native
from verifiers.code.languages import LANGUAGES, fill, fill_env, main_name
from verifiers.registry import get

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
COMMENT = {"python": "#"}


def problem(index: int, cases: int) -> list[dict[str, str]]:
    out = []
    for case in range(cases):
        pairs = [(index * 1000 + case * 7 + k, k * k - index) for k in range(50)]
        out.append({"stdin": "\n".join(f"{a} {b}" for a, b in pairs) + "\n",
                    "stdout": "\n".join(str(a + b) for a, b in pairs) + "\n"})
    return out


def variant(language: str, index: int) -> str:
    return f"// solution {index}\n{SOURCES[language]}"


def bare(language: str, source: str, cases: list[dict[str, str]]) -> bool:
    lang = LANGUAGES[language]
    main = main_name(lang, source)
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, lang.source.format(main=main)), "w") as f:
            f.write(source)
        env = {**os.environ, **fill_env(lang.compile_env)}
        if lang.compile:
            subprocess.run(fill(lang.compile, main=main), cwd=work, env=env, check=True, capture_output=True)
        ok = True
        for case in cases:
            run_env = {**os.environ, **fill_env(lang.run_env, memory_mb=512, main=main)}
            got = subprocess.run(fill(lang.run, memory_mb=512, main=main), cwd=work, env=run_env,
                                 input=case["stdin"].encode(), capture_output=True, check=True).stdout
            ok = ok and got.split() == case["stdout"].encode().split()
        return ok


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="process")
    parser.add_argument("--image", default=os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest"))
    parser.add_argument("--solutions", type=int, default=4)
    parser.add_argument("--problems", type=int, default=2)
    parser.add_argument("--cases", type=int, default=5)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--languages", default="c,cpp,java,javascript,go")
    args = parser.parse_args()
    box = create_sandbox(args.backend, workers=args.parallel, image=args.image)
    verifier, ctx = get("code"), VerifyContext(sandbox=box)
    verifier.warm(ctx)
    print(f"backend={args.backend} solutions={args.solutions} problems={args.problems} cases={args.cases} "
          f"parallel={args.parallel} load_average={os.getloadavg()}")
    with ThreadPoolExecutor(args.parallel) as pool:
        # Warm-up: one of each, not timed (first compiles fill the disk cache for both sides).
        for language in args.languages.split(","):
            task = verifier.parse_task({"language": language, "io_cases": problem(99, 1), "time_limit_s": 5})
            verifier.verify(task, f"```{language}\n{variant(language, -1)}```", ctx)
            bare(language, variant(language, -2), problem(99, 1))
        for language in args.languages.split(","):
            jobs = [(p, s) for p in range(args.problems) for s in range(args.solutions)]
            tasks = {p: verifier.parse_task({"language": language, "io_cases": problem(p, args.cases),
                                             "time_limit_s": 5}) for p in range(args.problems)}
            stamp = time.time_ns()
            started = time.perf_counter()
            outcomes = list(pool.map(lambda job, language=language, stamp=stamp, tasks=tasks: verifier.verify(
                tasks[job[0]], f"```{language}\n{variant(language, stamp + job[1])}```", ctx), jobs))
            service_s = time.perf_counter() - started
            assert all(o.verdict == Verdict.correct for o in outcomes), [o.evidence for o in outcomes][:2]
            started = time.perf_counter()
            def run_bare(job: tuple[int, int], language: str = language, stamp: int = stamp) -> bool:
                return bare(language, variant(language, stamp + 10_000 + job[1]), problem(job[0], args.cases))

            results = list(pool.map(run_bare, jobs))
            bare_s = time.perf_counter() - started
            assert all(results)
            print(f"{language:10s} {len(jobs)} responses x {args.cases} cases: service {service_s:6.2f} s, "
                  f"bare {bare_s:6.2f} s, ratio {service_s / bare_s:4.2f}x  load={os.getloadavg()[0]:.2f}")
        before = native.CACHE.compiles
        source = variant("cpp", time.time_ns())
        task = verifier.parse_task({"language": "cpp", "io_cases": problem(1, args.cases), "time_limit_s": 5})
        started = time.perf_counter()
        outcomes = list(pool.map(lambda _: verifier.verify(task, f"```cpp\n{source}```", ctx), range(16)))
        group_s = time.perf_counter() - started
        assert all(o.verdict == Verdict.correct for o in outcomes)
        print(f"group of 16 identical C++ sources: {group_s:.2f} s, compiles run: {native.CACHE.compiles - before}")
    box.close()


if __name__ == "__main__":
    main()
