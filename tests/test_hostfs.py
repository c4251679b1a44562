"""Host file operations stay under their root and never follow a symbolic link below it."""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from pathlib import Path

import pytest

from asynckubelet import hostfs
from asynckubelet.errors import UnsafePath


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "keep").write_text("host file")
    return path


def _tree(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): p.read_text() if p.is_file() else "<dir>"
        for p in sorted(path.rglob("*"))
    }


@pytest.mark.parametrize(
    "path",
    ["../x", "a/../../x", "a/../b", "..", "/etc/passwd", "/x/../etc"],
)
def test_a_path_with_dot_dot_or_absolute_elsewhere_is_refused(root: Path, path: str) -> None:
    with pytest.raises(UnsafePath):
        hostfs.parts_under(root, path)


def test_an_absolute_path_beneath_the_root_becomes_its_components(root: Path) -> None:
    assert hostfs.parts_under(root, root / "a" / "b") == ("a", "b")
    assert hostfs.parts_under(root, "a//./b/") == ("a", "b")
    assert hostfs.parts_under(root, root) == ()


def test_a_sibling_whose_name_starts_like_the_root_is_not_beneath_it(root: Path) -> None:
    with pytest.raises(UnsafePath):
        hostfs.parts_under(root, f"{root}-other/x")


def test_ensure_under_resolves_links_and_refuses_one_that_leaves_the_root(
    root: Path, outside: Path
) -> None:
    (root / "inner").mkdir()
    (root / "ok").symlink_to("inner")
    (root / "out").symlink_to(outside)
    assert hostfs.ensure_under(root, "ok/x") == (root / "inner" / "x").resolve()
    with pytest.raises(UnsafePath, match="leads outside"):
        hostfs.ensure_under(root, "out/keep")


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x\0"])
def test_a_single_name_is_one_plain_component(name: str) -> None:
    with pytest.raises(UnsafePath):
        hostfs.single_name(name)


def test_make_dirs_makes_every_missing_directory_with_exactly_the_mode(root: Path) -> None:
    old = os.umask(0o077)
    try:
        hostfs.make_dirs(root, "a/b/c", mode=0o751)
    finally:
        os.umask(old)
    for p in (root / "a", root / "a/b", root / "a/b/c"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o751


def test_make_dirs_does_not_go_through_a_symlinked_parent(root: Path, outside: Path) -> None:
    (root / "link").symlink_to(outside)
    with pytest.raises(UnsafePath, match="symbolic link"):
        hostfs.make_dirs(root, "link/made")
    assert _tree(outside) == {"keep": "host file"}


def test_a_relative_link_that_climbs_out_is_refused_as_well(root: Path, outside: Path) -> None:
    (root / "a").mkdir()
    (root / "a" / "up").symlink_to("../../outside")
    with pytest.raises(UnsafePath):
        hostfs.write_file(root, "a/up/new", b"x")
    assert _tree(outside) == {"keep": "host file"}


def test_write_file_replaces_a_link_at_the_name_instead_of_writing_through_it(
    root: Path, outside: Path
) -> None:
    (root / "status.json").symlink_to(outside / "keep")
    hostfs.write_file(root, "status.json", b"{}", mode=0o600)
    assert (outside / "keep").read_text() == "host file"
    assert not (root / "status.json").is_symlink()
    assert (root / "status.json").read_bytes() == b"{}"
    assert stat.S_IMODE((root / "status.json").stat().st_mode) == 0o600


def test_write_file_sets_the_mode_exactly_whatever_the_umask(root: Path) -> None:
    old = os.umask(0o022)
    try:
        hostfs.write_file(root, "d/f", b"data", mode=0o640, dir_mode=0o700)
    finally:
        os.umask(old)
    assert stat.S_IMODE((root / "d" / "f").stat().st_mode) == 0o640
    assert stat.S_IMODE((root / "d").stat().st_mode) == 0o700
    assert sorted(os.listdir(root / "d")) == ["f"]


def test_append_file_refuses_a_link_at_the_name(root: Path, outside: Path) -> None:
    (root / "events.jsonl").symlink_to(outside / "keep")
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        hostfs.append_file(root, "events.jsonl", b"line\n")
    assert (outside / "keep").read_text() == "host file"


def test_append_file_makes_the_file_with_the_mode_and_appends(root: Path) -> None:
    hostfs.append_file(root, "e", b"one\n", mode=0o600)
    hostfs.append_file(root, "e", b"two\n", mode=0o600)
    assert (root / "e").read_text() == "one\ntwo\n"
    assert stat.S_IMODE((root / "e").stat().st_mode) == 0o600


def test_read_file_does_not_follow_a_link(root: Path, outside: Path) -> None:
    (root / "f").symlink_to(outside / "keep")
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        hostfs.read_file(root, "f")


def test_chmod_refuses_a_link_instead_of_changing_its_target(root: Path, outside: Path) -> None:
    (root / "f").symlink_to(outside / "keep")
    before = stat.S_IMODE((outside / "keep").stat().st_mode)
    with pytest.raises(UnsafePath):
        hostfs.chmod(root, "f", 0o4777)
    assert stat.S_IMODE((outside / "keep").stat().st_mode) == before


def test_remove_tree_removes_a_link_but_never_what_it_points_at(root: Path, outside: Path) -> None:
    (root / "pod").mkdir()
    (root / "pod" / "host").symlink_to(outside)
    (root / "pod" / "file").symlink_to(outside / "keep")
    assert hostfs.remove_tree(root, "pod")
    assert not (root / "pod").exists()
    assert _tree(outside) == {"keep": "host file"}


def test_remove_tree_of_a_link_named_as_the_tree_removes_only_the_link(
    root: Path, outside: Path
) -> None:
    (root / "pod").symlink_to(outside)
    assert hostfs.remove_tree(root, "pod")
    assert not os.path.lexists(root / "pod")
    assert _tree(outside) == {"keep": "host file"}


def test_remove_tree_through_a_symlinked_parent_is_refused(root: Path, outside: Path) -> None:
    (root / "uid").symlink_to(outside.parent)
    with pytest.raises(UnsafePath):
        hostfs.remove_tree(root, "uid/outside")
    assert _tree(outside) == {"keep": "host file"}


def test_remove_file_and_tree_of_what_is_absent_say_so(root: Path) -> None:
    assert hostfs.remove_file(root, "nothing") is False
    assert hostfs.remove_tree(root, "no/such/dir") is False


def test_symlink_replaces_the_name_atomically(root: Path) -> None:
    hostfs.symlink(root, "logs/0.log", "/var/lib/docker/a.log")
    hostfs.symlink(root, "logs/0.log", "/var/lib/docker/b.log")
    assert os.readlink(root / "logs" / "0.log") == "/var/lib/docker/b.log"
    assert os.listdir(root / "logs") == ["0.log"]


def test_a_directory_swapped_for_a_link_while_writing_is_never_written_through(
    root: Path, outside: Path
) -> None:
    """A container races the agent: it turns ``d`` into a link and back, again and again."""
    (root / "d").mkdir()
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            try:
                os.rename(root / "d", root / "d.real")
                os.symlink(outside, root / "d")
                os.unlink(root / "d")
                os.rename(root / "d.real", root / "d")
            except OSError:
                pass

    racer = threading.Thread(target=swap)
    racer.start()
    try:
        for i in range(300):
            with contextlib.suppress(OSError):
                hostfs.write_file(root, f"d/f{i}", b"x")
    finally:
        stop.set()
        racer.join()
    assert _tree(outside) == {"keep": "host file"}
