"""The JUnit XML writer: merged on a resumed session (no test case lost), never written
through a link."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hqval.junit import publish
from hqval.safeio import SafeIOError


def _xml(*cases: tuple[str, str]) -> str:
    body = "".join(f'<testcase classname="c" name="{n}" time="1.5">'
                   + ("<failure message='x'/>" if o == "fail" else "") + "</testcase>"
                   for n, o in cases)
    return (f'<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="{len(cases)}">'
            f"{body}</testsuite></testsuites>")


def test_a_resumed_session_keeps_the_earlier_test_cases(tmp_path: Path) -> None:
    target = tmp_path / "junit.xml"
    target.write_text(_xml(("a", "pass"), ("b", "fail")))
    produced = tmp_path / "new.xml"
    produced.write_text(_xml(("c", "pass")))
    publish(produced, target, keep_existing=True)
    suite = ET.parse(target).getroot().find("testsuite")
    assert suite is not None
    assert [c.get("name") for c in suite.iter("testcase")] == ["a", "b", "c"]
    assert (suite.get("tests"), suite.get("failures"), suite.get("time")) == ("3", "1",
                                                                             "4.500")


def test_a_rerun_case_replaces_its_earlier_one(tmp_path: Path) -> None:
    target = tmp_path / "junit.xml"
    target.write_text(_xml(("a", "fail")))
    produced = tmp_path / "new.xml"
    produced.write_text(_xml(("a", "pass")))
    publish(produced, target, keep_existing=True)
    suite = ET.parse(target).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "1" and suite.get("failures") == "0"


def test_a_fresh_session_replaces_the_file(tmp_path: Path) -> None:
    target = tmp_path / "junit.xml"
    target.write_text(_xml(("a", "pass")))
    produced = tmp_path / "new.xml"
    produced.write_text(_xml(("z", "pass")))
    publish(produced, target, keep_existing=False)
    assert "name=\"a\"" not in target.read_text()


@pytest.mark.parametrize("keep", [True, False])
def test_the_report_is_never_written_through_a_link(tmp_path: Path, keep: bool) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    target = tmp_path / "junit.xml"
    target.symlink_to(victim)
    produced = tmp_path / "new.xml"
    produced.write_text(_xml(("a", "pass")))
    with pytest.raises(SafeIOError, match="symbolic link"):
        publish(produced, target, keep_existing=keep)
    assert victim.read_text() == "keep me"
