"""Pod sources: the static-pod manifest directory, watched for changes.

The kubelet runs "static pods" from files in a directory; editing a file changes the pod,
removing the file deletes it. Each file is loaded on its own (a broken file, whatever it
holds, does not stop the others, and its pods stay as they were until it is fixed); the pod
UID derives from node, namespace and name, so an edited manifest is the same pod with a new
spec, and the runtime restarts only the containers whose spec hash changed. Changes arrive through
filesystem notifications (watchfiles), never by polling. Files whose name starts with a
dot are ignored, so writers can create a temporary file and rename it into place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread
import watchfiles

from asynckubelet import errors, hostfs
from asynckubelet._logging import logger
from asynckubelet.manifests import Level, Manifests, load_manifests

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
WATCH_STEP = 50
"""Milliseconds between the watcher thread's looks for changes (watchfiles' default): a
change is loaded 50-100 ms after it is made. Each look takes the interpreter's lock, so
a shorter step costs an idle node CPU (docs/benchmarks.md)."""
WATCH_BACKLOG = 64
"""Batches of changes the watcher may get ahead of their loading."""
SourceSink = Callable[[str, Manifests], None]
"""Receives ``(source name, everything that source now wants)``."""


def is_manifest(path: Path) -> bool:
    return path.suffix in MANIFEST_SUFFIXES and not path.name.startswith(".")


def source_name(path: Path) -> str:
    return f"file:{path}"


def is_static_source(source: str) -> bool:
    """Whether ``source`` is a manifest file's: its pods are static pods."""
    return source.startswith("file:")


_LOGGED_ERRORS = 20


@dataclass(frozen=True)
class _Failure:
    """Why a file was not loaded: a short message for its event, the detail for the log."""

    message: str
    detail: str


class ManifestDirSource:
    """Feeds ``sink`` with the pods of every manifest file in ``directory``, kept current.

    A file that cannot be loaded, whatever is in it, is reported (a log line and
    ``on_error``) and leaves the pods of every other file, and its own earlier ones, alone.
    Files are read in a worker thread, so a large one never stalls the node's loop.
    """

    def __init__(
        self,
        directory: Path,
        *,
        sink: SourceSink,
        node_name: str,
        pod_security: Level = "baseline",
        allow_namespace_policy: bool = False,
        on_error: Callable[[Path, str], None] | None = None,
        node_labels: bool = False,
    ) -> None:
        self.directory = directory
        self.node_labels = node_labels
        """The node checks nodeSelector and node affinity (no warning that they are not)."""
        self.sink = sink
        self.node_name = node_name
        self.pod_security: Level = pod_security
        self.allow_namespace_policy = allow_namespace_policy
        self.on_error = on_error
        self.loaded: set[Path] = set()

    def load(self, path: Path) -> None:
        """(Re)load one file; a vanished file means its pods are no longer wanted."""
        self._apply(path, self._read(path))

    async def reload(self, path: Path) -> None:
        """:meth:`load`, reading the file in a worker thread."""
        self._apply(path, await anyio.to_thread.run_sync(self._read, path))

    def _read(self, path: Path) -> Manifests | _Failure | None:
        try:
            if not path.is_file():
                return None
            return load_manifests(
                path,
                pod_security=self.pod_security,
                allow_namespace_policy=self.allow_namespace_policy,
                node_name=self.node_name,
                node_labels=self.node_labels,
            )
        except errors.ManifestError as e:
            lines = [f"{err.source}: {err}" if err.source else str(err) for err in e.errors]
            more = len(lines) - _LOGGED_ERRORS
            detail = "\n".join(
                lines[:_LOGGED_ERRORS] + ([f"... and {more} more"] if more > 0 else [])
            )
            first = lines[0] if lines else str(e)
            count = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
            return _Failure(f"{first}{count}", detail)
        except Exception as e:
            # A failure no rule foresaw (or the file system's): the file is skipped like a
            # rejected one; its text may quote the file, so only the type is reported.
            why = f"{path.name}: cannot be loaded ({type(e).__name__})"
            return _Failure(why, why)

    def _apply(self, path: Path, outcome: Manifests | _Failure | None) -> None:
        if outcome is None:
            if path in self.loaded:
                self.loaded.discard(path)
                self.sink(source_name(path), Manifests())
            return
        if isinstance(outcome, _Failure):
            logger.warning("manifest {} not loaded:\n{}", path, outcome.detail)
            if self.on_error is not None:
                self.on_error(path, outcome.message)
            return
        self.loaded.add(path)
        self.sink(source_name(path), outcome)

    def _present(self) -> set[Path]:
        hostfs.make_dirs(self.directory, ".", mode=hostfs.DIR_MODE)
        return {p for p in self.directory.iterdir() if is_manifest(p)}

    def load_all(self) -> None:
        for path in sorted(self._present() | self.loaded):
            self.load(path)

    async def reload_all(self) -> None:
        """:meth:`load_all`, each file read in a worker thread."""
        for path in sorted(self._present() | self.loaded):
            await self.reload(path)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Watch the directory, load everything, report started, then follow its changes.

        The watch begins before the first scan: a file written meanwhile is found by one or
        the other (by both, it is loaded twice to the same effect). While the directory
        stays as it is nothing wakes but the watcher's thread, which looks for changes
        every :data:`WATCH_STEP` milliseconds and ends within one step when the source is
        cancelled."""
        started = False
        while True:
            try:
                async with anyio.create_task_group() as tg:
                    send, receive = anyio.create_memory_object_stream[
                        set[tuple[watchfiles.Change, str]]
                    ](WATCH_BACKLOG)
                    stop = anyio.Event()
                    tg.start_soon(_stop_on_cancel, stop, name=f"stop watching {self.directory}")
                    tg.start_soon(self._watch, send, stop, name=f"watch {self.directory}")
                    async with receive:
                        # The watcher's first step makes its notifier (the watch begins)
                        # before this task goes on: asyncio runs tasks' steps in the order
                        # they were scheduled.
                        await anyio.lowlevel.checkpoint()
                        await self.reload_all()
                        if not started:
                            started = True
                            task_status.started()
                        async for changes in receive:
                            for path in sorted({Path(name) for _, name in changes}):
                                await self.reload(path)
                    tg.cancel_scope.cancel()
            except* OSError as group:
                logger.warning(
                    "watching {} failed ({}); retrying", self.directory, group.exceptions[0]
                )
                if not started:
                    started = True
                    task_status.started()
                await anyio.sleep(1.0)

    async def _watch(
        self,
        send: anyio.abc.ObjectSendStream[set[tuple[watchfiles.Change, str]]],
        stop: anyio.Event,
    ) -> None:
        """Each batch of changes to manifest files, until ``stop`` is set."""
        hostfs.make_dirs(self.directory, ".", mode=hostfs.DIR_MODE)

        def wanted(_change: watchfiles.Change, name: str) -> bool:
            return is_manifest(Path(name))

        async with send:
            async for changes in watchfiles.awatch(
                self.directory,
                watch_filter=wanted,
                debounce=100,
                step=WATCH_STEP,
                recursive=False,
                rust_timeout=0,
                stop_event=stop,
            ):
                await send.send(changes)


async def _stop_on_cancel(stop: anyio.Event) -> None:
    """Set ``stop`` once cancelled: the watcher's thread cannot be cancelled, but ends
    within a step of ``stop`` being set."""
    try:
        await anyio.sleep_forever()
    finally:
        stop.set()
