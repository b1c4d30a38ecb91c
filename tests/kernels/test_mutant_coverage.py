"""Every qt=44/45 kernel group of the suite (one qt, signature and WMMA generation) has a
mutant of each misreading its signature admits, so no cell's mutants gate is vacuous: a
payload at +4 always, the wrong half where the format has halves (qt=44), swapped matrices
where the signature has several outputs, a wrong expert where it routes (a top-k or
expert-tile index).  Once the qt=45 fused projections and the qt=45 GEMM had none, and the
mutants gate of their cells held nothing."""

from __future__ import annotations

import re

from hqval.manifest import KernelSpec, load_manifest, load_mutants

CLASSES = ("payload_at4", "lane_half", "swapped", "wrong_expert")


def required(spec: KernelSpec) -> set[str]:
    sig = spec.signature
    need = {"payload_at4"}
    if spec.qt == 44:
        need.add("lane_half")
    if len(sig.outputs) > 1:
        need.add("swapped")
    if any(a.of in ("topk", "expert_tiles") for a in sig.by_role("index")):
        need.add("wrong_expert")
    return need


def gaps(kernels: list[KernelSpec], mutants: list[KernelSpec]) -> dict[tuple[int, str, str],
                                                                   set[str]]:
    groups: dict[tuple[int, str, str], set[str]] = {}
    for k in kernels:
        if k.qt in (44, 45):
            groups.setdefault((k.qt, k.kind, k.requires), set()).update(required(k))
    by_name = {k.name: k for k in kernels}
    for m in mutants:
        real = by_name.get(str(m.mutant_of))
        if real is None:
            continue
        found = {c for c in CLASSES if re.search(rf"(^|_){c}(_|$)", m.name)}
        groups.get((real.qt, real.kind, real.requires), set()).difference_update(found)
    return {g: need for g, need in groups.items() if need}


def test_every_kernel_group_has_a_mutant_of_each_misreading() -> None:
    manifest = load_manifest()
    missing = gaps(list(manifest.kernels), list(load_mutants().kernels))
    assert missing == {}, missing


def test_a_group_without_its_mutants_is_named() -> None:
    """Must say no: without the qt=45 fused gate/up mutants its group is named with both
    misreadings it lacks."""
    manifest = load_manifest()
    mutants = [m for m in load_mutants().kernels
               if m.mutant_of != "gemv_mq4c_gate_up_r1"]
    assert gaps(list(manifest.kernels), mutants) == {
        (45, "gemv_gate_up", "any"): {"payload_at4", "swapped"}}
