from __future__ import annotations

import hashlib
import io
import json
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from asynckubelet.errors import ImageBuildError, ImageError
from asynckubelet.images import build
from asynckubelet.images.build import (
    DEFAULT_BUSYBOX_TAG,
    DEFAULT_PAUSE_TAG,
    PAUSE_VERSION,
    Directory,
    File,
    ImageConfig,
    Symlink,
    build_busybox_image,
    build_pause_image,
    compile_pause,
    image_archive,
    is_static_elf,
)

BUSYBOX = Path("/bin/busybox")
needs_compiler = pytest.mark.skipif(
    not (shutil.which("musl-gcc") or shutil.which("gcc")), reason="no C compiler"
)
BUSYBOX_BYTES = BUSYBOX.read_bytes() if BUSYBOX.is_file() else b""
needs_static_busybox = pytest.mark.skipif(
    not is_static_elf(BUSYBOX_BYTES), reason="busybox-static is not installed"
)


class RecordingLoader:
    def __init__(self) -> None:
        self.loaded: list[bytes] = []

    async def load_image(self, data: bytes) -> None:
        self.loaded.append(data)


def members(archive: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {info.name: info for info in tar.getmembers()}


def read_member(archive: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        extracted = tar.extractfile(name)
        assert extracted is not None
        return extracted.read()


def unpack(archive: bytes) -> tuple[dict[str, Any], dict[str, Any], bytes]:
    manifest = json.loads(read_member(archive, "manifest.json"))
    assert len(manifest) == 1
    config = json.loads(read_member(archive, manifest[0]["Config"]))
    layers = manifest[0]["Layers"]
    assert len(layers) == 1
    return manifest[0], config, read_member(archive, layers[0])


def layer_members(layer: bytes) -> dict[str, tarfile.TarInfo]:
    return members(layer)


def sample_archive(**overrides: Any) -> bytes:
    arguments: dict[str, Any] = {
        "repo_tag": "example.local/app:1",
        "files": [
            File(path="/app/run", data=b"#!/bin/sh\necho hi\n", mode=0o755),
            Symlink(path="/usr/bin/run", target="/app/run"),
            Directory(path="/tmp", mode=0o1777),
        ],
        "config": ImageConfig(entrypoint=["/app/run"], env=["PATH=/bin"], labels={"a": "b"}),
    }
    arguments.update(overrides)
    return image_archive(**arguments)


def wait_for_handlers(pid: int, *signals: int, timeout: float = 5.0) -> None:
    wanted = 0
    for signo in signals:
        wanted |= 1 << (signo - 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
        if int(caught.split()[1], 16) & wanted == wanted:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never installed handlers for {signals}")


@pytest.fixture(scope="module")
def pause_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (shutil.which("musl-gcc") or shutil.which("gcc")):
        pytest.skip("no C compiler")
    return compile_pause(workdir=tmp_path_factory.mktemp("pause"))


def test_archive_manifest_names_the_tag_config_and_one_layer() -> None:
    archive = sample_archive()
    manifest, _, _ = unpack(archive)
    assert manifest["RepoTags"] == ["example.local/app:1"]
    assert manifest["Config"].endswith(".json")
    assert set(members(archive)) >= {"manifest.json", manifest["Config"], manifest["Layers"][0]}


def test_archive_diff_id_is_the_sha256_of_the_layer() -> None:
    _, config, layer = unpack(sample_archive())
    assert config["rootfs"] == {
        "type": "layers",
        "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"],
    }


def test_archive_config_file_is_named_by_its_own_digest() -> None:
    archive = sample_archive()
    manifest, _, _ = unpack(archive)
    config_bytes = read_member(archive, manifest["Config"])
    assert manifest["Config"] == f"{hashlib.sha256(config_bytes).hexdigest()}.json"


def test_archive_config_carries_the_run_configuration() -> None:
    _, config, _ = unpack(sample_archive())
    assert config["os"] == "linux"
    assert config["config"] == {
        "Entrypoint": ["/app/run"],
        "Env": ["PATH=/bin"],
        "Labels": {"a": "b"},
    }


def test_archive_layer_keeps_modes_symlinks_and_directories() -> None:
    _, _, layer = unpack(sample_archive())
    entries = layer_members(layer)
    assert entries["app/run"].isreg()
    assert entries["app/run"].mode == 0o755
    assert entries["usr/bin/run"].issym()
    assert entries["usr/bin/run"].linkname == "/app/run"
    assert entries["tmp"].isdir()
    assert entries["tmp"].mode == 0o1777


def test_archive_layer_creates_missing_parent_directories_before_children() -> None:
    _, _, layer = unpack(sample_archive())
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        names = tar.getnames()
    assert names.index("usr") < names.index("usr/bin") < names.index("usr/bin/run")
    assert members(layer)["usr/bin"].isdir()
    assert members(layer)["usr/bin"].mode == 0o755


def test_archive_layer_has_fixed_owners_and_times() -> None:
    _, _, layer = unpack(sample_archive())
    for info in layer_members(layer).values():
        assert (info.mtime, info.uid, info.gid, info.uname, info.gname) == (0, 0, 0, "", "")


def test_same_input_gives_byte_identical_archives() -> None:
    assert sample_archive() == sample_archive()


def test_file_order_does_not_change_the_archive() -> None:
    files = [File(path="/a", data=b"a"), File(path="/b/c", data=b"c")]
    first = sample_archive(files=files)
    assert sample_archive(files=list(reversed(files))) == first


def test_different_content_gives_a_different_image() -> None:
    first = unpack(sample_archive(files=[File(path="/a", data=b"1")]))[0]["Config"]
    second = unpack(sample_archive(files=[File(path="/a", data=b"2")]))[0]["Config"]
    assert first != second


@pytest.mark.parametrize("path", ["relative", "/a/../../etc", "/"])
def test_archive_rejects_paths_outside_the_root(path: str) -> None:
    with pytest.raises(ImageBuildError, match="must be absolute"):
        sample_archive(files=[File(path=path, data=b"")])


def test_archive_rejects_a_path_given_twice() -> None:
    with pytest.raises(ImageBuildError, match="given twice"):
        sample_archive(files=[File(path="/a", data=b""), Directory(path="/a/")])


def test_archive_rejects_a_file_used_as_a_parent() -> None:
    with pytest.raises(ImageBuildError, match="not a directory"):
        sample_archive(files=[File(path="/a", data=b""), File(path="/a/b", data=b"")])


@pytest.mark.parametrize("tag", ["example.local/app", "host:5000/app", "app@sha256:abc"])
def test_archive_rejects_a_reference_without_a_tag(tag: str) -> None:
    with pytest.raises(ImageBuildError, match="repository:tag"):
        sample_archive(repo_tag=tag)


def test_image_build_error_is_an_image_error() -> None:
    assert issubclass(ImageBuildError, ImageError)


def test_static_elf_is_recognised() -> None:
    if not BUSYBOX.is_file():
        pytest.skip("busybox-static is not installed")
    assert is_static_elf(BUSYBOX.read_bytes())


def test_dynamic_elf_is_not_static() -> None:
    assert not is_static_elf(Path(sys.executable).resolve().read_bytes())


@pytest.mark.parametrize("data", [b"", b"#!/bin/sh\necho not elf\n", b"\x7fELF" + b"\0" * 60])
def test_non_elf_is_not_static(data: bytes) -> None:
    assert not is_static_elf(data)


def test_compile_pause_names_the_packages_when_the_compiler_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match=r"musl-tools.*gcc and libc6-dev"):
        compile_pause(workdir=tmp_path, cc="/nonexistent")


def test_compile_pause_names_the_packages_when_no_compiler_is_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ImageBuildError, match=r"no C compiler found.*musl-tools"):
        compile_pause(workdir=tmp_path)


