"""The bounded reader and the safe writer: every input that must be refused is refused in
one line naming the file, and nothing is written through a link or left half written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hqval import safeio
from hqval.errors import InfrastructureError, infrastructure_details, is_infrastructure
from hqval.safeio import SafeIOError
from tests.guards import cpu_seconds, no_hang

ALIAS_BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n"
    for i in range(8))


def test_reads_a_regular_file(tmp_path: Path) -> None:
    p = tmp_path / "f.txt"
    p.write_text("héllo\n")
    assert safeio.read_text(p, what="test file") == "héllo\n"
    assert safeio.read_bytes(p, limit=100, what="x") == "héllo\n".encode()


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    p = tmp_path / "big"
    p.write_bytes(b"x" * 101)
    with pytest.raises(SafeIOError, match=r"big: 101 bytes is over the 100 byte limit"):
        safeio.read_bytes(p, limit=100, what="input")


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null"])
def test_a_device_is_refused_without_reading(special: str) -> None:
    with pytest.raises(SafeIOError, match="character device, not a regular file"):
        safeio.read_bytes(special, what="policy")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with no_hang(), pytest.raises(SafeIOError, match=r"pipe: is a FIFO"):
        safeio.load_yaml(fifo, what="manifest")  # opened for reading, it would block


def test_a_directory_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SafeIOError, match="is a directory"):
        safeio.read_text(tmp_path, what="manifest")
    with pytest.raises(SafeIOError, match="No such file") as info:
        safeio.read_text(tmp_path / "nope", what="manifest")
    assert info.value.errno == 2


def test_a_link_is_followed_or_refused_as_asked(tmp_path: Path) -> None:
    (tmp_path / "real").write_text("{}")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert safeio.load_json(tmp_path / "link", what="x") == {}
    with pytest.raises(SafeIOError, match="symbolic link"):
        safeio.read_text(tmp_path / "link", what="rows", follow_symlinks=False)


def test_non_utf8_names_the_file_line_and_byte(tmp_path: Path) -> None:
    p = tmp_path / "m.yaml"
    p.write_bytes(b"a: 1\nb: caf\xe9\n")
    with pytest.raises(SafeIOError, match=r"m.yaml:2: not UTF-8 .* at byte 11.*; fix: save"):
        safeio.load_yaml(p, what="manifest")


def test_deep_json_is_refused_before_parsing(tmp_path: Path) -> None:
    with pytest.raises(SafeIOError, match="nested deeper than 64 levels"):
        safeio.loads_json("[" * 100_000 + "]" * 100_000, what="row 3")
    assert safeio.loads_json('{"a": "[[[[[[[[[[[[[[[[[[[[[[[["}', max_depth=2) == {
        "a": "[" * 24}
    # valid JSON, deeper than the limit but not past the parser's own recursion limit:
    # refused all the same, naming the line where it goes too deep
    with pytest.raises(SafeIOError, match=r"row 4: nested deeper than 64 levels \(line 2\)"):
        safeio.loads_json('{"a":\n' + "[" * 100 + "]" * 100 + "}", what="row 4")
    at_limit = safeio.loads_json("[" * 64 + "]" * 64)  # exactly 64 levels: taken
    assert not safeio.nesting_exceeds(at_limit, 64) and safeio.nesting_exceeds(at_limit, 63)
    assert safeio.nesting_exceeds([[[]]], 2) and not safeio.nesting_exceeds([[[]]], 3)
    p = tmp_path / "e.json"
    p.write_text("{" * 70)
    with pytest.raises(SafeIOError, match=r"e\.json: nested deeper"):
        safeio.load_json(p, what="envelope")


def test_the_bracket_count_bound_never_hides_a_deep_document() -> None:
    """With its text, a document of at most ``max_depth`` opening brackets is not walked;
    one deeper than the limit always has more, so it is still refused, brackets inside
    strings only adding to the count."""
    deep = "[" * 3 + "]" * 3
    assert safeio.nesting_exceeds(json.loads(deep), 2, deep)
    assert not safeio.nesting_exceeds(json.loads(deep), 3, deep)
    padded = '["[[[[", [[]]]'  # 7 brackets, 3 deep
    assert not safeio.nesting_exceeds(json.loads(padded), 3, padded)
    assert safeio.nesting_exceeds(json.loads(padded), 2, padded)
    flat = "[" + ",".join(["[]"] * 100) + "]"  # 101 brackets, 2 deep: walked, not refused
    assert not safeio.nesting_exceeds(json.loads(flat), 64, flat)
    with pytest.raises(SafeIOError, match="nested deeper than 2 levels"):
        safeio.loads_json(deep, max_depth=2)


def test_bad_json_names_what_it_is() -> None:
    with pytest.raises(SafeIOError, match=r"row 7: not valid JSON .*line 1 column"):
        safeio.loads_json('{"a": ', what="row 7")
    with pytest.raises(SafeIOError, match="row 8: not valid JSON"):
        safeio.loads_json("1" * 5000, what="row 8")


def test_a_yaml_alias_bomb_does_not_expand(tmp_path: Path) -> None:
    p = tmp_path / "policy.yaml"
    p.write_text(ALIAS_BOMB)
    assert p.stat().st_size < 700
    with cpu_seconds() as cpu, pytest.raises(SafeIOError, match="expand the document past"):
        safeio.load_yaml(p, what="policy")
    assert cpu.seconds < 2  # 9**9 leaves, walked or built, is minutes of CPU


def test_yaml_aliases_are_counted_and_depth_is_bounded(tmp_path: Path) -> None:
    with pytest.raises(SafeIOError, match="more than 3 aliases"):
        safeio.loads_yaml("a: &a 1\nb: [*a, *a, *a, *a]\n", what="f", max_aliases=3)
    with pytest.raises(SafeIOError, match="nested deeper than 64"):
        safeio.loads_yaml("[" * 5000 + "]" * 5000, what="f")
    assert safeio.loads_yaml("g: &g {r: 1}\nh: *g\n", what="f") == {"g": {"r": 1},
                                                                     "h": {"r": 1}}


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(SafeIOError, match=r"f:2: YAML syntax"):
        safeio.loads_yaml("a: 1\n  b: [\n", what="f")
    with pytest.raises(SafeIOError, match="YAML"):
        safeio.loads_yaml("a: !!python/object:os.system x\n", what="f")


def test_write_atomic_replaces_and_leaves_nothing(tmp_path: Path) -> None:
    p = tmp_path / "out.json"
    safeio.write_atomic(p, "one")
    safeio.write_atomic(p, b"two")
    assert p.read_text() == "two"
    assert sorted(os.listdir(tmp_path)) == ["out.json"]


def test_write_atomic_refuses_a_link_and_leaves_its_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "report.html"
    link.symlink_to(victim)
    with pytest.raises(SafeIOError, match=r"report\.html: is a symbolic link"):
        safeio.write_atomic(link, "x", what="report")
    assert victim.read_text() == "keep"
    assert sorted(os.listdir(tmp_path)) == ["report.html", "victim"]


def test_write_atomic_to_a_directory_leaves_no_partial(tmp_path: Path) -> None:
    target = tmp_path / "dir"
    target.mkdir()
    with pytest.raises(SafeIOError, match="is a directory"):
        safeio.write_atomic(target, "x", what="--json")
    assert sorted(os.listdir(tmp_path)) == ["dir"]


def test_write_atomic_failure_leaves_no_temporary(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(SafeIOError, match="out: cannot write it: No space left"):
        safeio.write_atomic(tmp_path / "out", "x")
    assert os.listdir(tmp_path) == []


def test_make_dir_refuses_a_link(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "report").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SafeIOError, match="symbolic link"):
        safeio.make_dir(tmp_path / "report", what="report directory")
    assert safeio.make_dir(tmp_path / "a" / "b").is_dir()


def test_infrastructure_errors_are_told_apart() -> None:
    try:
        try:
            raise OSError("disk")
        except OSError as exc:
            raise InfrastructureError("cache unwritable") from exc
    except InfrastructureError as exc:
        outer = RuntimeError("wrapped")
        outer.__cause__ = exc
        assert is_infrastructure(outer)
        assert infrastructure_details(exc)["infrastructure"] is True
    assert not is_infrastructure(ValueError("kernel"))


def test_check_targets_refuses_before_anything_is_written(tmp_path: Path) -> None:
    check_targets = safeio.check_targets
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    (tmp_path / "file").write_text("x")
    check_targets([(tmp_path / "new", "a"), (tmp_path / "file", "b")], [(tmp_path, "dir")])
    with pytest.raises(SafeIOError, match="symbolic link"):
        check_targets([(tmp_path / "file", "b"), (tmp_path / "link", "c")])
    with pytest.raises(SafeIOError, match="not a directory"):
        check_targets([], [(tmp_path / "file", "d")])
    with pytest.raises(SafeIOError, match="symbolic link"):
        check_targets([], [(tmp_path / "link", "e")])
