"""apply --watch's look at the files: what changed between two snapshots, directories
walked without following symlinks, the look bounded."""

from __future__ import annotations

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
