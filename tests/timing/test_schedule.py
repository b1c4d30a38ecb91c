"""ABBA order and cold-mode rotation sizing."""

from __future__ import annotations

import itertools

import pytest

from hqval.timing.schedule import COLD_EVICTION_FACTOR, abba_order, copy_sequence, rotation_copies

MB = 1 << 20


def test_abba_alternates_and_balances() -> None:
    order = abba_order(8)
    flat = [arm for pair in order for arm in pair]
    assert "".join("AB"[i] for i in flat) == "ABBAABBAABBAABBA"
    firsts = [pair[0] for pair in order]
    assert firsts.count(0) == firsts.count(1) == 4
    # Each arm follows the other as often as itself across the stream's transitions.
    transitions = list(itertools.pairwise(flat))
    assert transitions.count((0, 1)) + transitions.count((1, 0)) > 0
    assert abs(transitions.count((0, 0)) - transitions.count((1, 1))) <= 1


@pytest.mark.parametrize("n", [0, 1, 3, 99])
def test_abba_rejects_odd_or_tiny(n: int) -> None:
    with pytest.raises(ValueError, match="even count"):
        abba_order(n)


def test_hot_is_one_copy_per_run() -> None:
    from hqval.timing.schedule import HOT_COPIES

    assert rotation_copies(11 * MB, 50 * MB, "hot") == HOT_COPIES == 3


def test_cold_copies_exceed_llc_with_margin() -> None:
    llc = 50 * MB
    for wbytes in (11 * MB, 38 * MB, 75 * MB, 400 * MB):
        n = rotation_copies(wbytes, llc, "cold")
        assert n >= 2
        # Between two reads of one copy, the others stream >= factor x LLC ...
        assert (n - 1) * wbytes >= COLD_EVICTION_FACTOR * llc
        # ... and n is the smallest such count (no needless device memory).
        assert n == 2 or (n - 2) * wbytes < COLD_EVICTION_FACTOR * llc
    # H200 numbers: 17408x5120 at 136 B/256 weights is 47.3 MB: 4 copies.
    assert rotation_copies(17408 * 20 * 136, 50 * MB, "cold") == 4


def test_cold_without_llc_is_an_error_naming_the_fix() -> None:
    with pytest.raises(ValueError, match=r"arches\.yaml"):
        rotation_copies(MB, 0, "cold")
    with pytest.raises(ValueError, match="hot or cold"):
        rotation_copies(MB, MB, "warm")  # type: ignore[arg-type]


def test_copy_sequence_continues_after_warmup() -> None:
    assert copy_sequence(5, 3, warmup=2) == [2, 0, 1, 2, 0]


def test_hot_primes_cold_does_not() -> None:
    from hqval.timing.schedule import primes

    assert primes("hot") == 1 and primes("cold") == 0
    with pytest.raises(ValueError, match="hot or cold"):
        primes("warm")  # type: ignore[arg-type]
