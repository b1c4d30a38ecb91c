"""Step detection over nights: one noisy night is no step, a real step is found at its
first night, flapping back to an earlier level is no regression."""

from __future__ import annotations

import numpy as np

from hqval.timing.history import Night, detect, history_svg


def _nights(values: list[float], hw: float = 0.003) -> list[Night]:
    return [Night(f"{i:02d}", v, v - hw, v + hw) for i, v in enumerate(values)]


def _noise(n: int, seed: int = 0, sd: float = 0.002) -> list[float]:
    return list(1.0 + np.random.default_rng(seed).normal(0.0, sd, n))


def test_clean_series_has_no_regression() -> None:
    for seed in range(5):
        fit = detect(_nights(_noise(20, seed)), tolerance=1.01)
        assert fit.regressions == (), fit.steps


def test_one_noisy_night_is_not_a_step() -> None:
    v = _noise(20, 1)
    v[9] = 1.04  # one night 4% off
    fit = detect(_nights(v), tolerance=1.01)
    assert fit.steps == ()


def test_a_real_step_is_found_at_its_first_night() -> None:
    v = _noise(10, 2) + [x * 1.03 for x in _noise(10, 3)]
    fit = detect(_nights(v), tolerance=1.01)
    (step,) = fit.regressions
    assert step.night == "10" and step.confirmed
    assert 1.02 < step.after / step.before < 1.04


def test_a_step_on_the_last_night_is_unconfirmed_and_a_small_step_no_regression() -> None:
    v = [*_noise(12, 4), 1.05]
    (step,) = detect(_nights(v), tolerance=1.01).steps
    assert step.night == "12" and not step.confirmed
    small = _noise(10, 5) + [x * 1.005 for x in _noise(10, 6, sd=0.0003)]
    assert detect(_nights(small, hw=0.0005), tolerance=1.01).regressions == ()


def test_flapping_back_to_an_earlier_level_is_not_a_regression() -> None:
    v = [1.013] * 5 + [0.996] * 9 + [1.012] * 6
    fit = detect(_nights(v), tolerance=1.01)
    assert [s.night for s in fit.steps] == ["05", "14"]
    assert fit.steps[1].recurring and fit.regressions == ()


def test_svg_draws_every_night_and_step() -> None:
    v = _noise(10, 2) + [x * 1.03 for x in _noise(10, 3)]
    svg = history_svg(detect(_nights(v), tolerance=1.01), "cell <&>", tolerance=1.01)
    assert svg.startswith("<svg") and svg.count("<circle") == 20
    assert "step +" in svg and "cell &lt;&amp;&gt;" in svg
