"""Fenced code blocks in a response, as Markdown writes them: opened by ``` or ~~~ with an
info string naming the language, closed by the same marker. Shared by the verifiers that read
a block of code or data out of prose (sql; code reads lines with the same markers; tool_state's
wire, imported inside the sandbox too, writes the same pattern out).
A `~~~sql` block was not a block before round 16: its query was read with the fence in it.
"""

from __future__ import annotations

import re

MARKERS = ("```", "~~~")
# An unclosed fence (a truncated generation) is no block.
_BLOCK = re.compile(r"(```|~~~)[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)\1", re.DOTALL)


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(info tag as written, body) of every fenced block, in order."""
    return [(tag, body) for _, tag, body in _BLOCK.findall(text)]
