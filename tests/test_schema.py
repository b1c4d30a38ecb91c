"""The schema checker: every error names file, line, key, expectation and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from hqval.schema import SchemaError, Spec, check, load_yaml, validate

SPEC = Spec.mapping({
    "name": Spec.scalar(str),
    "count": Spec.scalar(int, minimum=1, fix="a positive count"),
    "ratio": Spec.scalar(float, required=False),
    "mode": Spec.scalar(str, enum=("fast", "slow")),
    "items": Spec.list_of(Spec.mapping({"k": Spec.scalar(int)})),
    "flag": Spec.scalar(bool, required=False),
})

GOOD = """\
name: x
count: 3
ratio: 2
mode: fast
items:
  - {k: 1}
  - {k: 2}
"""


def test_good_document_passes_and_keeps_lines() -> None:
    doc = check(load_yaml("g.yaml", GOOD), SPEC)
    assert doc.data["items"][1]["k"] == 2
    assert doc.line(("mode",)) == 4 and doc.line(("items", 1, "k")) == 7


def test_each_problem_names_file_line_key_and_fix() -> None:
    bad = GOOD.replace("count: 3", "count: three").replace("mode: fast", "mode: fats")
    bad = bad.replace("{k: 2}", "{k: 2, j: 1}") + "flag: 1\nextra: 2\n"
    probs = validate(load_yaml("b.yaml", bad), SPEC)
    text = [str(p) for p in probs]
    assert "b.yaml:2: count: expected an integer, got str 'three'; fix: a positive count" in text
    assert any(t.startswith("b.yaml:4: mode: 'fats' is not one of") and "did you mean 'fast'"
               in t for t in text)
    assert any(t.startswith("b.yaml:7: items[1].j: unknown key 'j'") for t in text)
    assert any(t.startswith("b.yaml:8: flag: expected a boolean, got int 1") for t in text)
    assert any(t.startswith("b.yaml:9: extra: unknown key 'extra'") for t in text)
    assert len(probs) == 5


def test_missing_key_and_minimum() -> None:
    probs = validate(load_yaml("m.yaml", "name: x\ncount: 0\nitems: []\n"), SPEC)
    text = [str(p) for p in probs]
    assert "m.yaml:2: count: 0 is below the minimum 1; fix: a positive count" in text
    assert any("missing required key 'mode'" in t and "add 'mode:'" in t for t in text)


def test_bool_is_not_an_int_and_int_is_a_float() -> None:
    spec = Spec.mapping({"a": Spec.scalar(int), "b": Spec.scalar(float)})
    assert validate(load_yaml("t", "a: 1\nb: 2\n"), spec) == []
    assert len(validate(load_yaml("t", "a: true\nb: false\n"), spec)) == 2


def test_yaml_syntax_and_duplicates_report_the_line(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match=r"s.yaml:3: <top>: YAML syntax"):
        load_yaml("s.yaml", "a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(SchemaError, match=r"d.yaml:2: .*duplicate key 'a'"):
        load_yaml("d.yaml", "a: 1\na: 2\n")
    with pytest.raises(SchemaError, match="cannot read"):
        load_yaml(tmp_path / "absent.yaml")


def test_check_raises_with_every_problem() -> None:
    with pytest.raises(SchemaError) as info:
        check(load_yaml("c.yaml", "name: 1\ncount: x\n"), SPEC)
    assert len(info.value.problems) == 4  # name, count, missing mode, missing items


def test_merge_keys_are_followed() -> None:
    text = "base: &b {k: 1}\nitems:\n  - <<: *b\n"
    doc = load_yaml("mk.yaml", text)
    assert doc.data["items"][0] == {"k": 1}


def _alias_bomb(levels: int = 9, fan: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(["x"] * fan) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fan) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_fast_and_small(tmp_path: Path) -> None:
    import tracemalloc

    from tests.guards import cpu_seconds

    path = tmp_path / "bomb.yaml"
    path.write_text(_alias_bomb())
    # the peak of what Python allocated inside the call (the process's own peak RSS, set
    # earlier by other tests, could hide any growth)
    tracemalloc.start()
    try:
        with cpu_seconds() as cpu, \
                pytest.raises(SchemaError, match="expand the document past") as info:
            load_yaml(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert cpu.seconds < 1.0
    assert peak < 100 << 20
    assert str(path) in str(info.value) and "fix:" in str(info.value)


def test_small_aliases_still_load() -> None:
    doc = load_yaml("p.yaml", "gate: &g {max: 1.05}\na: *g\nb: *g\n")
    assert doc.data == {"gate": {"max": 1.05}, "a": {"max": 1.05}, "b": {"max": 1.05}}


def test_a_self_referencing_alias_and_deep_nesting_are_refused() -> None:
    with pytest.raises(SchemaError, match="contains it"):
        load_yaml("p.yaml", "a: &a [1, *a]\n")
    with pytest.raises(SchemaError, match="deeper than"):
        load_yaml("p.yaml", "a: " + "[" * 200 + "]" * 200 + "\n")


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    import tracemalloc

    path = tmp_path / "big.yaml"
    with path.open("w") as fh:
        fh.write("schema: 1\n# ")
        fh.write("x" * (20 << 20))
    tracemalloc.start()  # the 20 MiB never enter memory: refused on its size
    try:
        with pytest.raises(SchemaError, match="over the 1048576 byte limit"):
            load_yaml(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20


def test_non_utf8_bytes_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"schema: 1\nname: caf\xe9\n")
    with pytest.raises(SchemaError, match=r"bad.yaml:2: .*not UTF-8"):
        load_yaml(path)


def test_a_reparsed_text_is_a_copy_and_a_changed_file_is_read_again(tmp_path: Path) -> None:
    """load_yaml reuses the parse of a text it has parsed (a run loads its manifests dozens
    of times): a caller's edit of the data never reaches the next caller, a file changed
    on disk is parsed again, and a bad text is refused on every load."""
    f = tmp_path / "g.yaml"
    f.write_text(GOOD)
    first = load_yaml(f)
    first.data["items"].append({"k": 9})
    first.data["name"] = "edited"
    again = load_yaml(f)
    assert again.data == load_yaml("g.yaml", GOOD).data
    assert again.data["name"] == "x" and len(again.data["items"]) == 2
    assert again.line(("items", 1, "k")) == 7
    f.write_text(GOOD.replace("count: 3", "count: 4"))
    assert load_yaml(f).data["count"] == 4
    f.write_text("a: [1\n")
    for _ in range(2):
        with pytest.raises(SchemaError, match="YAML syntax"):
            load_yaml(f)
