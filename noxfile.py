"""nox entry points: one session per arch in matrices/arches.yaml, plus matrix, tests, lint.

    nox -s gfx1100        # hqval run --arch gfx1100 --out runs/gfx1100-<UTC timestamp>
    nox -s matrix         # every arch in one run directory
    nox -s tests          # pytest -n auto over tests/
    nox -s lint           # ruff + mypy

Arguments after ``--`` go to the command (``nox -s gfx1100 -- --backend emu``).  The LLVM
toolchain (clang-19, lld-19, llvm-19) comes from apt, not pip: when it is missing and
nox runs as root the session installs it with apt-get and says so; otherwise it stops at
once with the exact install line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
ARCHES_YAML = ROOT / "matrices" / "arches.yaml"

# tool on PATH -> the Debian package that provides it
TOOLCHAIN = {"clang-19": "clang-19", "ld.lld-19": "lld-19", "llvm-objdump-19": "llvm-19",
             "llvm-readelf-19": "llvm-19"}
BROWSER = {"chromium": "chromium"}
# actionlint runs shellcheck over the workflow's run: scripts when it is on PATH
SHELLCHECK = {"shellcheck": "shellcheck"}
# bubblewrap: hqval runs clang inside it where it is installed (hqval doctor says so)
SANDBOX = {"bwrap": "bubblewrap"}
# ROCm's HIP headers (Debian packages ROCm 5.2's under /usr/include/hip): the prelude test
# builds every kernel with them and checks the machine code equals the bare-clang build.
HIP_HEADERS = {"/usr/include/hip/hip_runtime.h": "libamdhip64-dev"}
# ROCm's device libraries (Debian 12: ROCm 5.2's, bitcode for gfx10.3): a build with ROCm's
# headers links them; the toolchain test builds one through a ROCm-shaped root.
DEVICE_LIBS = {"/usr/lib/x86_64-linux-gnu/amdgcn/bitcode/ockl.bc": "rocm-device-libs"}

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True
# A lab's runner may keep the session virtualenvs outside the checkout, which
# actions/checkout empties every night: HQVAL_NOX_ENVDIR=/var/cache/hqval-nox (the nightly
# test shares one between its local runners the same way).
if os.environ.get("HQVAL_NOX_ENVDIR"):
    nox.options.envdir = os.environ["HQVAL_NOX_ENVDIR"]


def arch_names(path: Path = ARCHES_YAML) -> list[str]:
    """The keys of the top-level ``arches:`` mapping.  Read line by line so the noxfile
    needs nothing but nox (PyYAML lives in the session venvs, not in nox's own);
    tests/test_noxfile.py checks the result against ``hqval.matrix.load_arches()``."""
    names: list[str] = []
    inside = False
    for line in path.read_text().splitlines():
        if re.match(r"^arches:\s*(#.*)?$", line):
            inside = True
            continue
        if inside and re.match(r"^\S", line):
            break  # the next top-level key
        m = re.match(r"^  ([A-Za-z0-9_]+):\s*(#.*)?$", line) if inside else None
        if m:
            names.append(m.group(1))
    if not names:
        raise RuntimeError(f"{path}: found no arches under a top-level 'arches:' mapping")
    return names


def missing_packages(tools: dict[str, str]) -> list[str]:
    """Packages behind the tools (names on PATH) or files (absolute paths) not present."""
    def present(tool: str) -> bool:
        return Path(tool).is_file() if tool.startswith("/") else shutil.which(tool) is not None

    return sorted({pkg for tool, pkg in tools.items() if not present(tool)})


def ensure_apt(session: nox.Session, tools: dict[str, str], why: str,
               required: bool = True) -> None:
    """Install the Debian packages behind ``tools`` when missing (as root), else stop
    with the exact command (or, for an optional tool, say what will be skipped)."""
    packages = missing_packages(tools)
    if not required:  # an optional package this release does not carry is a skip, said
        unknown = [p for p in packages if shutil.which("apt-cache") and subprocess.run(
            ["apt-cache", "show", p], capture_output=True, check=False).returncode != 0]
        if unknown:
            session.warn(f"{why}: {', '.join(unknown)} not in this release's packages; "
                         "the tests that need it will skip")
        packages = [p for p in packages if p not in unknown]
    if not packages:
        return
    line = f"apt-get install -y {' '.join(packages)}"
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        session.log(f"{why}: {', '.join(packages)} missing; installing with `{line}`")
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        session.run("apt-get", "update", "-qq", external=True, env=env)
        session.run("apt-get", "install", "-y", "-qq", *packages, external=True, env=env)
        still = missing_packages(tools)
        if still:
            session.error(f"{', '.join(still)} still missing after apt-get install")
        return
    message = f"{why}: {', '.join(packages)} missing. Install them with:\n    sudo {line}"
    if required:
        session.error(message)
    session.warn(message + "\n(not root: continuing; the tests that need it will skip)")


def install_suite(session: nox.Session, extras: str = "") -> None:
    """The package into the session venv; the hip extra where ROCm is installed."""
    if Path("/opt/rocm").is_dir() and not extras:
        session.log("ROCm found at /opt/rocm: installing the hip extra (hip-python)")
        extras = "hip"
    session.install("-e", f".[{extras}]" if extras else ".")
    # The install is editable, so nothing has compiled the package's bytecode; where the
    # environment sets PYTHONDONTWRITEBYTECODE (CI runners often do) no process writes it,
    # and every process that imports hqval (each check worker of a run, each command a
    # test runs) compiles its ~140 modules again.  py_compile writes it regardless, once.
    session.run("python", "-m", "compileall", "-q", "hqval", silent=True)


def run_dir(tag: str) -> str:
    return str(Path("runs") / f"{tag}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}")


def _arch_session(arch: str) -> None:
    @nox.session(name=arch)
    def session(session: nox.Session) -> None:
        ensure_apt(session, TOOLCHAIN, "compiling the gfx code objects")
        install_suite(session)
        session.run("hqval", "run", "--arch", arch, "--out", run_dir(arch), *session.posargs)

    session.__doc__ = f"hqval run --arch {arch}: compile, audit, checks, mutants, timing " \
                      "where hardware exists, admission, report"


for _arch in arch_names():
    _arch_session(_arch)


@nox.session
def matrix(session: nox.Session) -> None:
    """hqval run over every arch in arches.yaml, into one run directory."""
    ensure_apt(session, TOOLCHAIN, "compiling the gfx code objects")
    install_suite(session)
    session.run("hqval", "run", "--arch", "all", "--out", run_dir("matrix"), *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite, in parallel (pytest -n auto), including the headless Chromium test."""
    ensure_apt(session, TOOLCHAIN, "tests compile real code objects")
    ensure_apt(session, BROWSER, "the report test opens the HTML in headless Chromium",
               required=False)
    ensure_apt(session, SHELLCHECK, "actionlint checks the nightly workflow's scripts with "
               "shellcheck", required=False)
    ensure_apt(session, SANDBOX, "clang runs inside bubblewrap (the contained compiler)",
               required=False)
    if not Path("/opt/rocm/include/hip/hip_runtime.h").is_file():
        ensure_apt(session, HIP_HEADERS, "the prelude test compares builds with ROCm's HIP "
                   "headers", required=False)
        ensure_apt(session, DEVICE_LIBS, "the toolchain test links ROCm's device libraries",
                   required=False)
    # hip-python imports without ROCm, so the HIP backend's API-signature tests run too;
    # NVRTC and nvdisasm need no GPU, so the CUDA builds of the kernels are tested too;
    # the oracle extra (tinygrad's ISA pseudocode text) cross-checks the emulator.
    install_suite(session, "dev,hip,cuda,oracle")
    # the 25 slowest tests are listed at the end: where the suite's time goes, in every
    # CI log
    session.run("pytest", "-n", "auto", "--durations=25", "tests/", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and mypy (strict, configured in pyproject.toml)."""
    install_suite(session, "dev")
    session.run("ruff", "check", "hqval", "tests", "noxfile.py", "setup.py")
    session.run("mypy", *session.posargs)
