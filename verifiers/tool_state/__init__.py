"""The `tool_state` verifier: an agent used tools against an environment; did it reach the
right final state by an authorized path?

Host modules: `wire` (parsing a response into calls: the trace shape both sides read),
`runner` (host side of the sandboxed replay: warm replay sessions and fresh-process
fallback), `task` (the task model), `verifier` (the registered verifier), `examples` (a
worked task for tests, benchmarks and docs). Run in the sandbox, in `inside/`: `replay`
(the replay), `env` (the environment framework), `bank` (the first domain pack), `packs`
(the pack table), `checks` (state diff and output checks); the HTTP sessions for
multi-turn rollouts (service/routes/envs.py) step the same environments on the host.
"""
