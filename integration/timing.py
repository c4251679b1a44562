"""Each test's time beside its outcome in a verbose run, as a pytest hook.

The integration suites run in two pytest-xdist workers; their reports reach one terminal,
where pytest's ``times`` output style would show the gaps between reports rather than the
tests' own times. This hook adds each test's own time (setup and call) to its outcome:
``PASSED (12.3s)``.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

Status = tuple[str, str, str | tuple[str, dict[str, bool]]]

_SPENT: dict[str, float] = {}
"""Each test's time so far (setup and call), as its reports reach the terminal."""


@pytest.hookimpl(wrapper=True)
def pytest_report_teststatus(
    report: pytest.CollectReport | pytest.TestReport, config: pytest.Config
) -> Generator[None, Status, Status]:
    """The outcome word of a verbose run, with the test's time after it."""
    status: Status = yield
    if not isinstance(report, pytest.TestReport):
        return status
    spent = _SPENT[report.nodeid] = _SPENT.get(report.nodeid, 0.0) + report.duration
    category, letter, word = status
    if config.get_verbosity() <= 0 or not isinstance(word, str) or not word:
        return status
    return category, letter, f"{word} ({spent:.1f}s)"
