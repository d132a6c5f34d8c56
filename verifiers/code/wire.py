"""Plain shapes and constants both sides of the code verifier's sandbox wall import.

Standard library only: the modules in `verifiers/code/inside/` (which run in the sandbox)
and the host modules (`runner.py`, `native.py`, ...) read these; neither side imports the
other's code. The targets name inside modules only to launch them.
"""

from __future__ import annotations

# Modules the candidate pool pre-imports so that honest solutions pay no import time
# for the usual standard library (the zygote imports them once; every job is a fork).
COMMON_MODULES = (
    "math",
    "re",
    "string",
    "collections",
    "itertools",
    "functools",
    "heapq",
    "bisect",
    "random",
    "copy",
    "fractions",
    "decimal",
    "statistics",
    "typing",
    "operator",
    "hashlib",
    "datetime",
)
MAX_EXPORTS = 256
AUDIT_MARKER = "[assay-audit] "
MAX_EXCEPTION_BASES = 8
# The kinds the candidate's audit hook records: the only audit kinds the host reads
# (anything else a candidate writes into its own report is ignored).
AUDIT_KINDS = frozenset({"network", "spawn", "kill", "introspection", "file_write", "tamper_file"})

# Entry points inside the sandbox and what their warm workers pre-import.
CANDIDATE_SERVE = "verifiers.code.inside.candidate:serve"
CANDIDATE_PROGRAM = "verifiers.code.inside.candidate:run_program"
GRADER_TARGET = "verifiers.code.inside.grader:grade"
SCAN_TARGET = "verifiers.code.inside.scan:serve"
CANDIDATE_PRELOAD = ("verifiers.code.inside.candidate", *COMMON_MODULES)
GRADER_PRELOAD = ("verifiers.code.inside.grader", *COMMON_MODULES)
SCAN_PRELOAD = ("verifiers.code.inside.scan",)
# Compiled languages (verifiers/code/inside/native.py): compile once, run per case.
NATIVE_COMPILE = "verifiers.code.inside.native:compile_source"
NATIVE_RUN = "verifiers.code.inside.native:run_program"
NATIVE_CASES = "verifiers.code.inside.cases:run_cases"
NATIVE_BUILD = "verifiers.code.inside.build:build_and_run"
NATIVE_PRELOAD = ("verifiers.code.inside.native", "verifiers.code.inside.cases", "verifiers.code.inside.build")

# testlib's exit codes (the checker's verdict), as judges read them.
CHECKER_OK = 0
CHECKER_WRONG = 1
CHECKER_PRESENTATION = 2
CHECKER_FAIL = 3
CHECKER_POINTS = 7