def test_compile_pause_reports_a_failing_compiler(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match=r"cannot compile pause.c statically.*exit 1"):
        compile_pause(workdir=tmp_path, cc="false")


def test_compiled_pause_is_a_static_elf(pause_binary: Path) -> None:
    assert is_static_elf(pause_binary.read_bytes())


def test_compiled_pause_prints_its_version(pause_binary: Path) -> None:
    result = subprocess.run(
        [pause_binary, "-v"], capture_output=True, text=True, timeout=10, check=True
    )
    assert result.stdout == f"asynckubelet pause {PAUSE_VERSION}\n"


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGINT])
def test_compiled_pause_exits_zero_on_stop_signals(pause_binary: Path, signo: int) -> None:
    process = subprocess.Popen([pause_binary], stderr=subprocess.DEVNULL)
    try:
        wait_for_handlers(process.pid, signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)
        assert process.poll() is None
        process.send_signal(signo)
        assert process.wait(timeout=5) == 0
    finally:
        process.kill()
        process.wait()


def test_compiled_pause_reaps_children_it_inherits(pause_binary: Path) -> None:
    process = subprocess.Popen(
        ["/bin/sh", "-c", 'sleep 0.3 & echo "$!"; exec "$0"', str(pause_binary)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        child = int(process.stdout.readline())
        wait_for_handlers(process.pid, signal.SIGCHLD)
        child_status = Path(f"/proc/{child}/status")
        deadline = time.monotonic() + 5
        while child_status.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not child_status.exists(), "the exited child was left a zombie"
        assert process.poll() is None
    finally:
        process.kill()
        process.communicate()


def test_compiled_pause_with_gcc_is_static_too(tmp_path: Path) -> None:
    if shutil.which("gcc") is None or not Path("/usr/lib/x86_64-linux-gnu/libc.a").exists():
        pytest.skip("no gcc with a static glibc")
    assert is_static_elf(compile_pause(workdir=tmp_path, cc="gcc").read_bytes())


@needs_compiler
@pytest.mark.anyio
async def test_build_pause_image_loads_an_image_running_pause() -> None:
    loader = RecordingLoader()
    image_id = await build_pause_image(loader)
    [archive] = loader.loaded
    manifest, config, layer = unpack(archive)
    assert manifest["RepoTags"] == [DEFAULT_PAUSE_TAG]
    assert image_id == "sha256:" + manifest["Config"].removesuffix(".json")
    assert config["config"]["Entrypoint"] == ["/pause"]
    entries = layer_members(layer)
    assert list(entries) == ["pause"]
    assert entries["pause"].mode == 0o755
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        pause = tar.extractfile("pause")
        assert pause is not None
        assert is_static_elf(pause.read())


@pytest.mark.anyio
async def test_build_pause_image_loads_nothing_without_a_compiler() -> None:
    loader = RecordingLoader()
    with pytest.raises(ImageBuildError, match="musl-tools"):
        await build_pause_image(loader, cc="/nonexistent")
    assert loader.loaded == []


def test_the_pause_tag_matches_kubernetes_pause_version_in_the_local_registry() -> None:
    assert DEFAULT_PAUSE_TAG == f"{build.LOCAL_REGISTRY}/pause:{PAUSE_VERSION}"


@pytest.fixture
def busybox_applets() -> list[str]:
    listing = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True, check=True)
    return listing.stdout.split()


@pytest.fixture
def dynamic_binary(tmp_path: Path) -> Path:
    copy = tmp_path / "busybox"
    shutil.copy(Path(sys.executable).resolve(), copy)
    return copy


@pytest.fixture
def unrunnable_busybox(tmp_path: Path) -> Path:
    if not BUSYBOX.is_file():
        pytest.skip("busybox-static is not installed")
    copy = tmp_path / "busybox"
    copy.write_bytes(BUSYBOX.read_bytes())
    copy.chmod(0o644)
    return copy


@needs_static_busybox
@pytest.mark.anyio
async def test_build_busybox_image_links_every_applet_to_busybox(
    busybox_applets: list[str],
) -> None:
    loader = RecordingLoader()
    await build_busybox_image(loader)
    _, _, layer = unpack(loader.loaded[0])
    entries = layer_members(layer)
    for applet in set(busybox_applets) - {"busybox"}:
        assert entries[f"bin/{applet}"].issym(), applet
        assert entries[f"bin/{applet}"].linkname == "busybox"
    assert entries["bin/sh"].linkname == "busybox"
    assert entries["bin/busybox"].isreg()
    assert entries["bin/busybox"].mode == 0o755
    assert read_member(layer, "bin/busybox") == BUSYBOX_BYTES


@needs_static_busybox
@pytest.mark.anyio
async def test_build_busybox_image_has_tmp_users_path_and_shell() -> None:
    loader = RecordingLoader()
    image_id = await build_busybox_image(loader)
    manifest, config, layer = unpack(loader.loaded[0])
    assert manifest["RepoTags"] == [DEFAULT_BUSYBOX_TAG]
    assert image_id == "sha256:" + manifest["Config"].removesuffix(".json")
    assert config["config"]["Cmd"] == ["sh"]
    assert config["config"]["Env"] == [
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    ]
    entries = layer_members(layer)
    assert entries["tmp"].isdir()
    assert entries["tmp"].mode == 0o1777
    passwd = read_member(layer, "etc/passwd").decode()
    group = read_member(layer, "etc/group").decode()
    assert [line.split(":")[0] for line in passwd.splitlines()] == ["root", "nobody"]
    assert [line.split(":")[0] for line in group.splitlines()] == ["root", "nobody"]


@needs_static_busybox
@pytest.mark.anyio
async def test_build_busybox_image_is_deterministic() -> None:
    loader = RecordingLoader()
    first = await build_busybox_image(loader, tag="example.local/bb:1")
    second = await build_busybox_image(loader, tag="example.local/bb:1")
    assert first == second
    assert loader.loaded[0] == loader.loaded[1]


@pytest.mark.anyio
async def test_build_busybox_image_names_the_package_when_busybox_is_missing(
    tmp_path: Path,
) -> None:
    loader = RecordingLoader()
    with pytest.raises(ImageBuildError, match="busybox-static"):
        await build_busybox_image(loader, busybox=tmp_path / "busybox")
    assert loader.loaded == []


@pytest.mark.anyio
async def test_build_busybox_image_refuses_a_dynamic_busybox(dynamic_binary: Path) -> None:
    with pytest.raises(ImageBuildError, match=r"not a statically linked.*busybox-static"):
        await build_busybox_image(RecordingLoader(), busybox=dynamic_binary)


@pytest.mark.anyio
async def test_build_busybox_image_refuses_a_busybox_it_cannot_run(
    unrunnable_busybox: Path,
) -> None:
    with pytest.raises(ImageBuildError, match="busybox-static"):
        await build_busybox_image(RecordingLoader(), busybox=unrunnable_busybox)
