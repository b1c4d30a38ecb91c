"""docs/faults.md lists every case of the fault suite (a case missing from it fails)."""

from __future__ import annotations

import ast
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = HERE.parents[1] / "docs" / "faults.md"


def test_every_fault_case_is_in_the_table() -> None:
    text = DOC.read_text()
    missing = []
    for module in sorted(HERE.glob("test_*.py")):
        if module.name == Path(__file__).name:
            continue
        for node in ast.parse(module.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") \
                    and f"`{node.name}" not in text:
                missing.append(f"{module.name}::{node.name}")
    assert not missing, f"add these cases to docs/faults.md: {missing}"
