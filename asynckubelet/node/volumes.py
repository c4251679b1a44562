"""The kubelet's volume manager on one machine: pod volumes as host directories.

Each pod gets a state directory laid out as the kubelet's
(``<root>/<uid>/volumes/kubernetes.io~<plugin>/<name>``) and every container of the pod
bind-mounts from it, so containers of one pod share their volumes as on a cluster.
ConfigMap (``data`` and ``binaryData`` byte for byte), Secret, downward API and projected
volumes (service-account tokens from the node's own issuer, ``node.tokens``) are written
with the kubelet's atomic-writer layout (a timestamped directory, a ``..data`` symlink
swapped with one ``rename``, user-visible names that are symlinks through ``..data``), so
a change of the source object, or a refreshed token, replaces every file at once and
readers never see half an update. Memory emptyDirs and Secrets live on tmpfs mounts
(when the node may mount; else plain directories). A ``persistentVolumeClaim`` is a
named Docker volume, created when absent and kept after the pod. Everything else is
removed with the pod.

This needs the Docker engine to see the node's filesystem (a local daemon).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio
from lightkube.models.core_v1 import Container, Pod, Volume

from asynckubelet import errors, hostfs
from asynckubelet._logging import logger
from asynckubelet.docker import DockerAPI
from asynckubelet.manifests.quantity import parse_quantity
from asynckubelet.node import subpath
from asynckubelet.node.atomic_writer import (
    write_atomic,
)
from asynckubelet.node.payloads import volume_payload
from asynckubelet.node.tokens import DEFAULT_ISSUER, TokenIssuer, TokenSource
from asynckubelet.runtime import naming
from asynckubelet.runtime.env import PodContext
from asynckubelet.runtime.expansion import expand
from asynckubelet.runtime.volumes import PROPAGATION, Mount

LABEL_CLAIM = "io.asynckubelet.pvc"
LABEL_CLAIM_NAMESPACE = "io.asynckubelet.pvc.namespace"

PLUGINS = {
    "emptyDir": "kubernetes.io~empty-dir",
    "configMap": "kubernetes.io~configmap",
    "secret": "kubernetes.io~secret",
    "downwardAPI": "kubernetes.io~downward-api",
    "projected": "kubernetes.io~projected",
}

SUPPORTED = (*PLUGINS, "hostPath", "persistentVolumeClaim")
"""Volume types this node sets up; the manifest loader warns about the others."""

EMPTY_DIR_OVER_LIMIT = 'Usage of EmptyDir volume "{}" exceeds the limit "{}". '
"""The kubelet eviction manager's ``emptyDirMessageFmt``."""


def default_root(node_name: str) -> Path:
    """``/var/lib/asynckubelet/<node>/pods`` as root, else under ``$XDG_STATE_HOME``."""
    if os.geteuid() == 0:
        return Path("/var/lib/asynckubelet") / node_name / "pods"
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "asynckubelet" / node_name / "pods"


def claim_volume_name(*, namespace: str, claim: str) -> str:
    """The Docker volume that stands for a PersistentVolumeClaim."""
    return f"{naming.NAME_PREFIX}-pvc-{namespace}-{claim}"


def failed_mount_message(volume: str, reason: str) -> str:
    """The kubelet's ``FailedMount`` event text."""
    return f'MountVolume.SetUp failed for volume "{volume}" : {reason}'


# -- hostPath ----------------------------------------------------------------------------


def check_host_path(path: str, type_: str | None) -> None:
    """The kubelet's ``checkTypeInternal``: create or check what ``type`` asks for."""
    p = Path(path)
    kind = type_ or ""
    if kind == "":
        return
    mode = p.stat().st_mode if p.exists() else None
    if kind == "DirectoryOrCreate":
        if mode is None:
            p.mkdir(mode=0o755, parents=True, exist_ok=True)
            return
        kind = "Directory"
    if kind == "FileOrCreate":
        if mode is None:
            try:
                p.touch(mode=0o644)
            except OSError as e:
                raise errors.VolumeError(
                    f"open {path}: {(e.strerror or str(e)).lower()}", volume=""
                ) from e
            return
        kind = "File"
    checks: dict[str, tuple[Callable[[int], bool], str]] = {
        "Directory": (stat.S_ISDIR, "a directory"),
        "File": (stat.S_ISREG, "a file"),
        "Socket": (stat.S_ISSOCK, "a socket file"),
        "CharDevice": (stat.S_ISCHR, "a character device"),
        "BlockDevice": (stat.S_ISBLK, "a block device"),
    }
    if kind not in checks:
        raise errors.VolumeError(f"{type_} is an invalid volume type", volume="")
    test, what = checks[kind]
    if mode is None or not test(mode):
        raise errors.VolumeError(f"hostPath type check failed: {path} is not {what}", volume="")


