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
