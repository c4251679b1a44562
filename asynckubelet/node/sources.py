"""Pod sources: the static-pod manifest directory, watched for changes.

The kubelet runs "static pods" from files in a directory; editing a file changes the pod,
removing the file deletes it. Each file is loaded on its own (a broken file does not stop
the others, and its pods stay as they were until it is fixed); the pod UID derives from
node, namespace and name, so an edited manifest is the same pod with a new spec, and the
runtime restarts only the containers whose spec hash changed. Changes arrive through
filesystem notifications (watchfiles), never by polling. Files whose name starts with a
dot are ignored, so writers can create a temporary file and rename it into place.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel
import watchfiles
from loguru import logger

from asynckubelet import errors, hostfs
from asynckubelet.manifests import Level, Manifests, load_manifests

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
SourceSink = Callable[[str, Manifests], None]
"""Receives ``(source name, everything that source now wants)``."""


def is_manifest(path: Path) -> bool:
    return path.suffix in MANIFEST_SUFFIXES and not path.name.startswith(".")


def source_name(path: Path) -> str:
    return f"file:{path}"


class ManifestDirSource:
    """Feeds ``sink`` with the pods of every manifest file in ``directory``, kept current."""

    def __init__(
        self,
        directory: Path,
        *,
        sink: SourceSink,
        node_name: str,
        pod_security: Level = "baseline",
        on_error: Callable[[Path, str], None] | None = None,
    ) -> None:
        self.directory = directory
        self.sink = sink
        self.node_name = node_name
        self.pod_security: Level = pod_security
        self.on_error = on_error
        self.loaded: set[Path] = set()

    def load(self, path: Path) -> None:
        """(Re)load one file; a vanished file means its pods are no longer wanted."""
        if not path.is_file():
            if path in self.loaded:
                self.loaded.discard(path)
                self.sink(source_name(path), Manifests())
            return
        try:
            manifests = load_manifests(
                path, pod_security=self.pod_security, node_name=self.node_name
            )
        except (errors.ManifestError, OSError) as e:
            logger.warning("manifest {} not loaded: {}", path, e)
            if self.on_error is not None:
                self.on_error(path, str(e))
            return
        self.loaded.add(path)
        self.sink(source_name(path), manifests)

    def load_all(self) -> None:
        hostfs.make_dirs(self.directory, ".", mode=hostfs.DIR_MODE)
        present = {p for p in self.directory.iterdir() if is_manifest(p)}
        for path in sorted(present | self.loaded):
            self.load(path)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Load everything, report started, then follow the directory's changes."""
        hostfs.make_dirs(self.directory, ".", mode=hostfs.DIR_MODE)

        def wanted(_change: watchfiles.Change, name: str) -> bool:
            return is_manifest(Path(name))

        started = False
        while True:
            try:
                watcher = watchfiles.awatch(
                    self.directory,
                    watch_filter=wanted,
                    debounce=100,
                    step=20,
                    recursive=False,
                    rust_timeout=500,
                    yield_on_timeout=True,
                )
                self.load_all()
                if not started:
                    started = True
                    task_status.started()
                rescanned = False
                async for changes in watcher:
                    if not changes:
                        # The watch begins with the first iteration: files written between
                        # the first scan and then are found by this one rescan.
                        if not rescanned:
                            rescanned = True
                            self.load_all()
                        continue
                    for path in sorted({Path(name) for _, name in changes}):
                        self.load(path)
                        # Many files at once (an apply of a directory) must not hold the
                        # event loop for the whole batch.
                        await anyio.lowlevel.checkpoint()
            except OSError as e:
                logger.warning("watching {} failed ({}); retrying", self.directory, e)
                if not started:
                    started = True
                    task_status.started()
                await anyio.sleep(1.0)
