"""The kernel table a run's envelope records, confirmed before the judge trusts it.

The table says which (qt, path) each kernel's rows are evidence for, where it is built
(``requires``, ``built_for``), what is a mutant (``mutant_of``) or a suite self-test
(``self_test``), what never gates (``production: false``), which audit rules the
manifest waives (``audit_waive``) and the threads per block the VGPR budget of its audit
rows is re-derived from (``block``).  An envelope is a file in the run directory: an edit
of it (a failing kernel made ``production: false``) must not change a verdict.

``confirm_table``: where the manifest the run recorded (``manifest``, ``manifest_sha256``;
its mutant manifest ``mutants_manifest``, ``mutants_sha256``) is there with that hash, the
table is re-derived from it exactly as ``hqval run`` made it (``hqval.manifest.
kernel_table``) and every difference in a field the judge reads is damage, naming the
field.  Where it is not, the table is checked against the rows' own evidence: a flag that
would set aside a failing or erring row or an expected cell without a row
(``production: false``, ``self_test``) is damage, a mutant without a verdict row of its own
is damage, and the rest is said in one line (unconfirmed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import Manifest

# the fields of a kernel table entry the judge reads (hqval.admission.evidence.kernel_table,
# _waiver_damage and audit_bound_damage, which re-derives the VGPR budget from ``block``):
# each is compared with the manifest's
GATING_FIELDS = ("qt", "kind", "path", "requires", "built_for", "mutant_of", "production",
                 "self_test", "audit_waive", "block")


@dataclass(frozen=True)
class TableCheck:
    """``damage``: entries the manifest or the rows contradict (exit 2); ``note``: one line
    when part of the table could not be confirmed (empty when all of it was)."""

    damage: tuple[str, ...] = ()
    note: str = ""


def _gating(entry: Mapping[str, Any]) -> dict[str, Any]:
    out = {f: entry.get(f) for f in GATING_FIELDS}
    out["production"] = entry.get("production") is not False
    out["self_test"] = bool(entry.get("self_test"))
    rules = set()
    for w in entry.get("audit_waive") or []:
        if isinstance(w, Mapping) and "rule" in w:
            rules.add(str(w["rule"]))
        elif isinstance(w, (list, tuple)) and w:
            rules.add(str(w[0]))
    out["audit_waive"] = sorted(rules)
    return out


def _digest(path: str) -> tuple[str, str]:
    """(sha256, "") of a regular file, or ("", why it cannot be read)."""
    from hqval.safeio import SafeIOError
    from hqval.toolchain import file_sha256

    if not Path(path).is_file():
        return "", f"{path} is not there"
    try:
        return file_sha256(Path(path)), ""
    except (OSError, SafeIOError) as exc:
        return "", f"{path}: {getattr(exc, 'strerror', None) or exc}"


def _mutants_to_load(envelope: Mapping[str, Any], manifest: Manifest
                     ) -> tuple[str | None, str, list[str]]:
    """The mutant manifest whose kernels join the re-derived table (None: none), why the
    mutants are unconfirmed ("": they are not), and damage in the name the envelope
    records."""
    from hqval.manifest import DEFAULT_MUTANTS

    if "mutants_manifest" not in envelope:
        return None, "the run recorded no mutant manifest (mutants_manifest)", []
    mpath = envelope["mutants_manifest"]
    if mpath is None:
        return None, "", []
    runs = str(Path(manifest.mutants or DEFAULT_MUTANTS).resolve())
    now, why = _digest(str(mpath))
    as_recorded = not why and now == envelope.get("mutants_sha256")
    if mpath != runs and manifest.mutants is None and as_recorded:
        # a manifest naming no mutants runs the suite's own, from the hqval that ran it:
        # another installation's copy (a runner's checkout, admitted by a merge job) is
        # that run's mutant manifest when it is there as the run recorded it: confirmed
        # with this one's content, unconfirmed with another's (another hqval)
        if now != _digest(runs)[0]:
            return None, (f"its mutant manifest {mpath} is the suite's own of another hqval "
                          "installation, not this one's"), []
        runs = mpath
    if mpath != runs:
        return None, "its mutant manifest is not the one its manifest runs", [
            f"envelope.json mutants_manifest is {mpath!r}, but the run's manifest "
            f"{envelope.get('manifest')} runs the mutants of {runs} (damaged)"]
    if not as_recorded:
        return None, (f"its mutant manifest {why}" if why else
                      f"its mutant manifest {mpath} changed since the run"), []
    return str(mpath), "", []


def _derived(envelope: Mapping[str, Any]
             ) -> tuple[dict[str, dict[str, object]] | None, str, list[str]]:
    """The table re-derived from the run's manifest (None where it cannot be), why part
    of it is unconfirmed ("": none; with a table: its mutants, which it then leaves out),
    and damage in the names of the manifests the envelope records."""
    from hqval.manifest import ManifestError, kernel_table, load_manifest, load_mutants
    from hqval.matrix import resolve_arches

    path, sha = envelope.get("manifest"), envelope.get("manifest_sha256")
    if not isinstance(path, str) or not isinstance(sha, str):
        return None, "the envelope records no manifest (manifest, manifest_sha256)", []
    now, why = _digest(path)
    if why:
        return None, f"its manifest {why}", []
    if now != sha:
        return None, (f"its manifest {path} changed since the run (sha256 {sha[:12]} "
                             f"-> {now[:12]})"), []
    try:
        manifest = load_manifest(path)
        arches = resolve_arches([str(a) for a in envelope.get("arch") or []])
    except (ManifestError, OSError, ValueError) as exc:
        first = (str(exc).splitlines() or [""])[0]
        return None, f"its manifest {path} no longer loads ({first})", []
    specs = list(manifest.kernels)
    self_test: frozenset[str] = frozenset()
    mpath, unconfirmed, damage = _mutants_to_load(envelope, manifest)
    if mpath is not None:
        try:
            mutants = load_mutants(mpath)
        except (ManifestError, OSError, ValueError) as exc:
            first = (str(exc).splitlines() or [""])[0]
            unconfirmed = f"its mutant manifest {mpath} no longer loads ({first})"
        else:
            specs += mutants.kernels
            if manifest.mutants is None and envelope.get("kernel_tree") is not None:
                self_test = frozenset(m.name for m in mutants.kernels)
    return kernel_table(specs, self_test, arches), unconfirmed, damage


def confirm_table(envelope: Mapping[str, Any], rows: Sequence[Row],
                  judged: Sequence[Row], missing: Sequence[str]) -> TableCheck:
    """The run's kernel table confirmed against its manifest, else against its rows
    (``judged``: the rows as judged; ``missing``: its expected cells without a row)."""
    if "steps" not in envelope:
        return TableCheck()  # a bench run: judged on the kernels' own evidence
    recorded = envelope.get("kernels")
    if not isinstance(recorded, Mapping):
        return TableCheck()  # envelope_damage names it
    entries = {str(n): k for n, k in recorded.items() if isinstance(k, Mapping)}
    damage = [f"{r.identity}: {why}" for r in rows if (why := row_table_damage(r, entries))]
    for name, k in entries.items():
        if k.get("self_test") and not k.get("mutant_of"):
            damage.append(f"envelope.json kernels[{name!r}] is a suite self-test but no "
                          "mutant (self_test without mutant_of): only mutants are (damaged)")
    table, why, named = _derived(envelope)
    damage += named
    path = envelope.get("manifest")
    unconfirmed = list(entries)
    if table is not None:
        # where the mutant manifest is unconfirmed, the mutants' entries are left to the rows
        unconfirmed = [n for n in entries if why and n not in table
                       and entries[n].get("mutant_of")]
        for name in sorted((set(entries) | set(table)) - set(unconfirmed)):
            if name not in table:
                damage.append(f"envelope.json kernels[{name!r}] is no kernel of the run's "
                              f"manifest {path} (damaged)")
                continue
            if name not in entries:
                damage.append(f"envelope.json kernels lacks {name!r}, a kernel of the run's "
                              f"manifest {path} (damaged)")
                continue
            got, want = _gating(entries[name]), _gating(table[name])
            for field in GATING_FIELDS:
                if got[field] != want[field]:
                    damage.append(f"envelope.json kernels[{name!r}] {field} is "
                                  f"{got[field]!r}, but the run's manifest {path} makes it "
                                  f"{want[field]!r} (damaged)")
        damage += expected_against_table(envelope, table)
        if not why:
            return TableCheck(tuple(damage))
    # the rows' own evidence: what the table would set aside or call a mutant
    damage += _against_rows({n: entries[n] for n in unconfirmed}, rows, judged, missing,
                            why)
    what = "its mutants' entries are" if table is not None else "the kernel table is"
    return TableCheck(tuple(damage), f"{what} unconfirmed: {why}; checked against the "
                      "rows' own evidence only (a kernel removed with every row and cell of "
                      "it cannot be told)")


def expected_against_table(envelope: Mapping[str, Any],
                           table: Mapping[str, Mapping[str, object]]) -> list[str]:
    """Damage where the expected cells the envelope lists leave out a compile or audit cell
    its confirmed kernel table implies: every kernel is compiled for every AMD arch of the
    run, and audited by every rule of this hqval on each arch it is built for.  A row
    removed together with its expected cell would otherwise go unnoticed wherever no check
    requires it (a single audit rule of one kernel)."""
    from hqval.audit import RULES
    from hqval.matrix import resolve_arches
    from hqval.result import cell_id

    cells = envelope.get("expected_cells")
    if not isinstance(cells, Mapping):
        return []  # envelope damage names it
    try:
        arches = [a.name for a in resolve_arches([str(a) for a in envelope.get("arch") or []])
                  if a.is_amd]
    except ValueError:
        return []  # the table was derived from these arches: they resolved there
    listed = {step: {i for i in cells.get(step) or [] if isinstance(i, str)}
              for step in ("compile", "audit")}
    lacking: list[str] = []
    for name, entry in table.items():
        built = entry.get("built_for")
        built_for = set(built) if isinstance(built, list) else set()
        for a in arches:
            want = [("compile", cell_id("compile", name, a, "toolchain"))]
            if a in built_for:
                want += [("audit", cell_id(f"audit_{rule}", name, a, "isa")) for rule in RULES]
            lacking += [i for step, i in want if i not in listed[step]]
    if not lacking:
        return []
    return [f"envelope.json expected_cells lacks {len(lacking)} cell(s) its manifest's "
            f"kernels imply ({', '.join(lacking[:4])}{' ...' if len(lacking) > 4 else ''}): "
            "expected cells removed (damaged)"]


# the row kinds whose kernel is a table entry by name (a timing cell names its kernel as
# ``kernel@MxK``, a timing mutant as ``kernel+mutation@MxK``)
_TABLE_KINDS = ("compile", "audit", "check", "mutant", "timing")


def row_table_damage(row: Row, entries: Mapping[str, Mapping[str, Any]]) -> str:
    """Why a row's own say of what it is evidence for contradicts its kernel's entry in
    the run's table, or "".  The judge reads ``details`` qt, path and kind before the table
    (to place a row in a cell, to pick a timing gate), ``mutant_of`` (a mutant's checks are
    kills) and ``self_test`` (set aside): a row saying otherwise than its kernel's entry
    would move or hide its verdict."""
    if row.kind not in _TABLE_KINDS:
        return ""
    d = row.details
    name = row.kernel.split("@", 1)[0]
    timing = row.kind == "timing"
    entry = entries.get(name.split("+", 1)[0] if timing else name)
    if entry is None:
        return ""  # a kernel of no entry: binding_damage names its rows
    from hqval.admission.policy import PATH_OF_KIND

    if "qt" in d and d["qt"] != entry.get("qt"):
        return (f"says qt {d['qt']!r}, but its kernel's entry in the run's kernel table is "
                f"qt {entry.get('qt')!r}")
    path = entry.get("path") or PATH_OF_KIND.get(str(entry.get("kind")))
    said = d.get("path") or (PATH_OF_KIND.get(str(d["kind"])) if "kind" in d else None)
    if said is not None and said != path:
        return (f"says path {said!r}, but its kernel's entry in the run's kernel table is "
                f"path {path!r}")
    if timing:
        return ""  # a timing mutant names its unslowed twin in mutant_of
    for key, want in (("mutant_of", entry.get("mutant_of")),
                      ("self_test", bool(entry.get("self_test")))):
        if key in d and (bool(d[key]) if key == "self_test" else d[key]) != want:
            return (f"says {key} {d[key]!r}, but its kernel's entry in the run's kernel table "
                    f"is {want!r}")
    return ""


def _kernel_of(row_kernel: str) -> str:
    return row_kernel.split("@", 1)[0]


def _cell_kernel(identity: str) -> str:
    return identity.partition("[")[2].split("|", 1)[0].split("@", 1)[0]


def _against_rows(entries: Mapping[str, Mapping[str, Any]], rows: Sequence[Row],
                  judged: Sequence[Row], missing: Sequence[str], why: str) -> list[str]:
    out: list[str] = []
    verdicts = {r.kernel for r in rows if r.kind == "mutant"}
    bad = {Status.FAIL, Status.ERROR}
    for name, k in sorted(entries.items()):
        if k.get("mutant_of") and name not in verdicts:
            out.append(f"envelope.json kernels[{name!r}] says it is a mutant of "
                       f"{k.get('mutant_of')!r}, but the run holds no mutant verdict of it, "
                       f"and nothing confirms it ({why}) (damaged)")
        flags = [f for f, on in (("production: false", k.get("production") is False),
                                 ("self_test", bool(k.get("self_test")))) if on]
        if not flags:
            continue
        # a self-test mutant's own failing checks are its kills: its verdict is what the
        # flag sets aside
        aside = [r for r in judged if _kernel_of(r.kernel) == name and r.status in bad
                 and (r.kind == "mutant" or not k.get("mutant_of"))]
        gone = [m for m in missing if _cell_kernel(m) == name]
        first = aside[0].identity + f" ({aside[0].status})" if aside else \
            (gone[0].split(" ", 1)[0] + " (no row)" if gone else "")
        if first:
            out.append(f"envelope.json kernels[{name!r}] says {' and '.join(flags)}, which "
                       f"sets aside {first}, and nothing confirms it ({why}); admit it where "
                       "the run's manifest is, or re-run (damaged)")
    return out
