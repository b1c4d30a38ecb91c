"""The JUnit XML a check session leaves, written through the one safe writer.

pytest writes its report to a private scratch file; ``publish`` then puts it at the path
the user asked for with ``hqval.safeio.write_atomic`` (a temporary beside it, renamed, never
through a link).  When a resumed run's session ran only the cells the run lacked,
``keep_existing`` merges: every test case of the file already there whose cell this
session did not run is kept, so ``--resume`` never loses a test case, and the suite's
counts are recomputed from the merged cases.
"""

from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET
from pathlib import Path

from hqval import safeio

MAX_JUNIT_BYTES = 256 << 20
_OUTCOMES = ("failure", "error", "skipped")


def _suite(root: ET.Element) -> ET.Element:
    if root.tag == "testsuite":
        return root
    found = root.find("testsuite")
    if found is None:
        found = ET.SubElement(root, "testsuite", name="pytest")
    return found


def _key(case: ET.Element) -> tuple[str, str]:
    return case.get("classname", ""), case.get("name", "")


def merge(new: bytes, old: bytes) -> bytes:
    """``new`` with every test case of ``old`` that ``new`` does not hold, counts redone."""
    new_root = ET.fromstring(new)
    try:
        old_root = ET.fromstring(old)
    except ET.ParseError:
        return new  # a torn earlier file (a kill mid-write) holds nothing to keep
    suite = _suite(new_root)
    have = {_key(c) for c in suite.iter("testcase")}
    kept = [c for c in _suite(old_root).iter("testcase") if _key(c) not in have]
    # earlier cases first: the order the run made them
    cases = kept + list(suite.iter("testcase"))
    for c in list(suite.findall("testcase")):
        suite.remove(c)
    for c in cases:
        suite.append(c)
    suite.set("tests", str(len(cases)))
    for outcome, attr in zip(_OUTCOMES, ("failures", "errors", "skipped"), strict=True):
        suite.set(attr, str(sum(1 for c in cases if c.find(outcome) is not None)))
    total = 0.0
    for c in cases:
        with contextlib.suppress(ValueError):
            total += float(c.get("time", "0") or 0)
    suite.set("time", f"{total:.3f}")
    out: bytes = ET.tostring(new_root, encoding="utf-8", xml_declaration=True)
    return out


def publish(produced: Path, target: str | Path, *, keep_existing: bool) -> None:
    """Put the session's report ``produced`` at ``target`` (merged with the file there when
    ``keep_existing``).  A link or non-regular file at ``target`` is refused
    (``SafeIOError``); a session that wrote no report leaves ``target`` as it was."""
    if not produced.is_file():
        return
    data = safeio.read_bytes(produced, limit=MAX_JUNIT_BYTES, what="JUnit XML")
    dest = Path(target)
    if keep_existing and (dest.exists() or dest.is_symlink()):
        old = safeio.read_bytes(dest, limit=MAX_JUNIT_BYTES, what="JUnit XML",
                                follow_symlinks=False)
        try:
            data = merge(data, old)
        except ET.ParseError as exc:
            raise safeio.SafeIOError(f"JUnit XML {produced}: pytest's report is not XML "
                                     f"({exc})") from None
    safeio.write_atomic(dest, data, what="JUnit XML")


def cases_document(cases: list[tuple[str, str, str, str]]) -> bytes:
    """A report of test cases that no session ran (cells whose rows a run took from the
    check row cache), as pytest writes its own: ``(classname, name, outcome, message)``,
    outcome one of "", "failure", "skipped"."""
    root = ET.Element("testsuites", name="pytest tests")
    suite = ET.SubElement(root, "testsuite", name="pytest")
    for classname, name, outcome, message in cases:
        case = ET.SubElement(suite, "testcase", classname=classname, name=name, time="0.000")
        if outcome:
            child = ET.SubElement(case, outcome, message=message)
            if outcome == "skipped":
                child.set("type", "pytest.skip")
            child.text = message
    for outcome, attr in zip(_OUTCOMES, ("failures", "errors", "skipped"), strict=True):
        suite.set(attr, str(sum(1 for c in cases if c[2] == outcome)))
    suite.set("tests", str(len(cases)))
    suite.set("time", "0.000")
    out: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return out


def add_cases(target: str | Path, cases: list[tuple[str, str, str, str]]) -> None:
    """Put ``cases`` (``cases_document``) in the report at ``target``, keeping every case
    already there (a case of the same name there wins), through the safe writer."""
    if not cases:
        return
    data = cases_document(cases)
    dest = Path(target)
    if dest.exists() or dest.is_symlink():
        old = safeio.read_bytes(dest, limit=MAX_JUNIT_BYTES, what="JUnit XML",
                                follow_symlinks=False)
        with contextlib.suppress(ET.ParseError):  # a torn earlier file holds nothing
            data = merge(old, data)
    safeio.write_atomic(dest, data, what="JUnit XML")
