"""Code that runs inside the sandbox for the `code` verifier: standard library and
`verifiers.code.wire` only (never a host module)."""
