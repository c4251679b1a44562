"""apply --watch's look at the files: what changed between two snapshots, directories
walked without following symlinks, the look bounded."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from asynckubelet.cli import devwatch


def test_a_change_an_addition_and_a_removal_are_each_seen(tmp_path: Path) -> None:
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "a.txt").write_text("a")
    (tmp_path / "ctx" / "gone.txt").write_text("g")
    manifest = tmp_path / "web.yaml"
    manifest.write_text("x")
    before = devwatch.snapshot([manifest, tmp_path / "ctx"])
    assert devwatch.snapshot([manifest, tmp_path / "ctx"]) == before
    (tmp_path / "ctx" / "a.txt").write_text("a, longer")
    (tmp_path / "ctx" / "new.txt").write_text("n")
    (tmp_path / "ctx" / "gone.txt").unlink()
    after = devwatch.snapshot([manifest, tmp_path / "ctx"])
    assert devwatch.changed(before, after) == [
        str(tmp_path / "ctx" / name) for name in ("a.txt", "gone.txt", "new.txt")
    ]


def test_symlinks_are_not_followed_and_the_look_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("s")
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "link").symlink_to(tmp_path / "outside")
    for n in range(5):
        (tmp_path / "ctx" / f"f{n}").write_text("f")
    found = devwatch.snapshot([tmp_path / "ctx"])
    assert not any("secret" in name for name in found)
    monkeypatch.setattr(devwatch, "MAX_WATCHED", 3)
    assert len(devwatch.snapshot([tmp_path / "ctx"])) == 3
    assert devwatch.snapshot([tmp_path / "missing"]) == {}


@pytest.mark.parametrize(("synced", "applies"), [(True, 1), (False, 2)])
def test_a_change_is_offered_to_the_sync_first_and_applied_when_it_declines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, synced: bool, applies: int
) -> None:
    source = tmp_path / "a.txt"
    source.write_text("1")
    applied: list[int] = []
    offered: list[list[str]] = []
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 1:
            source.write_text("22")
        elif len(sleeps) > 2:
            raise KeyboardInterrupt

    def sync(files: list[str]) -> bool:
        offered.append(files)
        return synced

    monkeypatch.setattr(time, "sleep", sleep)
    devwatch.watch(lambda: [source], lambda: applied.append(1), sync=sync)
    assert offered == [[str(source)]]
    assert len(applied) == applies
