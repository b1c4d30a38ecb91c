"""The nightly workflow (.github/workflows/nightly.yml), tested: linted with actionlint, and
run locally for two matrix entries on the emulator backend, over several nights.

The local run executes the workflow's own ``run:`` steps, parsed from the YAML, in order:
the arch job (checkout, ``nox -s <arch>``, upload) and the merge job (checkout, download,
install, the last successful night, its artifacts as the baseline, ``hqval admit``, the
report, upload).  Only these are stood in for: ``${{ }}`` expressions (the matrix entry,
``vars.HQVAL_BACKEND``, ``inputs``, ``github.token``, step outputs), the three actions,
whose local equivalents are a copy of the working tree (checkout) and copies into and out
of a night's artifact directory (upload/download, ``run-id`` naming an earlier night), and
the GitHub API, served from a local HTTP server with the nights that succeeded.  The lab
here has two runners, so each checkout's ``matrices/arches.yaml`` lists those two targets
(the workflow's matrix is that file's, ``test_runner_labels_are_the_arches``), and the
runners keep what a lab's keep between nights: the code object cache (this machine's) and
the nox virtualenvs (``HQVAL_NOX_ENVDIR``).

What it shows, for the two entries: a runner whose ROCm does not load (``--backend hip``
on this machine) fails its job with hqval's reason and the night names its arch; an
offline runner's arch fails the night by name; a first night without a baseline fails
until it is accepted by hand; a clean night against it is green, with the report's
"since the baseline" section.  The emulator chain runs once per entry, both at once (the
expensive part); the later nights re-admit those runs, and the last two re-run only the
admit step.  One test, so pytest-xdist runs it once.
"""

from __future__ import annotations

import fnmatch
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
# The two matrix entries run locally: any two (the test reads the matrix); these two have
# the fewest kernels on the emulator.
ARCHES = ("gfx1010", "gfx1030")
REPO = "lab/hqval"


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
    bad = WORKFLOW.read_text().replace("${{ matrix.arch }} -- --backend",
                                       "${{ matrix.target }} -- --backend")
    assert bad != WORKFLOW.read_text()
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


Context = Mapping[str, Any]


def _lookup(path: str, context: Context) -> str:
    head, *rest = path.split(".")
    if head not in context:
        raise ExpressionError(f"no context {head!r} for ${{{{ {path} }}}}")
    value: Any = context[head]
    for key in rest:
        value = value.get(key, "") if isinstance(value, Mapping) else ""
    return str(value) if value is not None else ""


def evaluate(expr: str, context: Context) -> str:
    """A ``${{ }}`` expression of the forms the workflow uses: ``ctx.key[.key...]``,
    string literals, and ``a || b``.  Anything else is an error (extend this when the
    workflow grows), so an expression is never silently replaced by an empty string."""
    for part in (p.strip() for p in expr.split("||")):
        if re.fullmatch(r"'[^']*'", part):
            value = part[1:-1]
        elif re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_][\w-]*)+", part):
            value = _lookup(part, context)
        else:
            raise ExpressionError(f"unsupported expression ${{{{ {expr} }}}}")
        if value:
            return value
    return ""


def condition(cond: str, context: Context) -> bool:
    """A step's ``if:`` of the forms the workflow uses: ``always()``, ``X != ''``."""
    if m := re.fullmatch(r"(.+?)\s*!=\s*''", cond):
        return evaluate(m.group(1), context) != ""
    raise ExpressionError(f"step condition {cond!r}: add it to the test")


def substitute(text: str, context: Context) -> str:
    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", lambda m: evaluate(m.group(1), context), text)


@dataclass
class StepResult:
    name: str
    code: int
    output: str


