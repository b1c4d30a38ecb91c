"""Codec quality table (design note section 5): overall MSE, tail-1% MSE, max_rel and bytes
per group for every format, on the post-FWHT synthetic set and the real-weight set.

Metric definitions (the note's):

* ``mse``: mean of ``(decode(encode(w)) - w)^2`` over every weight.
* ``tail_mse``: the same mean over the weights with ``|w|`` at or above the 99th percentile
  of ``|w|`` of that data set (the "tail 1%").
* ``max_rel``: per 256-group, the relative error of the group's largest-magnitude weight;
  the maximum over groups.  Min/max fitting makes each group's extremes representable, so
  affine formats score ~0 up to header rounding; that is the property codebooks lose.

Codec MSE is not a KLD proxy (section 5); the table records codec error only.

The direction check encodes section 5's claims: at equal 136 bytes qt=44 beats qt=13 on
MSE and tail MSE, and the 144 B ``mq4_k`` beats qt=44 on both.  If a measurement
contradicts them it is reported as a failed row, never adjusted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from hqval import markdown as md
from hqval.formats import GROUP_WEIGHTS, Format, all_formats, by_qt
from hqval.formats.base import F32Array
from hqval.result import Row, Status

TAIL_QUANTILE = 0.99


@dataclass(frozen=True)
class Quality:
    dataset: str
    format: str
    qt: int
    status: str
    group_bytes: int
    bits_per_weight: float
    mse: float
    tail_mse: float
    max_rel: float
    max_abs: float
    n_weights: int
    tail_threshold: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure(fmt: Format, w: F32Array, dataset: str) -> Quality:
    d = fmt.roundtrip(w)  # validates w (float32, 2-D, K % 256 == 0, finite)
    err = d.astype(np.float64) - w.astype(np.float64)
    sq = err * err
    aw = np.abs(w)
    thr = float(np.quantile(aw, TAIL_QUANTILE))
    tail = aw >= thr
    groups = aw.reshape(-1, GROUP_WEIGHTS)
    j = groups.argmax(axis=1)
    rows = np.arange(groups.shape[0])
    peak = groups[rows, j].astype(np.float64)
    peak_err = np.abs(err.reshape(-1, GROUP_WEIGHTS)[rows, j])
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(peak > 0, peak_err / peak, 0.0)
    return Quality(
        dataset=dataset, format=fmt.name, qt=fmt.qt, status=fmt.status,
        group_bytes=fmt.group_bytes, bits_per_weight=8 * fmt.group_bytes / GROUP_WEIGHTS,
        mse=float(sq.mean()), tail_mse=float(sq[tail].mean()), max_rel=float(rel.max()),
        max_abs=float(np.abs(err).max()), n_weights=int(w.size), tail_threshold=thr,
    )


def quality_table(datasets: dict[str, F32Array],
                  formats: Sequence[Format] | None = None) -> list[Quality]:
    fmts = list(formats) if formats is not None else list(all_formats())
    return [measure(f, w, name) for name, w in datasets.items() for f in fmts]


def default_datasets(M: int = 256, K: int = 4096, seed: int = 0,
                     real: bool = True) -> dict[str, F32Array]:
    """The two section 5 sets: Gaussian sigma 0.011 (what post-FWHT weights look like) and
    CREPE tiny's real 256-blocks, FWHT-rotated (every real group, K=256 rows)."""
    from hqval import fixtures

    sets: dict[str, F32Array] = {}
    g = fixtures.gaussian(M=M, K=K, seed=seed, qts=(44,)).require()
    assert g.weights is not None
    sets["synthetic"] = g.weights
    if real:
        r = fixtures.real_weights(K=GROUP_WEIGHTS, qts=(44,)).require()
        assert r.weights is not None
        sets["real"] = r.weights
    return sets


# -- section 5 direction ----------------------------------------------------------------
CLAIMS: tuple[tuple[int, int, str], ...] = (
    (44, 13, "qt=44 below qt=13 at the same 136 B (section 5)"),
    (1046, 44, "mq4_k (144 B) below qt=44 (section 1c)"),
)


