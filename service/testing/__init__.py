"""Harnesses that tests, benchmarks and scripts share (as starlette ships `testclient`).

- `live`: `assay serve` in a subprocess on a free port (`LiveServer`), as an operator runs it.
- `runs`: synthetic training runs replayed through a real service.
- `ui`: sign in to the viewer and fill a store with honest and hostile records.
- `ray_cluster`: a real Ray cluster and API servers in a private network namespace.
- `app`: the app in-process behind starlette's TestClient (`AppServer`), LiveServer's twin.
- `math_suite`: Math-Verify's own test cases and the disagreements docs/math_verifier.md lists.
- `metamath`: set.mm read once, Debian's `metamath` as the reference checker, proof mutations.

Nothing in the service imports this package. `tests/`, `bench/` and `scripts/` do, so that
none of them imports another's modules; `math_suite` reads files of a source checkout
(`tests/data`, `docs/`).
"""
