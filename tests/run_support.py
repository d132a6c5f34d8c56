"""Moved to `service.testing.runs` (bench/ and scripts/ import it too); this name stays for
branches written before the move."""

from service.testing.runs import EVAL_SAMPLES, GROUP_SIZE, SyntheticRun, replay  # noqa: F401
