"""Metamath proof verification: database reading, the proof checker, the sandboxed server."""
