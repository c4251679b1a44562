"""The README is laid out for a newcomer: quick start, walkthrough, command reference, then
CI and remote daemons, the security model, benchmarks and dependencies; no table cell
runs longer than a few lines; tox says which version it needs."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
MAX_CELL = 300
"""Characters: about three lines of a rendered table."""


def headings() -> list[str]:
    return [line[3:] for line in README.splitlines() if line.startswith("## ")]


def test_a_newcomer_reads_quick_start_walkthrough_reference_then_the_rest_in_order() -> None:
    found = headings()
    wanted = [
        "Quick start",
        "Walkthrough",
        "Command reference",
        "Docker-in-Docker and remote daemons",
        "Security model",
        "Benchmarks",
        "Dependencies",
    ]
    positions = [next(i for i, h in enumerate(found) if h.startswith(w)) for w in wanted]
    assert positions == sorted(positions), found


def cells() -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(README.splitlines(), 1):
        if not line.startswith("|") or re.fullmatch(r"[|\-: ]+", line):
            continue
        found += [(number, cell) for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
    return found


def test_no_table_cell_is_longer_than_a_few_lines() -> None:
    long = [(number, cell[:60]) for number, cell in cells() if len(cell.strip()) > MAX_CELL]
    assert long == []


def test_the_walkthrough_blocks_are_marked_for_the_test_that_runs_them() -> None:
    for marker in ("walkthrough-serve", "walkthrough"):
        after = README.split(f"<!-- {marker} -->\n", 1)[1]
        assert after.startswith("```console\n$ asynckubelet "), marker


def test_every_example_file_the_walkthrough_applies_exists() -> None:
    block = README.split("<!-- walkthrough -->\n", 1)[1].split("\n```\n", 1)[0]
    steps = re.split(r"^\$ ", block, flags=re.M)[1:]
    for step in steps:
        command, _, shown = step.partition("\n")
        if "error:" in shown:
            continue
        for path in re.findall(r"examples/[\w./-]+", command):
            assert (ROOT / path).exists(), command


def test_tox_names_the_version_it_needs() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "tox.ini")
    assert int(config["tox"]["minversion"].split(".")[0]) >= 4
