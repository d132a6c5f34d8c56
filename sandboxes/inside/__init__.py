"""Runs inside the sandbox: standard library and other `inside` modules only (tests/test_trust_zones.py)."""
