"""The `tool_state` verifier: an agent used tools against an environment; did it reach the
right final state by an authorized path?

Modules: `env` (the environment framework), `bank` (the first domain pack), `packs` (the
pack table), `trace` (parsing a response into calls), `checks` (state diff and output
checks), `replay` (the replay that runs in the sandbox), `runner` (host side of the
sandboxed replay: warm replay sessions and fresh-process fallback), `task` (the task
model), `verifier` (the registered verifier), `examples` (a worked task for tests,
benchmarks and docs). HTTP sessions for multi-turn rollouts are in service/routes/envs.py.
"""