@dataclass
class LocalRunner:
    """Runs one job's steps as a runner would: each ``run:`` with ``bash -e`` in the
    workspace, with the step's ``env`` and the variables GitHub sets (``GITHUB_OUTPUT``
    read back into ``steps.<id>.outputs``); a failed step stops the job unless it has
    ``continue-on-error``; ``if: always()`` steps run regardless.  Artifacts go to this
    night's directory; ``run-id`` downloads from an earlier night's (``nights``)."""

    workspace: Path
    artifacts: Path
    context: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    nights: dict[str, Path] = field(default_factory=dict)
    results: list[StepResult] = field(default_factory=list)

    def checkout(self) -> None:
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"],
                               cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
        for f in (x.decode() for x in files if x):
            src = ROOT / f
            if src.is_file() and not f.startswith("reports/"):  # study data: not used
                dst = self.workspace / f
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
        _lab_matrix(self.workspace / "matrices" / "arches.yaml")

    def upload(self, name: str, path: str) -> None:
        src = self.workspace / path
        if not src.exists():
            return  # if-no-files-found: warn
        shutil.copytree(src, self.artifacts / name, dirs_exist_ok=True)

    def download(self, pattern: str, path: str, run_id: str = "") -> None:
        store = self.nights[run_id] if run_id else self.artifacts
        for art in sorted(store.iterdir()):
            if fnmatch.fnmatch(art.name, pattern):
                shutil.copytree(art, self.workspace / path / art.name, dirs_exist_ok=True)

    def action(self, uses: str, with_: Mapping[str, Any]) -> None:
        name = uses.split("@", 1)[0]
        w = {k: substitute(str(v), self.context) for k, v in with_.items()}
        if name == "actions/checkout":
            self.checkout()
        elif name == "actions/upload-artifact":
            self.upload(w["name"], w["path"])
        elif name == "actions/download-artifact":
            self.download(w["pattern"], w["path"], w.get("run-id", ""))
        else:
            raise AssertionError(f"no local equivalent for {uses}: add one to the test")

    def run_step(self, step: Mapping[str, Any]) -> StepResult:
        name = substitute(str(step.get("name") or step.get("uses") or step["run"][:40]),
                          self.context)
        outputs: dict[str, str] = {}
        if "uses" in step:
            self.action(str(step["uses"]), step.get("with") or {})
            result = StepResult(name, 0, "")
        else:
            script = substitute(str(step["run"]), self.context)
            out_file = self.workspace.parent / f"{self.workspace.name}.output"
            out_file.write_text("")
            # the runner's own environment: not this test's PYTHONPATH (the steps must
            # run the checkout's hqval, as installed there)
            base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env = {**base, **self.env, "GITHUB_WORKSPACE": str(self.workspace),
                   "GITHUB_OUTPUT": str(out_file),
                   **{k: substitute(str(v), self.context)
                      for k, v in (step.get("env") or {}).items()}}
            res = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-c", script],
                                 cwd=self.workspace, env=env, capture_output=True, text=True,
                                 timeout=900, check=False)
            result = StepResult(name, res.returncode, res.stdout + res.stderr)
            outputs = dict(line.split("=", 1) for line in out_file.read_text().splitlines()
                           if "=" in line)
        if "id" in step:
            self.context.setdefault("steps", {})[str(step["id"])] = {"outputs": outputs}
        self.results.append(result)
        return result

    def run_job(self, job: Mapping[str, Any]) -> bool:
        """True when the job succeeded."""
        failed = False
        self.context["steps"] = {}
        for step in job["steps"]:
            cond = str(step.get("if", "")).strip()
            if failed and cond != "always()":
                continue
            if cond not in ("", "always()") and not condition(cond, self.context):
                continue
            res = self.run_step(step)
            if res.code != 0 and not step.get("continue-on-error"):
                failed = True
        return not failed

    def step(self, prefix: str) -> StepResult:
        return next(r for r in self.results if r.name.startswith(prefix))


def _lab_matrix(arches_yaml: Path) -> None:
    """Keep only ``ARCHES`` under the top-level ``arches:`` mapping (the lab's two
    runners), comments and the other sections as they are."""
    out: list[str] = []
    inside, keep = False, True
    for line in arches_yaml.read_text().splitlines(keepends=True):
        if re.match(r"^arches:", line):
            inside = keep = True
        elif inside and re.match(r"^\S", line):
            inside, keep = False, True
        elif inside and (m := re.match(r"^  ([A-Za-z0-9_]+):", line)):
            keep = m.group(1) in ARCHES
        if keep:
            out.append(line)
    arches_yaml.write_text("".join(out))


