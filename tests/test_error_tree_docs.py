"""The error tree drawn in ``asynckubelet/errors.py``'s docstring and in
``docs/library.md`` is the tree the classes make: every error class once, under the class
it derives from, and no name that is not a class."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from asynckubelet import errors

ROOT = Path(__file__).resolve().parent.parent
ENTRY = re.compile(r"(?:├── |└── )(?P<name>\w+)")


def drawn(text: str) -> dict[str, str | None]:
    """Each class name of the drawing beginning with ``AsyncKubeletError``, with its
    parent's name (None for the root), from the columns the names start at; lines without
    a branch continue the description above them."""
    start = text.index("AsyncKubeletError\n")
    root_column = start - text.rindex("\n", 0, start) - 1
    parents: dict[str, str | None] = {"AsyncKubeletError": None}
    stack: list[tuple[int, str]] = [(root_column, "AsyncKubeletError")]
    for line in text[start:].splitlines()[1:]:
        if not line.strip():
            break
        found = ENTRY.search(line)
        if found is None:
            continue
        column = found.start("name")
        while stack[-1][0] >= column:
            stack.pop()
        parents[found.group("name")] = stack[-1][1]
        stack.append((column, found.group("name")))
    return parents


def classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    pending: list[type[BaseException]] = [errors.AsyncKubeletError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending += [c for c in cls.__subclasses__() if c.__module__ == errors.__name__]
    return found


@pytest.mark.parametrize(
    "text",
    [errors.__doc__ or "", (ROOT / "docs" / "library.md").read_text()],
    ids=["errors.py", "library.md"],
)
def test_the_drawing_is_the_class_tree(text: str) -> None:
    tree = drawn(text)
    real = classes()
    assert sorted(tree) == sorted(real)
    for name, parent in tree.items():
        if parent is not None:
            assert issubclass(real[name], real[parent]), (name, parent)
            assert real[parent] in real[name].__bases__, (name, parent)
