"""The README is laid out for a newcomer: what it is, quick start, walkthrough, the
library, security, the tests and dependencies, then where to read on; the reference lives
in ``docs/``, one page per subject, each linked from the README; every relative link and
anchor resolves; no table cell runs longer than a few lines; tox says which version it
needs."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = sorted((ROOT / "docs").glob("*.md"))
MAX_CELL = 300
"""Characters: about three lines of a rendered table."""
MAX_README_LINES = 400
"""A README a newcomer reads in ten minutes; the reference belongs in ``docs/``."""
REFERENCE = {
    "commands.md": "Commands",
    "node.md": "The node",
    "kubernetes-api.md": "The Kubernetes API on the node",
    "pod-spec.md": "The Pod spec on this node",
    "cluster.md": "Cluster mode",
    "security.md": "Security model",
    "library.md": "asynckubelet as a library",
    "ci.md": "CI, Docker-in-Docker and remote daemons",
    "benchmarks.md": "Benchmarks",
}
"""Each reference page and the start of its title."""


def headings(text: str, level: int = 2) -> list[str]:
    mark = "#" * level + " "
    found, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and line.startswith(mark):
            found.append(line[len(mark) :])
    return found


def test_a_newcomer_reads_quick_start_walkthrough_library_then_the_rest_in_order() -> None:
    found = headings(README)
    wanted = [
        "Quick start",
        "Walkthrough",
        "The library",
        "Security",
        "Running the tests",
        "Dependencies",
        "Where to read on",
    ]
    positions = [next(i for i, h in enumerate(found) if h.startswith(w)) for w in wanted]
    assert positions == sorted(positions), found


def test_the_readme_stays_short() -> None:
    assert len(README.splitlines()) <= MAX_README_LINES


@pytest.mark.parametrize("page", sorted(REFERENCE))
def test_every_reference_page_has_its_title_and_the_readme_links_it(page: str) -> None:
    text = (ROOT / "docs" / page).read_text()
    assert text.startswith(f"# {REFERENCE[page]}"), text.splitlines()[0]
    assert f"](docs/{page})" in README


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    broken = []
    for link in links(path):
        if re.match(r"[a-z]+:", link):
            continue
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        if not file.exists():
            broken.append(link)
        elif anchor and file.suffix == ".md":
            text = file.read_text()
            anchors = {slug(h) for level in (1, 2, 3) for h in headings(text, level)}
            if anchor not in anchors:
                broken.append(link)
    assert broken == []


def cells(text: str) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("|") or re.fullmatch(r"[|\-: ]+", line):
            continue
        found += [(number, cell) for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
    return found


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_no_table_cell_is_longer_than_a_few_lines(path: Path) -> None:
    long = [
        (number, cell[:60])
        for number, cell in cells(path.read_text())
        if len(cell.strip()) > MAX_CELL
    ]
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
