"""The `code` verifier package.

Kept free of imports on purpose: the sandbox workers import the modules in
`verifiers.code.inside` (standard library only, plus the plain shapes of
`verifiers.code.wire`) without pulling in pydantic or the verifier itself; the registry
imports `verifiers.code.verifier` like any other module.
"""
