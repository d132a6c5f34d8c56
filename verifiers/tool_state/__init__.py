"""The `tool_state` verifier: an agent used tools against an environment; did it reach the
right final state by an authorized path?

Modules: `env` (the environment framework), `bank` (the first domain pack), `packs` (the
pack table), `trace` (parsing a response into calls), `checks` (state diff and output
checks), `replay` (the sandboxed replay), `task` (the task model), `verifier` (the
registered verifier).
"""
