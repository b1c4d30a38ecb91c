"""Run ``hqval`` with one fault put into the running process, from outside the product:

    python launch.py kill-before STEP ARGS...   # SIGKILL at the boundary before STEP
    python launch.py kill-inside STEP ARGS...   # SIGKILL right after STEP's first write
    python launch.py collect-nothing - ARGS...  # every check session selects no cell

The kills are a real ``kill -9`` of the whole process.  ``kill-inside report`` kills after
report.html is written, before checkpoint.md and admission.json.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> int:
    mode, step, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    from hqval.checks import session
    from hqval.cli import main as hqval_main
    from hqval.report import render
    from hqval.run import chain

    run_step = chain.run_step

    def faulty_step(ctx: Any, name: str, fn: Any) -> Any:
        if name == step and mode == "kill-before":
            _die()
        if name == step and mode == "kill-inside":
            append = ctx.writer.append

            def append_then_die(rows: Any) -> int:
                n = int(append(rows))
                if n:
                    _die()
                return n

            ctx.writer.append = append_then_die
            if step == "report":
                render_html = render.render_html

                def html_then_die(*a: Any, **k: Any) -> str:
                    text = render_html(*a, **k)
                    (ctx.writer.path / "report").mkdir(exist_ok=True)
                    (ctx.writer.path / "report" / "report.html").write_text(text)
                    _die()
                    return text

                render.render_html = html_then_die
        return run_step(ctx, name, fn)

    chain.run_step = faulty_step
    if mode == "collect-nothing":
        run_cells = session.run_cells

        def nothing(*a: Any, **k: Any) -> Any:
            return run_cells(*a, **{**k, "keyword": "no_cell_is_named_this"})

        session.run_cells = nothing
    return hqval_main(args)


if __name__ == "__main__":
    sys.exit(main())