def direction_rows(table: Iterable[Quality]) -> list[Row]:
    """One row per (claim, dataset, metric): PASS when the better-claimed format measures
    strictly lower."""
    by = {(q.dataset, q.qt): q for q in table}
    rows = []
    for dataset in sorted({q.dataset for q in by.values()}):
        for better, worse, claim in CLAIMS:
            if (dataset, better) not in by or (dataset, worse) not in by:
                continue
            b, w = by[(dataset, better)], by[(dataset, worse)]
            for metric in ("mse", "tail_mse"):
                vb, vw = getattr(b, metric), getattr(w, metric)
                ratio = vb / vw if vw else float("inf")
                rows.append(Row(
                    kind="check", check=f"section5_{metric}", kernel=f"{b.format}<{w.format}",
                    arch="host", backend="numpy",
                    status=Status.PASS if vb < vw else Status.FAIL,
                    measured=ratio, tolerance=1.0,
                    derivation=f"{claim}: ratio {metric}({b.format})/{metric}({w.format}) "
                               f"must be < 1",
                    message=f"{dataset}: {metric} {vb:.4e} vs {vw:.4e} ({(ratio - 1):+.1%})",
                    details={"dataset": dataset, "better": b.to_dict(), "worse": w.to_dict()},
                ))
    return rows


def table_rows(table: Iterable[Quality]) -> list[Row]:
    """The table itself as rows (kind ``check``, status PASS: a measurement, no bound)."""
    return [
        Row(kind="check", check="codec_quality", kernel=q.format, arch="host",
            backend="numpy", status=Status.PASS, measured=q.mse,
            message=f"{q.dataset}: mse {q.mse:.4e} tail {q.tail_mse:.4e}",
            details=q.to_dict())
        for q in table
    ]


def format_table(table: Sequence[Quality]) -> str:
    """Markdown table, one block per dataset, with each format's change vs qt=13."""
    out = []
    for dataset in dict.fromkeys(q.dataset for q in table):
        rows = [q for q in table if q.dataset == dataset]
        base = next((q for q in rows if q.qt == 13), None)
        n = rows[0].n_weights
        out.append(f"### {dataset}: {n:,} weights ({n // GROUP_WEIGHTS:,} groups), "
                   f"tail threshold |w| >= {rows[0].tail_threshold:.4e}")
        out.append("")
        out.append(md.table(
            ["format", "qt", "status", "B/group", "MSE", "vs qt13", "tail-1% MSE", "vs qt13",
             "max_rel"],
            [[q.format, q.qt, q.status, q.group_bytes, f"{q.mse:.4e}",
              f"{q.mse / base.mse - 1:+.1%}" if base else "", f"{q.tail_mse:.4e}",
              f"{q.tail_mse / base.tail_mse - 1:+.1%}" if base else "", f"{q.max_rel:.3%}"]
             for q in rows], align="lrlrrrrrr"))
        out.append("")
    return "\n".join(out)


def bench_codec(qt: int = 44, M: int = 17408, K: int = 5120, seed: int = 0,
                repeats: int = 3) -> dict[str, Any]:
    """Time ``encode`` + ``decode`` of an M x K Gaussian tensor (best of ``repeats``).
    The target: qt=44, 17408 x 5120, <= 3 s on one core."""
    import os
    import time

    fmt = by_qt(qt)
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((M, K), dtype=np.float32) * np.float32(0.011)
    enc, dec = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        blob = fmt.encode(w)
        t1 = time.perf_counter()
        fmt.decode(blob, K)
        t2 = time.perf_counter()
        enc.append(t1 - t0)
        dec.append(t2 - t1)
    total = [e + d for e, d in zip(enc, dec, strict=True)]
    best = int(np.argmin(total))
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return {"format": fmt.name, "qt": qt, "M": M, "K": K, "repeats": repeats,
            "encode_s": enc[best], "decode_s": dec[best], "total_s": total[best],
            "all_total_s": total, "weights_per_s": M * K / total[best],
            "cpus": affinity, "numpy": np.__version__}
