"""The paths a bisect checkout needs, read off the manifest at each commit: that manifest
is read as every manifest is (bounded), never expanded or loaded whole when it is hostile."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hqval.bisect import _manifest_paths
from hqval.bisect.git import Repo
from hqval.bisect.step import Placement
from hqval.safeio import YAML_LIMIT
from tests.guards import cpu_seconds

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n"
    for p, n in zip("abcdefgh", "bcdefghi", strict=True))


def _repo(tmp_path: Path, manifest: str) -> tuple[Repo, str]:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True,
                              capture_output=True, text=True).stdout.strip()
    git("init", "-q")
    (tmp_path / "kernels.yaml").write_text(manifest)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.hip").write_text("// k\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "m")
    return Repo(tmp_path), git("rev-parse", "HEAD")


def test_the_manifest_s_paths_are_read_at_the_commit(tmp_path: Path) -> None:
    repo, sha = _repo(tmp_path, "kernels:\n  - name: k\n    source: src/k.hip\n")
    assert set(_manifest_paths(repo, Placement(Path("kernels.yaml"), True), sha)) \
        >= {"kernels.yaml", "src"}


@pytest.mark.parametrize("manifest", [BOMB, "x: " + "[" * 5000 + "]" * 5000 + "\n",
                                      "# " + "y" * (YAML_LIMIT + 10) + "\n"])
def test_a_hostile_manifest_at_a_commit_names_only_itself(tmp_path: Path,
                                                          manifest: str) -> None:
    """An alias bomb, nesting past the bound or a blob past the manifest size limit: no
    paths but the manifest's own, in bounded work (once: the bomb was expanded whole)."""
    repo, sha = _repo(tmp_path, manifest)
    with cpu_seconds() as cpu:
        paths = _manifest_paths(repo, Placement(Path("kernels.yaml"), True), sha)
    assert paths == ["kernels.yaml"]
    assert cpu.seconds < 30
