"""Every ```python example in README.md and docs/*.md runs as written.

Each block runs in its own Python process over a fresh home: the environment's
``AGENTBOARD_HOME`` points at it, and the placeholder home the examples use (``/tmp/myhome``)
is replaced by it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER_HOME = "/tmp/myhome"
_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _examples() -> list[tuple[str, str]]:
    out = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, code in enumerate(_BLOCK.findall(doc.read_text()), start=1):
            out.append((f"{doc.relative_to(ROOT)}#{n}", code))
    return out


EXAMPLES = _examples()


def test_the_readme_has_a_python_example() -> None:
    assert any(name.startswith("README.md#") for name, _ in EXAMPLES)


@pytest.mark.parametrize("code", [code for _, code in EXAMPLES], ids=[name for name, _ in EXAMPLES])
def test_documented_example_runs(code: str, home: Path, tmp_path: Path) -> None:
    script = code.replace(PLACEHOLDER_HOME, str(home))
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, f"the example failed:\n{script}\n--- stderr ---\n{proc.stderr}"
