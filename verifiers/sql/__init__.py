"""The `sql` verifier: a model's SQL query (or data change) judged against exact result
constraints on several database instances, executed under guards in depth.

Kept import-free on purpose: `inside/sqlite_runner` runs inside the sandbox and must not pull
the host-side dependencies (pydantic, sqlglot, psycopg) in with this package.
"""
