"""docs/kernel.md carries the transition table exactly as the code states it."""

from __future__ import annotations

from pathlib import Path

from agentboard.domain import states

DOC = Path(__file__).resolve().parents[2] / "docs" / "kernel.md"


def test_kernel_doc_prints_the_current_transition_table() -> None:
    text = DOC.read_text()
    begin, end = "<!-- transition-table:begin -->\n", "\n<!-- transition-table:end -->"
    printed = text[text.index(begin) + len(begin):text.index(end)]
    assert printed == states.table_markdown(), (
        "docs/kernel.md is out of date: paste the output of "
        "`python -c 'from agentboard.domain import states; print(states.table_markdown())'`"
    )
