"""The device timing lock excludes a second timing run, also from another process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hqval.timing.lock import DeviceBusy, device_lock, lock_path


def test_second_holder_is_refused_and_named(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HQVAL_LOCK_DIR", str(tmp_path))
    with device_lock("cuda0-NVIDIA H200 (sm_90)") as path:
        assert path.parent == tmp_path and " " not in path.name
        probe = (
            "import sys\n"
            "from hqval.timing.lock import DeviceBusy, device_lock\n"
            "try:\n"
            "    with device_lock('cuda0-NVIDIA H200 (sm_90)', wait=False):\n"
            "        sys.exit(0)\n"
            "except DeviceBusy as e:\n"
            "    print(e); sys.exit(3)\n"
        )
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             env={"HQVAL_LOCK_DIR": str(tmp_path), "PATH": ""}, timeout=60,
                             check=False)
        assert out.returncode == 3, out.stderr
        assert "never run concurrently" in out.stdout and "pid" in out.stdout
    # Released: a new holder gets it at once.
    with device_lock("cuda0-NVIDIA H200 (sm_90)", wait=False):
        pass


def test_same_process_nonblocking_second_lock_is_busy(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HQVAL_LOCK_DIR", str(tmp_path))
    with (device_lock("hip0-gfx1100"), pytest.raises(DeviceBusy),
          device_lock("hip0-gfx1100", wait=False)):
        pass
    assert lock_path("hip0-gfx1100") != lock_path("hip1-gfx1100")


_HOLD = (
    "import sys, time\n"
    "from hqval.timing.lock import device_lock\n"
    "with device_lock('hip0-gfx1100'):\n"
    "    print('held', flush=True)\n"
    "    sys.stdin.readline()\n"
)


def _holder_process(tmp_path: Path) -> subprocess.Popen[str]:
    """Another process holding hip0-gfx1100's lock until its stdin is closed."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            env={"HQVAL_LOCK_DIR": str(tmp_path), "PATH": ""})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    proc.stdout.close()
    return proc


def test_a_waiter_gives_up_at_its_deadline_naming_the_holder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A holder that never lets go (a stuck run of another night) costs a waiter its wait,
    not the night: DeviceBusy, an infrastructure error, names the holder's pid and the wait."""
    from hqval.errors import is_infrastructure
    from hqval.timing import lock

    monkeypatch.setenv("HQVAL_LOCK_DIR", str(tmp_path))
    proc = _holder_process(tmp_path)
    try:
        now = [0.0]
        monkeypatch.setattr(lock, "_clock", lambda: now[0])
        monkeypatch.setattr(lock.time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
        told: list[str] = []
        with pytest.raises(DeviceBusy) as info, \
                device_lock("hip0-gfx1100", wait_s=30, on_wait=told.append):
            pass
        assert f"pid {proc.pid}" in str(info.value) and "after waiting 30 s" in str(info.value)
        assert is_infrastructure(info.value)
        assert len(told) == 1 and f"pid {proc.pid}" in told[0] and "up to 30 s" in told[0]
        assert now[0] >= 30
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)


def test_a_waiter_gets_the_lock_when_the_holder_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hqval.timing import lock

    monkeypatch.setenv("HQVAL_LOCK_DIR", str(tmp_path))
    proc = _holder_process(tmp_path)
    assert proc.stdin is not None
    real_sleep = lock.time.sleep
    tries = [0]

    def sleep(s: float) -> None:
        tries[0] += 1
        if tries[0] == 3:  # the holder ends while this one waits
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=60)
        real_sleep(0.01)

    monkeypatch.setattr(lock.time, "sleep", sleep)
    with device_lock("hip0-gfx1100", wait_s=600) as path:
        assert f"pid {__import__('os').getpid()}" in path.read_text()
    assert tries[0] >= 3


def test_a_lock_wait_must_be_positive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HQVAL_LOCK_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="must be > 0"), device_lock("hip0-gfx1100", wait_s=0):
        pass