class FakeApi:
    """GitHub's ``GET /repos/{repo}/actions/workflows/{file}/runs``: the nights that
    succeeded, newest first."""

    def __init__(self) -> None:
        self.succeeded: list[str] = []
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not self.path.startswith(f"/repos/{REPO}/actions/workflows/nightly.yml/"
                                            "runs?") or "status=success" not in self.path:
                    self.send_error(404)
                    return
                body = json.dumps({"workflow_runs": [
                    {"id": int(i), "conclusion": "success", "created_at": f"night {i}",
                     "html_url": f"https://github.com/{REPO}/actions/runs/{i}"}
                    for i in reversed(api.succeeded)]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def github_api() -> Iterator[FakeApi]:
    api = FakeApi()
    yield api
    api.server.shutdown()
    api.server.server_close()


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
def test_the_nightly_workflow_fails_closed_over_nights(tmp_path: Path,
                                                        github_api: FakeApi) -> None:
    """Two matrix entries' arch jobs (the emulator chain, once each), then the nights:
    no baseline (fails, then accepted by hand), a clean night against it (green, with the
    since-the-baseline section), a runner whose ROCm does not load, an offline runner."""
    if shutil.which("clang-19") is None and shutil.which("clang-20") is None:
        pytest.skip("needs clang-19 (apt-get install clang-19 lld-19 llvm-19)")
    if not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout (the local checkout step copies `git ls-files`)")
    wf = _workflow()
    assert set(ARCHES) <= set(wf["jobs"]["arch"]["strategy"]["matrix"]["arch"])
    assert wf["concurrency"] == {"group": "nightly", "cancel-in-progress": False}
    # what a lab's runners keep between nights: the code object cache (this machine's, as
    # hqval's default) and the nox virtualenvs (a directory beside that cache)
    from hqval.toolchain import cache_base

    lab = {"HQVAL_NOX_ENVDIR": str(Path(cache_base(None)).parent / "hqval-nightly-test-nox"),
           "GITHUB_API_URL": github_api.url, "GITHUB_REPOSITORY": REPO,
           "GITHUB_REF_NAME": "main"}
    nights: dict[str, Path] = {}

    def night(run_id: str) -> Path:
        nights[run_id] = tmp_path / f"night-{run_id}"
        nights[run_id].mkdir()
        return nights[run_id]

    def ctx(run_id: str, arch: str = "", **extra: Any) -> dict[str, Any]:
        return {"matrix": {"arch": arch}, "vars": {}, "inputs": {},
                "github": {"token": "local-token", "run_id": run_id}, **extra}

    def arch_job(arch: str, store: Path, backend: str) -> LocalRunner:
        runner = LocalRunner(tmp_path / f"runner-{arch}-{store.name}", store,
                             ctx(store.name, arch, vars={"HQVAL_BACKEND": backend}),
                             env={**lab, "GITHUB_RUN_ID": store.name})
        runner.ok = runner.run_job(wf["jobs"]["arch"])  # type: ignore[attr-defined]
        return runner

    def merge_job(store: Path, **inputs: str) -> LocalRunner:
        # the lab's variable is the repository's: the merge job sees it too
        runner = LocalRunner(tmp_path / f"merge-{store.name}", store,
                             ctx(store.name, inputs=inputs, vars={"HQVAL_BACKEND": "emu"}),
                             env={**lab, "GITHUB_RUN_ID": store.name}, nights=nights)
        runner.ok = runner.run_job(wf["jobs"]["merge"])  # type: ignore[attr-defined]
        return runner

    # night 101: both runners on the emulator (the lab's variable HQVAL_BACKEND=emu), at
    # once, as the matrix's jobs run
    from concurrent.futures import ThreadPoolExecutor

    first = night("101")
    with ThreadPoolExecutor(len(ARCHES)) as pool:
        jobs = list(pool.map(lambda a: arch_job(a, first, "emu"), ARCHES))
    for arch, job in zip(ARCHES, jobs, strict=True):
        assert [r.name for r in job.results] == ["actions/checkout@v4", f"nox -s {arch}",
                                                 "actions/upload-artifact@v4"]
        nox = job.results[1]
        assert job.ok and nox.code == 0, nox.output[-4000:]  # type: ignore[attr-defined]
        assert f"hqval run --arch {arch}" in nox.output
        assert f"{arch}: backend emu (emu: requested by name)" in nox.output
        env = json.loads((first / f"run-{arch}" / "envelope.json").read_text())
        assert env["backend"] == "emu" and env["requested_backend"] == "emu"

    # the merge job: no earlier night succeeded, so no baseline: the night fails, and the
    # report (built after admit) and admission.json are uploaded all the same
    merge_spec = wf["jobs"]["merge"]
    assert merge_spec["needs"] == "arch" and merge_spec.get("if") == "always()"
    merge = merge_job(first)
    assert not merge.ok  # type: ignore[attr-defined]
    assert "no successful run of nightly.yml" in merge.step("last successful night").output
    admit = merge.step("hqval admit")
    assert admit.code == 2 and "::error::no baseline" in admit.output, admit.output[-3000:]
    for arch in ARCHES:
        assert f"| {arch} |" in admit.output
    assert (first / "report" / "report.html").is_file()
    assert json.loads((first / "report" / "admission.json").read_text())[
        "missing_arches"] == []
    # accepted by hand (workflow_dispatch, accept_missing_baseline): that night succeeds
    merge.context["inputs"] = {"accept_missing_baseline": "true"}
    accepted = merge.run_step(_admit_step(wf))
    assert accepted.code == 0, accepted.output[-3000:]
    assert "admitted without one" in accepted.output
    github_api.succeeded.append("101")

    # night 102, clean (the runners run again: every cell's inputs unchanged, so the cell
    # cache answers them; a copy of night 101's runs would be the baseline itself, which
    # admit refuses): green, against night 101's artifacts, and the report has the section
    # since the baseline
    second = night("102")
    with ThreadPoolExecutor(len(ARCHES)) as pool:
        again = list(pool.map(lambda a: arch_job(a, second, "emu"), ARCHES))
    assert all(job.ok for job in again), [j.results[1].output[-2000:] for j in again]
    merge = merge_job(second)
    outputs = {r.name: r.code for r in merge.results}
    assert merge.ok, {r.name: (r.code, r.output[-1500:]) for r in merge.results}  # type: ignore[attr-defined]
    assert "baseline: run 101" in merge.step("last successful night").output
    assert all((merge.workspace / "baseline" / f"run-{a}").is_dir() for a in ARCHES)
    assert "no baseline" not in merge.step("hqval admit").output, outputs
    html = (second / "report" / "report.html").read_text()
    assert 'id="baseline"' in html and "Since the baseline" in html
    # the same night where the lab's variable is unset, so the fleet expects hip: the
    # emulated runs fail it, each arch named
    merge.context["vars"] = {}
    on_emu = merge.run_step(_admit_step(wf))
    assert on_emu.code == 2, on_emu.output[-3000:]
    for arch in ARCHES:
        assert f"hqval admit: {arch}: ran on emu, not hip (--expect-backend)" in on_emu.output
    merge.context["vars"] = {"HQVAL_BACKEND": "emu"}

    # night 103: gfx1010's ROCm does not load (the workflow's own backend, hip, on this
    # machine): its job fails with hqval's reason, and the night names the arch
    third = night("103")
    broken = arch_job(ARCHES[0], third, "")
    nox = broken.results[1]
    assert not broken.ok and nox.code == 1  # type: ignore[attr-defined]
    assert "backend 'hip'" in nox.output and f"::error::{ARCHES[0]}: no run" in nox.output
    shutil.copytree(second / f"run-{ARCHES[1]}", third / f"run-{ARCHES[1]}")

    def admit_again(store: Path) -> StepResult:
        """The merge job's admit step over ``store``'s runs (in night 102's workspace,
        with its baseline: the install and download steps would be the same)."""
        merge.artifacts = store
        shutil.rmtree(merge.workspace / "runs")
        merge.download("run-*", "runs")
        return merge.run_step(_admit_step(wf))

    admit = admit_again(third)
    assert admit.code == 2, admit.output[-3000:]
    assert f"hqval admit: {ARCHES[0]}: no run (--expect-arch)" in admit.output

    # night 104: gfx1030's runner is offline (no job, no artifact): the night names it
    fourth = night("104")
    shutil.copytree(second / f"run-{ARCHES[0]}", fourth / f"run-{ARCHES[0]}")
    offline = admit_again(fourth)
    assert offline.code == 2, offline.output[-3000:]
    assert f"hqval admit: {ARCHES[1]}: no run (--expect-arch)" in offline.output
    assert f"{ARCHES[0]}: no run" not in offline.output


def test_expressions_outside_the_known_forms_are_errors() -> None:
    ctx = {"matrix": {"arch": "gfx1100"}, "vars": {},
           "steps": {"last": {"outputs": {"run_id": "7"}}}}
    assert substitute("nox -s ${{ matrix.arch }}", ctx) == "nox -s gfx1100"
    assert evaluate("vars.X || 'hip'", ctx) == "hip"
    assert evaluate("steps.last.outputs.run_id", ctx) == "7"
    assert condition("steps.last.outputs.run_id != ''", ctx)
    assert not condition("steps.none.outputs.run_id != ''", ctx)
    with pytest.raises(ExpressionError):
        evaluate("github.sha", ctx)
    with pytest.raises(ExpressionError):
        evaluate("format('{0}', matrix.arch)", ctx)
    with pytest.raises(ExpressionError):
        condition("success()", ctx)
