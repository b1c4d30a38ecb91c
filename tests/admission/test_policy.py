"""``hqval.admission.policy``: the policy read as every YAML input is, its errors naming
the file, the line, the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from hqval.admission import POLICY_PATH, PolicyError, load_policy


def test_a_bad_key_is_named_with_its_line(tmp_path: Path) -> None:
    text = POLICY_PATH.read_text()
    line = next(i for i, x in enumerate(text.splitlines(), 1) if "- cap: wave_size" in x)
    bad = tmp_path / "policy.yaml"
    bad.write_text(text.replace("- cap: wave_size", "- cap: wave_sise", 1))
    with pytest.raises(PolicyError) as exc:
        load_policy(bad)
    assert str(exc.value).startswith(f"{bad}:{line}: formats.")
    assert "cap: 'wave_sise' is not one of wmma, wave_size, family" in str(exc.value)


@pytest.mark.parametrize("make", [
    lambda p: p,  # absent
    lambda p: (p.mkdir(), p)[1],  # a directory
    lambda p: (p.write_text("a: [1, 2"), p)[1],  # not YAML
], ids=["absent", "directory", "syntax"])
def test_an_unreadable_policy_is_one_line_naming_the_file(tmp_path: Path, make: object) -> None:
    path = make(tmp_path / "p.yaml")  # type: ignore[operator]
    with pytest.raises(PolicyError, match=rf"^{tmp_path / 'p.yaml'}:\d+: ") as exc:
        load_policy(path)
    assert "\n" not in str(exc.value)
