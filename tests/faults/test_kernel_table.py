"""Faults of class 'the envelope's own kernel table': the table says which (qt, path) a
kernel's rows are evidence for, where it is built, what is a mutant or a suite self-test,
what never gates (``production: false``) and which audit rules are waived.  Where the
run's manifest is there with the sha256 the run recorded, ``hqval admit`` re-derives the
table from it and any difference is damage naming the field (exit 2); where it is not,
a flag that would set aside a failure or a missing cell is damage, a mutant without a
verdict is damage, and the table is said in one line to be unconfirmed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import (
    BIT_IDENTITY,
    Result,
    edit_envelope,
    fail_bit_identity,
    hqval_process,
    rows,
    run_args,
)

Admit = Callable[..., Result]
KERNEL = "gemv_mq4g256v2_r1"
IDENT = BIT_IDENTITY  # the cell fail_bit_identity fails


def _set(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(env: dict[str, Any]) -> None:
        env["kernels"][KERNEL][field] = value
    return change


@pytest.mark.parametrize("field,value", [
    ("production", False), ("qt", 6), ("path", "moe_decode"), ("kind", "gemm"),
    ("mutant_of", "gemv_mq4c_r1"), ("built_for", []), ("requires", "wmma_gfx12"),
    ("audit_waive", [{"rule": "no_spill", "reason": "edited"}]),
    # block 64 leaves its VGPR budget rows' 256 on gfx1010 as they are: only the manifest
    # tells (the judge re-derives that budget from the block)
    ("block", 64),
], ids=["production", "qt", "path", "kind", "mutant_of", "built_for", "requires",
        "audit_waive", "block"])
def test_an_edited_kernel_table_entry_is_damage(copy_of: Callable[[], Path], hqval: Admit,
                                                field: str, value: Any) -> None:
    """A run whose qt=44 decode kernel fails, its envelope's entry for that kernel edited
    (once: ``production: false`` admitted it, exit 0; the others came out exit 1 with the
    row in another cell, or not at all)."""
    run = copy_of()
    fail_bit_identity(run)
    edit_envelope(run, _set(field, value))
    res = hqval("admit", str(run))
    assert res.code == 2, res.err
    assert f"damaged: {run}: envelope.json kernels['{KERNEL}'] {field} is " in res.err
    assert "but the run's manifest" in res.err


def test_a_kernel_removed_with_every_row_and_cell_is_damage(copy_of: Callable[[], Path],
                                                            hqval: Admit) -> None:
    """The failing kernel taken out of the table, with every row, expected cell, count
    and object of it: nothing in the run directory contradicts that, the manifest does
    (once: exit 0, the path admitted on the other kernels' evidence)."""
    run = copy_of()
    fail_bit_identity(run)
    data = [r for r in rows(run) if r["kernel"] != KERNEL]
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))

    def drop(env: dict[str, Any]) -> None:
        env["kernels"].pop(KERNEL)
        for step, ids in env["expected_cells"].items():
            env["expected_cells"][step] = [i for i in ids if f"[{KERNEL}|" not in i]
            env["expected"][step] = len(env["expected_cells"][step])
        env["objects"] = {k: v for k, v in env["objects"].items()
                          if not k.startswith(f"{KERNEL}|")}
    edit_envelope(run, drop)
    res = hqval("admit", str(run))
    assert res.code == 2, res.err
    assert f"envelope.json kernels lacks '{KERNEL}', a kernel of the run's manifest" in res.err


def test_a_kernel_table_entry_of_no_manifest_kernel_is_damage(copy_of: Callable[[], Path],
                                                              hqval: Admit) -> None:
    """An entry the manifest has no kernel for (its rows would be judged by it)."""
    run = copy_of()
    edit_envelope(run, lambda env: env["kernels"].__setitem__(
        "invented_r1", dict(env["kernels"][KERNEL])))
    res = hqval("admit", str(run))
    assert res.code == 2, res.err
    assert "envelope.json kernels['invented_r1'] is no kernel of the run's manifest" in res.err


def _gone(env: dict[str, Any]) -> None:
    env["manifest"] = str(Path(env["manifest"]).parent / "moved-away" / "kernels.yaml")


