"""The integration environments say what runs: the tests, in two worker processes, print
each test's name, outcome and time as it ends, and the slowest twenty at the end, in tox
and inside DinD."""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRESS = ["-v"]
WORKERS = ["--dist", "loadfile", "--durations=20"]


def _contains(words: list[str], part: list[str]) -> bool:
    return any(words[i : i + len(part)] == part for i in range(len(words)))


def test_tox_integration_prints_each_tests_name_and_time_and_the_slowest_twenty() -> None:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    words = shlex.split(tox["testenv:integration"]["commands"])
    assert words[0] == "pytest"
    assert _contains(words, PROGRESS)
    assert _contains(words, ["-n", "{env:ASYNCKUBELET_TEST_WORKERS:2}", *WORKERS])
    assert "-q" not in words


def test_the_integration_conftest_adds_each_tests_time() -> None:
    """Under pytest-xdist the ``times`` output style measures the gaps between reports;
    the hook in ``integration/timing.py`` (tested in ``test_test_timing.py``) is what
    shows each test's time, so the suite's conftest must carry it."""
    from integration import conftest, timing

    assert conftest.pytest_report_teststatus is timing.pytest_report_teststatus


def test_the_dind_runner_prints_the_same_progress() -> None:
    script = (ROOT / "integration" / "dind" / "run.sh").read_text().replace("\\\n", " ")
    line = next(line for line in script.splitlines() if "python3 -m pytest" in line)
    words = shlex.split(line.split("||")[0])
    assert _contains(words, PROGRESS)
    assert _contains(words, ["-n", "${ASYNCKUBELET_TEST_WORKERS:-2}", *WORKERS])
