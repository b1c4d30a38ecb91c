"""Fault class: a write target that is a link, a directory or a foreign directory.  Every
file hqval writes goes through ``hqval.safeio.write_atomic``: a temporary beside it,
renamed; a link is refused and its target untouched; nothing half written or left
behind."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.conftest import Result, run_args


def test_json_through_a_link_is_refused_and_its_target_untouched(
        tmp_path: Path, hqval: Callable[..., Result]) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "out.json"
    link.symlink_to(victim)
    r = hqval("matrix", "--json", str(link))
    assert r.code == 2 and "symbolic link" in r.err and str(link) in r.err
    assert victim.read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "victim.txt"]


def test_json_to_a_top_level_directory_leaves_no_partial_anywhere(
        hqval: Callable[..., Result]) -> None:
    before = set(os.listdir("/"))
    tmp_before = set(os.listdir("/tmp"))
    r = hqval("matrix", "--json", "/tmp")
    assert r.code == 2 and "is a directory" in r.err
    assert set(os.listdir("/")) == before  # once: a .tmp.*.partial in the filesystem root
    assert not [n for n in set(os.listdir("/tmp")) - tmp_before if "partial" in n]


@pytest.mark.parametrize("what", ["report.html", "plots"])
def test_report_o_through_a_link_is_refused(golden: Path, tmp_path: Path, what: str,
                                            hqval: Callable[..., Result]) -> None:
    out = tmp_path / "report"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "victim"
    victim.write_text("keep me")
    (out / what).symlink_to(victim if what == "report.html" else elsewhere)
    r = hqval("report", str(golden), "-o", str(out))
    assert r.code == 2 and "symbolic link" in r.err
    assert victim.read_text() == "keep me" and sorted(os.listdir(elsewhere)) == ["victim"]
    # every target is checked before the first is written: the refusal leaves the
    # directory as it was (once: the plots were written before report.html was refused)
    assert sorted(os.listdir(out)) == [what]


def test_a_non_empty_out_that_is_no_run_is_refused(tree: Path, tmp_path: Path,
                                                   hqval: Callable[..., Result]) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    r = hqval(*run_args(tree, out))
    assert r.code == 2 and "not an hqval run" in r.err and "notes.txt" in r.err
    assert sorted(os.listdir(out)) == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "mine\n"


def test_junit_xml_through_a_link_is_refused(tree: Path, tmp_path: Path,
                                             hqval: Callable[..., Result]) -> None:
    victim = tmp_path / "victim.xml"
    victim.write_text("keep me")
    link = tmp_path / "junit.xml"
    link.symlink_to(victim)
    r = hqval("check", "--arch", "gfx1010", "--backend", "emu", "--manifest", str(tree),
              "--workers", "0", "--check", "bit_identity", "-k", "gemv_mq4g256v2_r1",
              "--junit-xml", str(link))
    assert r.code == 2 and "symbolic link" in r.err
    assert victim.read_text() == "keep me"
