"""The integration environments say what runs: twenty minutes of tests print each test's
name and time as it ends, and the slowest twenty at the end, in tox and inside DinD."""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRESS = ["-v", "-o", "console_output_style=times", "--durations=20"]


def _contains(words: list[str], part: list[str]) -> bool:
    return any(words[i : i + len(part)] == part for i in range(len(words)))


def test_tox_integration_prints_each_tests_name_and_time_and_the_slowest_twenty() -> None:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    words = shlex.split(tox["testenv:integration"]["commands"])
    assert words[0] == "pytest"
    assert _contains(words, PROGRESS)
    assert "-q" not in words


def test_the_dind_runner_prints_the_same_progress() -> None:
    script = (ROOT / "integration" / "dind" / "run.sh").read_text()
    line = next(line for line in script.splitlines() if "python3 -m pytest" in line)
    assert _contains(shlex.split(line.split("||")[0]), PROGRESS)
