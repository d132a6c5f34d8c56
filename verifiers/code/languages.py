"""The code verifier's languages other than Python: how each compiles and runs.

A judge's FAQ in code form (docs/languages.md says the same in words). Every command
runs inside the sandbox with absolute paths of Debian's packages; the host only builds
the argument lists. The toolchains come from Debian bookworm (scripts/install.sh on the
process backend, the runtime image on docker).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Memory a runtime reserves as address space without using it (JVM heap and class space,
# V8's code range, Go's arenas): their RLIMIT_AS is the task's memory plus this, and the
# memory limit is judged on the peak resident set of the whole process tree instead.
VIRTUAL_ALLOWANCE_MB = 3072


@dataclass(frozen=True)
class Language:
    name: str
    source: str  # the file the response's code is written to
    compile: tuple[str, ...] | None  # None: nothing to compile (the source is the artifact)
    artifacts: tuple[str, ...]  # glob patterns of what the compile leaves for the runs
    run: tuple[str, ...]  # `{memory_mb}` and `{main}` are filled in per task
    version: tuple[str, ...]  # a command that prints the toolchain's version
    time_factor: float = 1.0  # the task's time limit is multiplied by this
    executables: tuple[str, ...] = ()
    # True: RLIMIT_AS = the task's memory (C, C++, Rust); False: memory + VIRTUAL_ALLOWANCE_MB.
    address_space_limit: bool = True
    run_env: dict[str, str] = field(default_factory=dict)
    compile_env: dict[str, str] = field(default_factory=dict)
    # Threads count as processes for RLIMIT_NPROC: runtimes with helper threads need more.
    processes: int = 16
    # Words in stderr by which the runtime says it ran out of memory.
    out_of_memory: tuple[bytes, ...] = ()
    # The compiler finds its installation through /proc/self/exe (rustc 1.63 panics
    # without it): where a job has an empty /proc, its compile gets that one link.
    needs_own_exe: bool = False
    # Files of ours written beside the source for the compile ({name: text}); the compile
    # command names them.
    support_files: dict[str, str] = field(default_factory=dict)


# Real paths, not /usr/bin's alternatives: where a job has no /proc (the process backend),
# a launcher cannot find its own directory through /proc/self/exe.
JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
JAVA_ENV = {"LD_LIBRARY_PATH": f"{JAVA_HOME}/lib"}
GO_TOOLS = "/usr/lib/go/pkg/tool/linux_amd64"
GCC_FLAGS = ("-O2", "-pipe", "-fdiagnostics-color=never", "-fno-diagnostics-show-caret")
# A thread started without a stack size (`std::thread`, `pthread_create(..., NULL, ...)`):
# glibc sizes its stack from the stack limit, which the judge sets as large as the memory
# limit so that the main thread can recurse deep (inside/native.py), and the address-space
# limit cannot hold a second stack that size, so the thread would fail to start. Linked
# into every C and C++ program: such threads get the 8 MiB of a usual `ulimit -s` instead.
# Valid C and C++ (g++ compiles a .c file as C++, and defines _GNU_SOURCE itself).
THREAD_STACK_MB = 8
THREAD_STACK_FILE = "assay_thread_stack.c"
THREAD_STACK_SOURCE = f"""/* Assay: threads started without a stack size get {THREAD_STACK_MB} MiB
   (verifiers/code/languages.py). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>

__attribute__((constructor)) static void assay_default_thread_stack(void) {{
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return;
    if (pthread_attr_setstacksize(&attr, (size_t){THREAD_STACK_MB} << 20) == 0) pthread_setattr_default_np(&attr);
    pthread_attr_destroy(&attr);
}}
"""
C_SUPPORT = {THREAD_STACK_FILE: THREAD_STACK_SOURCE}

LANGUAGES: dict[str, Language] = {
    "c": Language(
        "c", "main.c", ("/usr/bin/gcc", "-std=gnu17", *GCC_FLAGS, "-o", "main", "main.c", THREAD_STACK_FILE, "-lm"),
        ("main",), ("./main",), ("/usr/bin/gcc", "-dumpfullversion"), executables=("main",),
        out_of_memory=(b"Cannot allocate memory",), support_files=C_SUPPORT),
    "cpp": Language(
        "cpp", "main.cpp", ("/usr/bin/g++", "-std=gnu++17", *GCC_FLAGS, "-o", "main", "main.cpp", THREAD_STACK_FILE),
        ("main",), ("./main",), ("/usr/bin/g++", "-dumpfullversion"), executables=("main",),
        out_of_memory=(b"std::bad_alloc",), support_files=C_SUPPORT),
    "rust": Language(
        "rust", "main.rs", ("/usr/bin/rustc", "--edition", "2021", "-O", "-C", "strip=symbols",
                            "-C", "codegen-units=4", "-o", "main", "main.rs"), ("main",),
        ("./main",), ("/usr/bin/rustc", "--version"), executables=("main",), processes=64,
        out_of_memory=(b"memory allocation of",), needs_own_exe=True),
    "go": Language(
        "go", "main.go",
        ("/bin/sh", "-c",
         f"{GO_TOOLS}/compile -p main -complete -o main.o main.go && {GO_TOOLS}/link -s -w -o main main.o"),
        ("main",), ("./main",), ("/usr/lib/go/bin/go", "version"), time_factor=1.5, executables=("main",),
        compile_env={"GOROOT": "/usr/lib/go"},
        address_space_limit=False, processes=64, run_env={"GOMEMLIMIT": "{memory_mb}MiB"},
        out_of_memory=(b"runtime: out of memory",)),
    "java": Language(
        "java", "{main}.java",
        (f"{JAVA_HOME}/bin/javac", "-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1", "-J-Xshare:auto", "-encoding",
         "UTF-8", "-nowarn", "{main}.java"), ("*.class",),
        (f"{JAVA_HOME}/bin/java", "-XX:+UseSerialGC", "-Xss64m", "-Xmx{memory_mb}m", "-Xshare:auto", "-cp", ".",
         "{main}"),
        (f"{JAVA_HOME}/bin/javac", "-version"), time_factor=2.0, address_space_limit=False, processes=64,
        compile_env=JAVA_ENV, run_env=JAVA_ENV,
        out_of_memory=(b"java.lang.OutOfMemoryError",)),
    "javascript": Language(
        "javascript", "main.js", ("/usr/bin/node", "--check", "main.js"), ("main.js",),
        ("/usr/bin/node", "--max-old-space-size={memory_mb}", "main.js"), ("/usr/bin/node", "--version"),
        time_factor=2.0, address_space_limit=False, processes=64,
        out_of_memory=(b"JavaScript heap out of memory",)),
    # Checkers may be Python programs too (a candidate's Python goes the `tests` way).
    "python": Language(
        "python", "main.py", ("/usr/bin/python3", "-I", "-m", "py_compile", "main.py"), ("main.py",),
        ("/usr/bin/python3", "-I", "-S", "main.py"), ("/usr/bin/python3", "--version"), time_factor=1.0,
        out_of_memory=(b"MemoryError",)),
}
# What a candidate may write in an io task (Python keeps its own, richer path).
COMPILED = ("c", "cpp", "java", "javascript", "go", "rust")

_JAVA_PUBLIC_CLASS = re.compile(r"\bpublic\s+(?:final\s+|abstract\s+)*class\s+([A-Za-z_$][A-Za-z0-9_$]{0,99})\b")


_JAVA_OPENERS = re.compile(r'//|/\*|"""|"|\'')
_JAVA_CLOSERS = {"//": "\n", "/*": "*/", '"""': '"""'}


def java_code_only(source: str) -> str:
    """The source with its comments and string and character literals blanked (linear: each skip
    jumps to its closer), so words in them are not read as code."""
    kept, pos = [], 0
    while (opener := _JAVA_OPENERS.search(source, pos)) is not None:
        kept.append(source[pos:opener.start()])
        token = opener.group(0)
        end = opener.end()
        if token in _JAVA_CLOSERS:
            close = source.find(_JAVA_CLOSERS[token], end)
            pos = len(source) if close < 0 else close + len(_JAVA_CLOSERS[token])
        else:  # a "string" or 'c' literal on one line, with backslash escapes
            while end < len(source) and source[end] not in (token, "\n"):
                end += 2 if source[end] == "\\" else 1
            pos = end + 1
        kept.append(" ")
    return "".join(kept) + source[pos:]


def main_name(language: Language, source: str) -> str:
    """Java: the public class's name (its file must be named after it), else Main. Only code
    counts: a comment or a string that says `public class X` names nothing (round 15)."""
    if language.name != "java":
        return "main"
    found = _JAVA_PUBLIC_CLASS.search(java_code_only(source))
    return found.group(1) if found else "Main"


def fill(parts: tuple[str, ...], **values: object) -> list[str]:
    return [part.format(**values) if "{" in part else part for part in parts]


def fill_env(env: dict[str, str], **values: object) -> dict[str, str]:
    return {key: value.format(**values) for key, value in env.items()}
