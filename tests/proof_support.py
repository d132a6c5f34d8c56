"""Moved to `service.testing.metamath` (bench/proof_throughput.py imports it too); this name
stays for branches written before the move."""

from service.testing.metamath import *  # noqa: F403
