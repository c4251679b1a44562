"""The integration suites' verbose output: each test's own time beside its outcome, also
when two pytest-xdist workers report to one terminal."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makeconftest("from integration.timing import pytest_report_teststatus\n")
    body = textwrap.dedent(
        """
        import time
        import pytest

        @pytest.fixture
        def slow_setup():
            time.sleep(0.4)

        def test_sleeps():
            time.sleep(0.6)

        def test_sets_up_slowly(slow_setup):
            pass

        def test_fails():
            assert False
        """
    )
    pytester.makepyfile(test_one=body, test_two=body)
    return pytester


def times(output: str, name: str, word: str) -> list[float]:
    """The times shown on the outcome lines of ``name``: ``test_x.py::name WORD (1.2s)``
    in a serial run, ``[gw0] [ 50%] WORD (1.2s) test_x.py::name`` from a worker."""
    found = []
    for line in output.splitlines():
        if re.search(rf"test_\w+\.py::{name}\b", line) and " - " not in line:
            found += re.findall(rf"\b{word} \((\d+\.\d)s\)", line)
    return [float(t) for t in found]


@pytest.mark.parametrize("workers", [["-n", "2"], ["-n", "0"]], ids=["two-workers", "serial"])
def test_each_outcome_shows_the_tests_own_time(suite: pytest.Pytester, workers: list[str]) -> None:
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-v", *workers)
    result.assert_outcomes(passed=4, failed=2)
    out = result.stdout.str()
    sleeps = times(out, "test_sleeps", "PASSED")
    assert len(sleeps) == 2, out
    assert min(sleeps) >= 0.6, out
    # A fixture's time counts too: setup and call.
    slow = times(out, "test_sets_up_slowly", "PASSED")
    assert len(slow) == 2, out
    assert min(slow) >= 0.4, out
    assert len(times(out, "test_fails", "FAILED")) == 2, out


def test_a_quiet_run_prints_its_letters_only(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-n", "2")
    result.assert_outcomes(passed=4, failed=2)
    assert not re.search(r"\(\d+\.\ds\)", result.stdout.str())