@pytest.mark.parametrize("flag,value,said", [
    ("production", False, "says production: false, which sets aside"),
    ("self_test", True, "is a suite self-test but no mutant"),
    ("mutant_of", "gemv_mq4c_r1", "says it is a mutant of 'gemv_mq4c_r1', but the run holds "
                                  "no mutant verdict of it"),
], ids=["production", "self_test", "mutant_of"])
def test_an_unconfirmed_table_never_sets_aside_a_failure(
        copy_of: Callable[[], Path], hqval: Admit, flag: str, value: Any, said: str) -> None:
    """The manifest the envelope names is not there (moved, or the path edited with the
    flag): the flag would set the failing kernel's row aside and nothing confirms it
    (once: ``production: false`` gave exit 0 wherever the manifest was)."""
    run = copy_of()
    fail_bit_identity(run)
    edit_envelope(run, lambda env: (_gone(env), _set(flag, value)(env)))
    res = hqval("admit", str(run))
    assert res.code == 2, res.err
    assert f"envelope.json kernels['{KERNEL}'] {said}" in res.err
    assert "the kernel table is unconfirmed: its manifest" in res.err


@pytest.mark.parametrize("how", ["moved", "changed"])
def test_an_unconfirmed_table_is_said_in_one_line(copy_of: Callable[[], Path], hqval: Admit,
                                                   tmp_path: Path, how: str) -> None:
    """The control: a clean run whose manifest moved away or changed since is still judged
    (exit 0; a failing row exit 1), with one line saying its table is unconfirmed."""
    run = copy_of()
    if how == "moved":
        edit_envelope(run, _gone)
    else:
        other = tmp_path / "kernels.yaml"
        other.write_text("# another manifest\n")
        edit_envelope(run, lambda env: env.__setitem__("manifest", str(other)))
    res = hqval("admit", str(run))
    assert res.code == 0, res.err
    lines = [x for x in res.err.splitlines() if "unconfirmed:" in x]
    assert len(lines) == 1 and "the kernel table is unconfirmed: its manifest" in lines[0]
    assert ("is not there" if how == "moved" else "changed since the run") in lines[0]
    fail_bit_identity(run)
    assert hqval("admit", str(run)).code == 1


def test_an_edited_mutant_manifest_is_damage(copy_of: Callable[[], Path],
                                             hqval: Admit) -> None:
    """The envelope names a mutant manifest other than the one its manifest runs."""
    run = copy_of()
    edit_envelope(run, lambda env: env.__setitem__("mutants_manifest", "/nowhere/mutants.yaml"))
    res = hqval("admit", str(run))
    assert res.code == 2, res.err
    assert "envelope.json mutants_manifest is '/nowhere/mutants.yaml', but the run's " \
           "manifest" in res.err


def test_the_suite_mutants_of_another_installation(copy_of: Callable[[], Path], hqval: Admit,
                                                  tmp_path: Path) -> None:
    """A manifest naming no mutants runs the suite's own from the hqval that ran it (a
    runner's checkout, admitted by a merge job's hqval): confirmed when that copy is there
    as recorded with this hqval's content; with other content, unconfirmed in one line
    and the mutants' entries are left to the rows, so a failure still fails."""
    from hqval.toolchain import file_sha256

    run = copy_of()
    env = json.loads((run / "envelope.json").read_text())
    recorded = Path(env["mutants_manifest"])  # its paths are relative: copy the tree
    shutil.copytree(recorded.parent.parent, tmp_path / "elsewhere")
    other = tmp_path / "elsewhere" / recorded.parent.name / recorded.name
    edit_envelope(run, lambda e: e.__setitem__("mutants_manifest", str(other)))
    res = hqval("admit", str(run))
    assert res.code == 0, res.err
    assert "unconfirmed" not in res.err and "damaged" not in res.err
    other.write_text(other.read_text() + "# another hqval's copy\n")
    edit_envelope(run, lambda e: e.update(mutants_manifest=str(other),
                                      mutants_sha256=file_sha256(other)))
    res = hqval("admit", str(run))
    assert res.code == 0, res.err
    lines = [x for x in res.err.splitlines() if "unconfirmed:" in x]
    assert len(lines) == 1 and "of another hqval installation" in lines[0], res.err
    fail_bit_identity(run)
    assert hqval("admit", str(run)).code == 1


def test_a_manifest_production_false_kernel_still_sets_aside(tree: Path, tmp_path: Path,
                                                             hqval: Admit) -> None:
    """The control: a manifest that marks the kernel ``production: false`` really sets its
    failing row aside (exit 0, "not gating"): the re-derived table agrees with the
    envelope."""
    dest = tmp_path / "tree"
    shutil.copytree(tree.parent, dest)
    data = yaml.safe_load((dest / "kernels.yaml").read_text())
    data["schema"] = 2
    for k in data["kernels"]:
        if k["name"] == KERNEL:
            k["production"] = False
    (dest / "kernels.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "run"
    made = hqval_process(run_args(dest / "kernels.yaml", out, "--no-mutants"))
    assert made.code == 0, made.err[-2000:]
    fail_bit_identity(out)
    res = hqval("admit", str(out))
    assert res.code == 0, res.err
    assert f"not gating (production: false): {IDENT}: fail" in res.err
