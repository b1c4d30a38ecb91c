"""Run ``hqval bisect`` held after its first step, from outside the product:

    python hold_bisect.py MARKER ARGS...   # hqval ARGS (a bisect)

Once the first step's ``bisect.json`` is written (the bisect's worktree checked out, the
bisect not done), the process writes its pid to the file MARKER and waits there until it
is killed.  A test then kills a bisect that is exactly mid-way, however fast its steps
run on a warm cache (a poll for ``bisect.json`` could find a bisect already finished).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

HOLD_S = 600  # the test kills the holder long before; a stray one then runs on and ends


def main() -> int:
    marker, args = Path(sys.argv[1]), sys.argv[2:]
    import hqval.bisect as bisect
    from hqval.cli import main as hqval_main

    summary = bisect._summary

    def held(job: Any, steps: Any, res: Any, *rest: Any) -> None:
        summary(job, steps, res, *rest)
        if res is None and not marker.exists():  # a step's summary, not the result's
            tmp = marker.with_name(marker.name + ".tmp")
            tmp.write_text(str(os.getpid()))
            os.replace(tmp, marker)  # the test reads a whole pid or nothing
            until = time.monotonic() + HOLD_S
            while time.monotonic() < until:
                time.sleep(0.05)

    bisect._summary = held  # type: ignore[assignment]
    return hqval_main(args)


if __name__ == "__main__":
    sys.exit(main())