def set_volume_ownership(path: Path, gid: int, *, read_only: bool) -> None:
    """The kubelet's ``SetVolumeOwnership``: group ``gid``, group rw (ro), setgid dirs.

    Walks with directory descriptors and changes nothing through a link (links are left
    as they are), so a link a container made in the volume cannot carry the change out."""
    mask = 0o440 if read_only else 0o660
    with hostfs.open_dir(path.parent, path.name) as top:
        _own_tree(top, gid, mask)


def _own_tree(dir_fd: int, gid: int, mask: int) -> None:
    st = os.fstat(dir_fd)
    os.fchown(dir_fd, -1, gid)
    os.fchmod(dir_fd, stat.S_IMODE(st.st_mode) | mask | stat.S_ISGID | 0o110)
    with os.scandir(dir_fd) as entries:
        children = [(e.name, e.is_dir(follow_symlinks=False), e.is_symlink()) for e in entries]
    for name, is_dir, is_link in children:
        if is_link:
            continue
        if is_dir:
            child = hostfs.open_child_dir(dir_fd, name)
            try:
                _own_tree(child, gid, mask)
            finally:
                os.close(child)
            continue
        os.chown(name, -1, gid, dir_fd=dir_fd, follow_symlinks=False)
        mode = stat.S_IMODE(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        hostfs.chmod_at(dir_fd, name, mode | mask)


# -- the manager ------------------------------------------------------------------------

POD_DIR_MODE = 0o750
"""The pods root, each pod's directory and the directories between it and the volumes:
other local users reach nothing below (the kubelet's ``/var/lib/kubelet/pods``)."""
HOSTS_FILE = "etc-hosts"
RESOLV_FILE = "resolv.conf"
NETWORK_FILES = {"/etc/hosts": HOSTS_FILE, "/etc/resolv.conf": RESOLV_FILE}
"""Where a container sees the pod's network files, and their names in the pod's directory."""
NETWORK_FILE_MODE = 0o644
EMPTY_DIR_MODE = 0o777
"""An ``emptyDir``, writable by any user a container runs as (the kubelet's mode)."""
FILES_DIR_MODE = 0o755
"""A ConfigMap, Secret, downward API or projected volume: readable by the container's user."""


@dataclass(frozen=True)
class _Prepared:
    source: str
    kind: str
    read_only: bool = False
    host_path: str = ""
    """Where a Docker volume's data is on the node (for ``subPath``)."""


class VolumeManager:
    """Pod volumes under ``root`` (one directory per pod UID); a runtime ``VolumeProvider``.

    Every file operation under ``root`` goes through :mod:`asynckubelet.hostfs`: it never
    leaves ``root`` and never follows a link a container may have made in a volume.
    """

    def __init__(
        self,
        *,
        root: Path,
        node_name: str,
        use_tmpfs: bool | None = None,
        token_dir: Path | None = None,
        service_account_issuer: str = DEFAULT_ISSUER,
        token_source: TokenSource | None = None,
    ) -> None:
        self.root = root
        self._made = [p for p in (root.parent, root) if not p.exists()]
        """Directories this manager will create, removed again once no pod is left."""
        self.node_name = node_name
        self.use_tmpfs = os.geteuid() == 0 if use_tmpfs is None else use_tmpfs
        """Whether the node may mount: tmpfs for Secrets and memory emptyDirs, bind mounts
        for subPaths. Without it they are plain directories and checked paths."""
        self._prepared: dict[str, dict[str, _Prepared]] = {}
        self._claims: dict[str, _Prepared] = {}
        self.tokens = TokenIssuer(
            directory=token_dir or root.parent / "serviceaccount",
            node_name=node_name,
            issuer=service_account_issuer,
        )
        """The node-local service-account token issuer; its keys live in ``token_dir``
        (default ``<root>/../serviceaccount``), made on the first token."""
        self.token_source: TokenSource = token_source or self.tokens
        """Where projected tokens come from: ``tokens`` unless another source is given
        (an API server's ``TokenRequest``)."""

    def pod_dir(self, uid: str) -> Path:
        return self.root / hostfs.single_name(uid, what="pod UID")

    def _pod_rel(self, uid: str, *parts: str) -> str:
        return "/".join([hostfs.single_name(uid, what="pod UID"), *parts])

    def _volume_rel(self, uid: str, plugin: str, name: str) -> str:
        return self._pod_rel(uid, "volumes", PLUGINS[plugin], hostfs.single_name(name))

    def volume_dir(self, uid: str, plugin: str, name: str) -> Path:
        return self.root / self._volume_rel(uid, plugin, name)

    def _make_root(self) -> None:
        if not self.root.parent.exists():
            hostfs.make_dirs(self.root.parent, ".", mode=POD_DIR_MODE)
        with hostfs.open_dir(self.root, create=True, mode=POD_DIR_MODE) as fd:
            os.fchmod(fd, POD_DIR_MODE)

    def _make_volume_dir(self, uid: str, plugin: str, name: str, mode: int) -> bool:
        """Make the volume's directory (its parents 0750); False when it was there."""
        rel = self._volume_rel(uid, plugin, name)
        *parents, last = rel.split("/")
        with hostfs.open_dir(self.root, "/".join(parents), create=True, mode=POD_DIR_MODE) as fd:
            try:
                os.close(hostfs.open_child_dir(fd, last))
                return False
            except FileNotFoundError:
                os.close(hostfs.open_child_dir(fd, last, create=True, mode=mode))
                return True

    async def setup_pod(self, pod: Pod, *, context: PodContext, docker: DockerAPI) -> None:
        assert pod.metadata is not None and pod.spec is not None  # noqa: S101  (type narrowing: an admitted pod has metadata and spec)
        uid = pod.metadata.uid or ""
        prepared: dict[str, _Prepared] = {}
        for volume in pod.spec.volumes or []:
            if not any(getattr(volume, kind, None) is not None for kind in SUPPORTED):
                logger.debug("volume {} of an unsupported type is not mounted", volume.name)
                continue
            try:
                prepared[volume.name] = await self._setup_one(pod, volume, context, docker)
            except (errors.VolumeError, OSError) as e:
                raise errors.VolumeError(
                    failed_mount_message(volume.name, str(e)), volume=volume.name
                ) from e
        self._prepared[uid] = prepared

    async def _setup_one(
        self, pod: Pod, volume: Volume, context: PodContext, docker: DockerAPI
    ) -> _Prepared:
        assert pod.metadata is not None and pod.spec is not None  # noqa: S101  (type narrowing: an admitted pod has metadata and spec)
        uid = pod.metadata.uid or ""
        ctx = pod.spec.securityContext
        fs_group = ctx.fsGroup if ctx is not None else None
        if volume.hostPath is not None:
            await anyio.to_thread.run_sync(
                check_host_path, volume.hostPath.path, volume.hostPath.type
            )
            return _Prepared(source=volume.hostPath.path, kind="bind")
        if volume.persistentVolumeClaim is not None:
            claim = volume.persistentVolumeClaim
            namespace = pod.metadata.namespace or "default"
            name = claim_volume_name(namespace=namespace, claim=claim.claimName)
            if name in self._claims:
                return self._claims[name]
            info = await docker.create_volume(
                name,
                labels={
                    naming.LABEL_NODE: self.node_name,
                    LABEL_CLAIM: claim.claimName,
                    LABEL_CLAIM_NAMESPACE: namespace,
                },
            )
            self._claims[name] = _Prepared(
                source=name,
                kind="volume",
                read_only=bool(claim.readOnly),
                host_path=str(info.get("Mountpoint", "")),
            )
            return self._claims[name]
        await anyio.to_thread.run_sync(self._make_root)
        if volume.emptyDir is not None:
            path = self.volume_dir(uid, "emptyDir", volume.name)
            made = await anyio.to_thread.run_sync(
                self._make_volume_dir, uid, "emptyDir", volume.name, EMPTY_DIR_MODE
            )
            if not made:
                return _Prepared(source=str(path), kind="bind")
            if volume.emptyDir.medium == "Memory":
                size = volume.emptyDir.sizeLimit
                await self._tmpfs(path, mode=EMPTY_DIR_MODE, size=str(size) if size else None)
            if fs_group is not None:
                await anyio.to_thread.run_sync(
                    lambda: set_volume_ownership(path, fs_group, read_only=False)
                )
            return _Prepared(source=str(path), kind="bind")
        for plugin in ("configMap", "secret", "downwardAPI", "projected"):
            if getattr(volume, plugin) is not None:
                if _has_token(volume):
                    payload = await anyio.to_thread.run_sync(
                        lambda: volume_payload(
                            pod,
                            volume,
                            context,
                            tokens=lambda r: self.token_source.token(r).value,
                        )
                    )
                else:
                    payload = volume_payload(pod, volume, context)
                path = self.volume_dir(uid, plugin, volume.name)
                made = await anyio.to_thread.run_sync(
                    self._make_volume_dir, uid, plugin, volume.name, FILES_DIR_MODE
                )
                if made and plugin in ("secret", "projected"):
                    await self._tmpfs(path, mode=FILES_DIR_MODE, size=None)
                rel = self._volume_rel(uid, plugin, volume.name)
                await anyio.to_thread.run_sync(
                    lambda: write_atomic(self.root / rel, payload, gid=fs_group, root=self.root)  # noqa: B023
                )
                return _Prepared(source=str(path), kind="bind", read_only=True)
        raise errors.VolumeError("volume type is not supported on this node", volume=volume.name)

    async def _tmpfs(self, path: Path, *, mode: int, size: str | None) -> None:
        if not self.use_tmpfs:
            return
        options = f"mode={mode:04o}" if size is None else f"mode={mode:04o},size={_bytes(size)}"
        try:
            await anyio.run_process(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)])
        except (OSError, Exception) as e:
            logger.warning("tmpfs for {} not mounted ({}); using a plain directory", path, e)

    async def mounts_for(
        self, pod: Pod, container: Container, *, environment: Mapping[str, str]
    ) -> list[Mount]:
        assert pod.metadata is not None  # noqa: S101  (type narrowing: an admitted pod has metadata)
        uid = pod.metadata.uid or ""
        prepared = self._prepared.get(uid, {})
        mounts: list[Mount] = []
        for index, vm in enumerate(container.volumeMounts or []):
            volume = prepared.get(vm.name)
            declared = {v.name for v in (pod.spec.volumes if pod.spec else None) or []}
            if volume is None and vm.name in declared:
                continue
            if volume is None:
                raise errors.ContainerConfigError(
                    f"cannot find volume {vm.name!r} to mount into container {container.name!r}"
                )
            sub = vm.subPath or ""
            if vm.subPathExpr:
                sub = expand(vm.subPathExpr, environment)
            source, kind = volume.source, volume.kind
            if sub:
                if kind == "volume":
                    source, kind = volume.host_path, "bind"
                source = await anyio.to_thread.run_sync(
                    self._sub_path,
                    uid,
                    source,
                    sub,
                    vm.name,
                    container.name,
                    index,
                )
            mounts.append(
                Mount(
                    target=vm.mountPath,
                    source=source,
                    kind=kind,
                    read_only=bool(vm.readOnly) or volume.read_only,
                    propagation=PROPAGATION.get(vm.mountPropagation, ""),
                )
            )
        return mounts

    def _sub_path(
        self, uid: str, source: str, sub: str, volume: str, container: str, index: int
    ) -> str:
        if not self.use_tmpfs:
            return subpath.prepare_sub_path(source, sub, volume, container)
        return subpath.bind_sub_path(
            source,
            sub,
            pod_dir=self.pod_dir(uid),
            volume=volume,
            container=container,
            index=index,
        )

    async def empty_dir_over_limit(self, pod: Pod) -> str | None:
        """The eviction manager's local-storage check: the message when a disk emptyDir
        uses more than its ``sizeLimit``, else None."""
        assert pod.metadata is not None and pod.spec is not None  # noqa: S101  (type narrowing: an admitted pod has metadata and spec)
        for volume in pod.spec.volumes or []:
            empty = volume.emptyDir
            if empty is None or empty.sizeLimit is None or empty.medium == "Memory":
                continue
            path = self.volume_dir(pod.metadata.uid or "", "emptyDir", volume.name)
            used = await anyio.to_thread.run_sync(directory_usage, path)
            if used > _bytes(str(empty.sizeLimit)):
                return EMPTY_DIR_OVER_LIMIT.format(volume.name, empty.sizeLimit)
        return None

    async def termination_log(self, pod: Pod, container: Container, *, restart_count: int) -> str:
        """A new file per instance; files older than the previous instance's, and those of
        an earlier try at this same instance, are removed (garbage collection keeps only
        the newest dead instance)."""
        assert pod.metadata is not None  # noqa: S101  (type narrowing: an admitted pod has metadata)
        uid = pod.metadata.uid or ""
        rel = self._pod_rel(uid, "containers", hostfs.single_name(container.name))
        name = f"{restart_count}-{secrets.token_hex(4)}"

        def make() -> None:
            self._make_root()
            with hostfs.open_dir(self.root, rel, create=True) as fd:
                with os.scandir(fd) as entries:
                    old = [e.name for e in entries]
                for entry in old:
                    count = entry.split("-", 1)[0]
                    if count.isdigit() and int(count) in (*range(restart_count - 1), restart_count):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(entry, dir_fd=fd)
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                os.close(os.open(name, flags, 0o600, dir_fd=fd))
                hostfs.chmod_at(fd, name, 0o666)

        await anyio.to_thread.run_sync(make)
        return str(self.root / rel / name)

    async def write_network_files(self, uid: str, *, resolv_conf: str, hosts: str) -> None:
        """The pod's ``resolv.conf`` and ``etc-hosts`` (the kubelet's name) in its directory,
        each replaced whole (mode 0644: every user of the pod's containers reads them)."""
        rel = self._pod_rel(uid)

        def write() -> None:
            self._make_root()
            with hostfs.open_dir(self.root, rel, create=True, mode=POD_DIR_MODE) as fd:
                for name, text in ((HOSTS_FILE, hosts), (RESOLV_FILE, resolv_conf)):
                    hostfs.write_at(fd, name, text.encode(), mode=NETWORK_FILE_MODE)

        await anyio.to_thread.run_sync(write)

    async def network_file_mounts(self, pod: Pod, container: Container) -> list[Mount]:
        """The pod's files from :meth:`write_network_files` at ``/etc/hosts`` and
        ``/etc/resolv.conf``, read-only with a read-only root filesystem (as the CRI
        runtimes mount them); not where the container mounts a volume, nor when the pod
        has none (its sandbox has Docker's)."""
        assert pod.metadata is not None  # noqa: S101  (type narrowing: an admitted pod has metadata)
        uid = pod.metadata.uid or ""
        rel = self._pod_rel(uid)
        taken = {m.mountPath.rstrip("/") for m in container.volumeMounts or []}
        wanted = {t: n for t, n in NETWORK_FILES.items() if t not in taken}
        read_only = bool(
            container.securityContext and container.securityContext.readOnlyRootFilesystem
        )

        def present() -> list[str]:
            try:
                with hostfs.open_dir(self.root, rel) as fd:
                    return [
                        n
                        for n in wanted.values()
                        if stat.S_ISREG(os.stat(n, dir_fd=fd, follow_symlinks=False).st_mode)
                    ]
            except FileNotFoundError:
                return []

        found = await anyio.to_thread.run_sync(present) if wanted else []
        return [
            Mount(target=target, source=str(self.root / rel / name), read_only=read_only)
            for target, name in wanted.items()
            if name in found
        ]

    async def teardown_pod(self, *, uid: str) -> None:
        self._prepared.pop(uid, None)
        self.token_source.forget(pod_uid=uid)
        pod_dir = self.pod_dir(uid)
        left = await anyio.to_thread.run_sync(subpath.unmount_all_under, pod_dir)
        if left:
            # Removing the tree now would delete through what is still mounted there
            # (a persistent volume's data behind a subPath bind).
            logger.warning("pod directory {} kept: {} still mounted", pod_dir, ", ".join(left))
            return
        await anyio.to_thread.run_sync(hostfs.remove_tree, self.root, uid)
        for made in reversed(self._made):
            with contextlib.suppress(OSError):
                made.rmdir()


def _has_token(volume: Volume) -> bool:
    sources = volume.projected.sources if volume.projected is not None else None
    return any(s.serviceAccountToken is not None for s in sources or [])


def directory_usage(path: Path) -> int:
    """Bytes of disk the files under ``path`` take (``du``); 0 when it does not exist."""
    total = 0
    for dirpath, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


prepare_sub_path = subpath.prepare_sub_path


def _bytes(quantity: str) -> int:
    return int(parse_quantity(quantity).value)


__all__ = ["VolumeManager", "check_host_path", "claim_volume_name", "write_atomic"]
