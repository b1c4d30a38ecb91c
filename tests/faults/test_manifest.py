"""Fault class: a hostile or broken manifest.  Every command reads it through the same
loader and answers with one line and exit 2, before compiling or writing anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from hqval.cli import main
from tests.guards import cpu_seconds, no_hang

COMMANDS = [
    ["compile", "--arch", "gfx1100"],
    ["audit", "--arch", "gfx1100"],
    ["check", "--arch", "gfx1100", "--backend", "emu"],
    ["mutants", "--arch", "gfx1100", "--backend", "emu"],
    ["emu", "--arch", "gfx1100"],
    ["emu", "--coverage", "--arch", "gfx1100"],
    ["run", "--arch", "gfx1100", "--backend", "emu"],
]


def _bomb() -> str:
    lines = ["schema: 1", "a0: &a0 [" + ", ".join(["x"] * 9) + "]"]
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\nkernels: []\n"


FAULTS = {
    "alias_bomb": (_bomb(), "expand the document past"),
    "outside_tree": ("schema: 1\nkernels:\n  - {name: k1, source: ../../../../etc/passwd, "
                     "qt: 6, kind: gemv, requires: any}\n", "outside the manifest's directory"),
    "absolute_include": ("schema: 1\ninclude_dirs: [/usr/include]\nkernels:\n"
                         "  - {name: k1, source: k.hip, qt: 6, kind: gemv, requires: any}\n",
                         "outside the manifest's directory"),
    "not_an_identifier": ("schema: 1\nkernels:\n  - {name: 'k1|x`<b>', source: k.hip, qt: 6, "
                          "kind: gemv, requires: any}\n", "not a C identifier"),
    "not_utf8": (b"schema: 1\n# caf\xe9\nkernels: []\n", "not UTF-8"),
    "oversized": ("schema: 1\n# " + "x" * (20 << 20) + "\nkernels: []\n", "byte limit"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_every_command_refuses_a_bad_manifest_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], fault: str,
        command: list[str]) -> None:
    text, message = FAULTS[fault]
    tree = tmp_path / "a" / "b" / "tree"
    tree.mkdir(parents=True)
    (tree / "k.hip").write_text("// kernel\n")
    manifest = tree / "kernels.yaml"
    if isinstance(text, bytes):
        manifest.write_bytes(text)
    else:
        manifest.write_text(text)
    out = tmp_path / "out"
    argv = [*command, "--manifest", str(manifest)]
    if command[0] == "run":
        argv += ["--out", str(out)]
    with no_hang(), cpu_seconds() as cpu:
        code = main(argv)
    captured = capsys.readouterr()
    assert code == 2
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(lines) == 1, captured.err
    assert message in lines[0] and str(manifest) in lines[0] and "fix:" in lines[0]
    assert "Traceback" not in captured.err + captured.out
    assert not out.exists()  # nothing written
    assert cpu.seconds < 5  # an alias bomb or a huge input is refused, not worked through
