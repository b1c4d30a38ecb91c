"""The manifest's ``audit_waive``: a waived rule that did not pass is ``skipped`` and keeps
what it found."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec


def apply_waivers(spec: KernelSpec, rows: list[Row]) -> list[Row]:
    """The manifest's ``audit_waive`` for ``spec``: a waived rule that did not pass keeps
    what it found in its message and details but is ``skipped`` (it neither fails nor
    passes the kernel); a pass stays a pass.  Either way the row carries the waiver, so the
    checkpoint prints it with its reason next to what the rule said."""
    reasons = dict(spec.audit_waive)
    out = []
    for r in rows:
        rule = r.check.removeprefix("audit_")
        if r.kind != "audit" or rule not in reasons:
            out.append(r)
            continue
        if r.status is Status.PASS:  # nothing to waive: the pass stands, the waiver noted
            out.append(dataclasses.replace(r, details={**r.details, "waived": reasons[rule],
                                                       "waived_status": "pass"}))
            continue
        out.append(dataclasses.replace(
            r, status=Status.SKIPPED,
            message=f"waived by the manifest ({reasons[rule]}); the rule said: {r.status}: "
                    f"{r.message}",
            details={**r.details, "waived": reasons[rule], "waived_status": str(r.status)}))
    return out
