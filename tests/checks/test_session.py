"""One check session: rows reach the callback as cells finish, cells a run already has
are deselected in every process, and a session that collects nothing says so."""

from __future__ import annotations

import pytest

from hqval.checks.session import run_cells
from hqval.manifest import DEFAULT_MANIFEST
from hqval.result import Row, Status

KEY = "gemv_mq4c_r1 and (bit_identity or padded_offset)"
BIT = "bit_identity[gemv_mq4c_r1|gfx1100|emu]"
PAD = "padded_offset[gemv_mq4c_r1|gfx1100|emu]"


def test_rows_reach_the_callback_and_done_cells_are_deselected() -> None:
    seen: list[Row] = []
    result = run_cells([DEFAULT_MANIFEST], ["gfx1100"], "emu", keyword=KEY, workers="0",
                       on_row=seen.append)
    assert result.code == 0 and result.collected == 2 and not result.problem()
    assert {r.identity: r.status for r in seen} == {BIT: Status.PASS, PAD: Status.PASS}
    assert result.output  # pytest's own output was kept, not printed
    again = run_cells([DEFAULT_MANIFEST], ["gfx1100"], "emu", keyword=KEY, workers="0",
                      skip={BIT})
    assert [r.identity for r in again.rows] == [PAD] and again.collected == 1


def test_nothing_collected_is_reported() -> None:
    result = run_cells([DEFAULT_MANIFEST], ["gfx1100"], "emu", keyword="no_such_cell",
                       workers="0")
    assert result.collected == 0 and result.rows == [] and result.code == 5


def test_installed_plugins_are_blocked_but_xdist_kept_for_workers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from hqval.checks import session

    monkeypatch.setattr(session, "_installed_plugins",
                        lambda: ["hypothesispytest", "randomly", "xdist", "xdist.looponfail"])
    with_workers = session.isolation_args(workers=True)
    assert with_workers == ["--assert=plain", "-p", "no:hypothesispytest", "-p", "no:randomly"]
    alone = session.isolation_args(workers=False)
    assert alone == ["--assert=plain", "-p", "no:hypothesispytest", "-p", "no:randomly",
                     "-p", "no:xdist", "-p", "no:xdist.looponfail"]


def test_a_session_loads_no_installed_plugin_it_does_not_name() -> None:
    """hypothesis is installed (a dev extra) and auto-loads into a plain pytest session;
    the check session does not load it (nor rewrite asserts)."""
    from hqval.checks import session

    seen: dict[str, object] = {}

    class Probe:
        def pytest_configure(self, config: pytest.Config) -> None:
            seen["names"] = {n for n, p in config.pluginmanager.list_name_plugin()
                             if p is not None}  # a blocked name is listed with None
            seen["assert"] = config.getoption("assertmode")

    base = [str(DEFAULT_MANIFEST), *session.PLUGIN_ARGS, "-p", "no:cacheprovider",
            "--collect-only", "-qq", "--hqval-arch", "gfx1100", "--hqval-backend", "emu",
            "-k", "no_such_cell"]
    assert "hypothesispytest" in session._installed_plugins()
    pytest.main([*base, *session.isolation_args(False)], plugins=[Probe()])
    assert "hqval.checks.plugin" in seen["names"]
    assert "hypothesispytest" not in seen["names"] and seen["assert"] == "plain"
    pytest.main(base, plugins=[Probe()])  # without the isolation: the probe does see it
    assert "hypothesispytest" in seen["names"] and seen["assert"] == "rewrite"
