"""The nightly workflow (.github/workflows/nightly.yml), tested: linted with actionlint, and
run locally for one matrix entry on the emulator backend.

The local run executes the workflow's own ``run:`` steps, parsed from the YAML, in order:
the arch job (checkout, ``nox -s <arch>``, upload) and then the merge job (checkout,
download, install, ``hqval report``, upload, ``hqval admit`` against last night's runs,
keep tonight's as the baseline).  Only two things are stood in for: ``${{ }}``
expressions (the matrix entry and ``vars.HQVAL_BASELINE_DIR``) and the three actions,
whose local equivalents are a copy of the working tree (checkout) and copies into and out of
an artifact directory (upload/download).  No GPU here: ``hqval run``'s backend ``auto``
picks the emulator and says so.

The run is one test (the expensive part: two venvs, ``pip install``, the whole chain for
one arch: the nox step alone took 61 s here, the whole test 483 s with two copies of it
running at once on the shared 2-core machine), so pytest-xdist runs it once.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
ARCH = "gfx1030"  # the matrix entry run locally (any entry: the test reads the matrix)


# ---------------------------------------------------------------------------- actionlint

def _actionlint() -> str:
    exe = shutil.which("actionlint") or str(Path(sys.executable).parent / "actionlint")
    if not Path(exe).is_file():
        if os.environ.get("CI"):
            pytest.fail("actionlint missing in CI: the dev extra installs it "
                        "(pip install -e '.[dev]')")
        pytest.skip("needs actionlint (pip install -e '.[dev]' installs it)")
    return exe


def test_actionlint_passes_the_workflows() -> None:
    res = subprocess.run([_actionlint(), "-color=false"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    """The lint can fail: an undefined matrix key and a step with both run and uses."""
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(ROOT / ".github" / "actionlint.yaml", tmp_path / ".github")
    bad = WORKFLOW.read_text().replace("${{ matrix.arch }} -- --out",
                                       "${{ matrix.target }} -- --out")
    (tmp_path / ".github" / "workflows" / "nightly.yml").write_text(bad)
    res = subprocess.run([_actionlint(), "-color=false", "-config-file",
                          str(tmp_path / ".github" / "actionlint.yaml"),
                          str(tmp_path / ".github" / "workflows" / "nightly.yml")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         check=False)
    assert res.returncode == 1
    assert "target" in res.stdout


def test_runner_labels_are_the_arches() -> None:
    """Each gfx target has its self-hosted runner label, known to actionlint."""
    from hqval.matrix import load_arches

    labels = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())
    wf = yaml.safe_load(WORKFLOW.read_text())
    matrix = wf["jobs"]["arch"]["strategy"]["matrix"]["arch"]
    assert matrix == list(load_arches())
    assert labels["self-hosted-runner"]["labels"] == [*matrix, "hqval-merge"]


# ---------------------------------------------------------------------------- local runner

class ExpressionError(ValueError):
    pass


def evaluate(expr: str, context: Mapping[str, Mapping[str, str]]) -> str:
    """A ``${{ }}`` expression of the forms the workflow uses: ``ctx.key``, string
    literals, and ``a || b``.  Anything else is an error (extend this when the workflow
    grows), so an expression is never silently replaced by an empty string."""
    for part in (p.strip() for p in expr.split("||")):
        if re.fullmatch(r"'[^']*'", part):
            value = part[1:-1]
        elif m := re.fullmatch(r"(\w+)\.(\w+)", part):
            if m.group(1) not in context:
                raise ExpressionError(f"no context {m.group(1)!r} for ${{{{ {expr} }}}}")
            value = context[m.group(1)].get(m.group(2), "")
        else:
            raise ExpressionError(f"unsupported expression ${{{{ {expr} }}}}")
        if value:
            return value
    return ""


def substitute(text: str, context: Mapping[str, Mapping[str, str]]) -> str:
    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", lambda m: evaluate(m.group(1), context), text)


@dataclass
class StepResult:
    name: str
    code: int
    output: str


@dataclass
class LocalRunner:
    """Runs one job's steps as a runner would: each ``run:`` with ``bash -e`` in the
    workspace, with the step's ``env``; a failed step stops the job unless it has
    ``continue-on-error``; ``if: always()`` steps run regardless."""

    workspace: Path
    artifacts: Path
    context: dict[str, dict[str, str]]
    results: list[StepResult] = field(default_factory=list)

    def checkout(self) -> None:
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"],
                               cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
        for f in (x.decode() for x in files if x):
            src = ROOT / f
            if src.is_file():
                dst = self.workspace / f
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)

    def upload(self, name: str, path: str) -> None:
        src = self.workspace / path
        if not src.exists():
            return  # if-no-files-found: warn
        shutil.copytree(src, self.artifacts / name, dirs_exist_ok=True)

    def download(self, pattern: str, path: str) -> None:
        for art in sorted(self.artifacts.iterdir()):
            if fnmatch.fnmatch(art.name, pattern):
                shutil.copytree(art, self.workspace / path / art.name, dirs_exist_ok=True)

    def action(self, uses: str, with_: Mapping[str, Any]) -> None:
        name = uses.split("@", 1)[0]
        if name == "actions/checkout":
            self.checkout()
        elif name == "actions/upload-artifact":
            self.upload(substitute(str(with_["name"]), self.context),
                        substitute(str(with_["path"]), self.context))
        elif name == "actions/download-artifact":
            self.download(str(with_["pattern"]), str(with_["path"]))
        else:
            raise AssertionError(f"no local equivalent for {uses}: add one to the test")

    def run_step(self, step: Mapping[str, Any]) -> StepResult:
        name = substitute(str(step.get("name") or step.get("uses") or step["run"][:40]),
                          self.context)
        if "uses" in step:
            self.action(str(step["uses"]), step.get("with") or {})
            result = StepResult(name, 0, "")
        else:
            script = substitute(str(step["run"]), self.context)
            env = {**os.environ, "GITHUB_WORKSPACE": str(self.workspace),
                   **{k: substitute(str(v), self.context)
                      for k, v in (step.get("env") or {}).items()}}
            res = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-c", script],
                                 cwd=self.workspace, env=env, capture_output=True, text=True,
                                 timeout=900, check=False)
            result = StepResult(name, res.returncode, res.stdout + res.stderr)
        self.results.append(result)
        return result

    def run_job(self, job: Mapping[str, Any]) -> bool:
        """True when the job succeeded."""
        failed = False
        for step in job["steps"]:
            cond = str(step.get("if", "")).strip()
            if failed and cond != "always()":
                continue
            if cond not in ("", "always()"):
                raise AssertionError(f"step condition {cond!r}: add it to the test")
            res = self.run_step(step)
            if res.code != 0 and not step.get("continue-on-error"):
                failed = True
        return not failed


def _workflow() -> dict[str, Any]:
    wf = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(wf, dict)
    return wf


def _admit_step(wf: dict[str, Any]) -> dict[str, Any]:
    steps = wf["jobs"]["merge"]["steps"]
    step = next(s for s in steps if str(s.get("name", "")).startswith("hqval admit"))
    assert isinstance(step, dict)
    return step


@pytest.mark.slow
def test_the_nightly_workflow_runs_locally(tmp_path: Path) -> None:
    """Tonight's run for one matrix entry (the arch job, then the merge job), a second
    night admitted against the first, and a night with a failing cell that must fail the
    admit step.  One test, so pytest-xdist cannot run the expensive part twice."""
    import json

    if shutil.which("clang-19") is None and shutil.which("clang-20") is None:
        pytest.skip("needs clang-19 (apt-get install clang-19 lld-19 llvm-19)")
    if not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout (the local checkout step copies `git ls-files`)")
    wf = _workflow()
    assert ARCH in wf["jobs"]["arch"]["strategy"]["matrix"]["arch"]
    artifacts, baseline = tmp_path / "artifacts", tmp_path / "baseline"
    artifacts.mkdir()
    ctx = {"matrix": {"arch": ARCH}, "vars": {"HQVAL_BASELINE_DIR": str(baseline)}}

    # the arch job: checkout, nox -s <arch>, upload
    arch = LocalRunner(tmp_path / "arch-runner", artifacts, ctx)
    arch_ok = arch.run_job(wf["jobs"]["arch"])
    assert [r.name for r in arch.results] == ["actions/checkout@v4", f"nox -s {ARCH}",
                                              "actions/upload-artifact@v4"]
    nox = arch.results[1]
    assert arch_ok and nox.code == 0, nox.output[-4000:]
    assert f"hqval run --arch {ARCH}" in nox.output
    run = artifacts / f"run-{ARCH}"
    assert (run / "envelope.json").is_file() and (run / "rows.jsonl").is_file()
    assert json.loads((run / "envelope.json").read_text())["backend"] == "emu"  # no GPU

    # the merge job: needs arch, runs always; report, admit, keep the baseline
    merge_job = wf["jobs"]["merge"]
    assert merge_job["needs"] == "arch" and merge_job.get("if") == "always()"
    merge = LocalRunner(tmp_path / "merge-runner", artifacts, ctx)
    merge_ok = merge.run_job(merge_job)
    by = {r.name: r for r in merge.results}
    assert merge_ok, {n: (r.code, r.output[-1500:]) for n, r in by.items()}
    report = artifacts / "report"
    assert (report / "report.html").is_file() and (report / "checkpoint.md").is_file()
    assert (merge.workspace / "report" / "admission.json").is_file()
    admit = next(r for n, r in by.items() if n.startswith("hqval admit"))
    assert "no baseline in" in admit.output  # the first night has none
    assert f"| {ARCH} |" in admit.output
    assert (baseline / f"run-{ARCH}" / "rows.jsonl").is_file()  # the next night's baseline

    # the second night admits against the first
    again = merge.run_step(_admit_step(wf))
    assert again.code == 0, again.output[-3000:]
    assert "no baseline in" not in again.output

    # must say no: a failing reference_parity row on an admitted cell fails the step
    rows_path = merge.workspace / "runs" / f"run-{ARCH}" / "rows.jsonl"
    rows = rows_path.read_text().splitlines()
    bad = next(d for d in map(json.loads, rows) if d["check"] == "reference_parity"
               and d["kernel"] == "gemv_mq4g256v2_r1" and d["status"] == "pass")
    bad.update(status="fail", measured=0.5, message="injected by the test")
    rows_path.write_text("\n".join([*rows, json.dumps(bad)]) + "\n")
    res = merge.run_step(_admit_step(wf))
    assert res.code == 1, res.output[-3000:]
    assert f"| {ARCH} | qt=44 mq4g256v2 | decode | **rejected** |" in res.output, \
        res.output[-3000:]


def test_expressions_outside_the_known_forms_are_errors() -> None:
    ctx = {"matrix": {"arch": "gfx1100"}, "vars": {}}
    assert substitute("nox -s ${{ matrix.arch }}", ctx) == "nox -s gfx1100"
    assert evaluate("vars.X || '/var/lib/hqval'", ctx) == "/var/lib/hqval"
    with pytest.raises(ExpressionError):
        evaluate("github.sha", ctx)
    with pytest.raises(ExpressionError):
        evaluate("format('{0}', matrix.arch)", ctx)
