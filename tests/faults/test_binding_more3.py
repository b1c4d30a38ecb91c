"""Faults of class 'a run bound to its evidence', fourth round: the envelope's seed, which
every check row is held to, is itself a gating key; a check row states it; the envelope
lists each arch once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import (
    PARITY,
    Result,
    assert_damaged,
    edit_envelope,
    rewrite_each,
    set_fields,
)

Hq = Callable[..., Result]


@pytest.mark.parametrize("seed", ["removed", "0", False, -1, 2**40],
                         ids=["removed", "string", "false", "negative", "huge"])
def test_an_envelope_seed_that_is_no_seed_is_damage(copy_of: Callable[[], Path], hqval: Hq,
                                                    seed: object) -> None:
    run = copy_of()
    edit_envelope(run, lambda e: e.pop("seed") if seed == "removed"
                  else e.__setitem__("seed", seed))
    rewrite_each(run, set_fields(PARITY, seed=1))
    assert_damaged(hqval("admit", str(run)), "envelope.json seed")


def test_a_check_row_stating_no_seed_is_damage(copy_of: Callable[[], Path], hqval: Hq) -> None:
    run = copy_of()
    rewrite_each(run, set_fields(PARITY, seed=None))
    assert_damaged(hqval("admit", str(run)), f"{PARITY}: states no seed")


def test_an_envelope_naming_an_arch_twice_is_damage(copy_of: Callable[[], Path],
                                                    hqval: Hq) -> None:
    run = copy_of()
    edit_envelope(run, lambda e: e.__setitem__("arch", ["gfx1010", "gfx1010"]))
    assert_damaged(hqval("admit", str(run)), "names an arch twice")
