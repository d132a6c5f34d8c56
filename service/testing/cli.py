"""The `assay` command run inside the test's own process: `service.cli.main(argv)` under the
environment a subprocess would get, with its exit code and what it printed.

For tests of what a command does (its exit code, its output, what it changed in the
database) where starting a process is not what is tested: an interpreter and the service's
imports cost 1-2 s of CPU a call, which a test that runs the command twenty times pays
twenty times. `python -m service.cli` and the `assay` script are `sys.exit(main())`, so the
command is the same code; each file that uses this keeps at least one real subprocess run."""

from __future__ import annotations

import contextlib
import gc
import io
import os
import subprocess
import threading
from collections.abc import Mapping, Sequence

_ONE_AT_A_TIME = threading.Lock()  # the environment is the process's own


def run_cli(args: Sequence[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`assay ARGS` with exactly the `ASSAY_*` settings of `env` (the others set here are
    hidden meanwhile, as a subprocess given `env` would not see them)."""
    from service.cli import main

    out, err = io.StringIO(), io.StringIO()
    with _ONE_AT_A_TIME:
        saved = {name: value for name, value in os.environ.items() if name.startswith("ASSAY_")}
        try:
            for name in saved:
                del os.environ[name]
            os.environ.update({name: value for name, value in env.items() if name.startswith("ASSAY_")})
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(list(args))
                except SystemExit as exc:  # argparse refusing the arguments
                    code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        finally:
            for name in [name for name in os.environ if name.startswith("ASSAY_")]:
                del os.environ[name]
            os.environ.update(saved)
        gc.collect()  # the command's store: its pooled connections close with it
    return subprocess.CompletedProcess(["assay", *args], code, out.getvalue(), err.getvalue())
