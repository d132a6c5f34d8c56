"""A call's result larger than the socket between the job and its supervisor.

A job writes its result frame on its channel and exits at once; with a frame larger than
the socket's buffer (about 200 KB), the last part is still in the socket when the job has
gone. The supervisor must read it to the end (bounded by the frame limits), never report
the call as one that did not return. Through the public sandbox API, on each backend."""

from __future__ import annotations

import pytest

from sandboxes.base import Limits
from sandboxes.inside import echo

pytestmark = pytest.mark.slow

TARGET = f"{echo.__name__}:{echo.echo.__name__}"
LIMITS = Limits(wall_s=60, cpu_s=30, memory_mb=1024)


@pytest.mark.parametrize("megabytes", [1, 2, 5])
def test_a_large_result_arrives_whole(sandbox, megabytes):
    size = megabytes * 1024 * 1024
    for attempt in range(4):  # the loss was a race: every attempt must arrive whole
        value = {"attempt": attempt, "text": "x" * size, "tail": "the end"}
        result = sandbox.call(TARGET, value, LIMITS, pool="echo", preload=(echo.__name__,))
        assert result.exit_code == 0 and not result.violations, result.summary()
        assert result.returned, (attempt, result.summary())
        assert result.value == value, (attempt, len(str(result.value)))


def test_small_results_and_values_of_every_shape_still_arrive(sandbox):
    for value in (None, 0, "", [1, [2, [3]]], {"k": "v" * 100_000}):
        result = sandbox.call(TARGET, value, LIMITS, pool="echo", preload=(echo.__name__,))
        assert result.returned and result.value == value, result.summary()
