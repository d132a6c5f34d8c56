"""The `code` verifier package.

Kept free of imports on purpose: the sandbox workers import `verifiers.code.candidate`
and `verifiers.code.grader` (standard library only) without pulling in pydantic or the
verifier itself; the registry imports `verifiers.code.verifier` like any other module.
"""
