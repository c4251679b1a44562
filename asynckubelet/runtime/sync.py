"""The sync step executor: one ``sync_pod`` call carrying out a :class:`PodActions`.

:func:`~asynckubelet.runtime.actions.compute_pod_actions` decides; :class:`PodSync` acts,
in the kubelet's order: kill the pod or the unwanted containers, set up volumes, create
the sandbox and its network, start the init containers one at a time, then the app
containers together. Image pulls for every container start at the beginning, so they
overlap the rest. Each step records one result; a step that fails records why, emits the
kubelet's event, and leaves the rest to the next sync. Creating and starting a container
(or the sandbox) is one step a cancelled caller cannot split, and what a failed sandbox
left is removed, shielded from cancellation.
"""

from __future__ import annotations

import contextlib
import dataclasses
from datetime import UTC, datetime

import anyio
import anyio.abc
from lightkube.models.core_v1 import Container, Pod

from asynckubelet import _trace, errors
from asynckubelet.docker import ContainerConfig, HostConfig
from asynckubelet.runtime import backoff as backoff_mod
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime import hooks, naming, resizing, security
from asynckubelet.runtime.actions import (
    KILL_REASON_LIVENESS_PROBE,
    KILL_REASON_RESTART_ALL_CONTAINERS,
    KILL_REASON_STARTUP_PROBE,
    ContainerToKill,
    PodActions,
    ephemeral_containers,
)
from asynckubelet.runtime.deps import RuntimeDeps
from asynckubelet.runtime.dnsfiles import node_resolver, read_pod_files, write_pod_files
from asynckubelet.runtime.env import Environment, PodContext, make_environment
from asynckubelet.runtime.images import RegistryAuth
from asynckubelet.runtime.kill import container_spec, grace_period_of, kill_container, kill_pod
from asynckubelet.runtime.metrics import count_failed_steps, measured
from asynckubelet.runtime.poddns import ResolverConfig
from asynckubelet.runtime.pulls import ImagePull
from asynckubelet.runtime.resources import host_config_resources
from asynckubelet.runtime.results import PodSyncResult, SyncAction, SyncError, SyncResult
from asynckubelet.runtime.sandbox import (
    PodSandboxConfig,
    generate_pod_sandbox_config,
    pod_network_request,
    sandbox_docker_config,
)
from asynckubelet.runtime.status_reader import DEFAULT_TERMINATION_MESSAGE_PATH
from asynckubelet.runtime.types import ContainerState, ContainerStatus, PodRuntimeStatus
from asynckubelet.runtime.volumes import Mount


class PodSync:
    """One ``sync_pod`` call: carries out a :class:`PodActions` in the kubelet's order."""

    def __init__(
        self,
        deps: RuntimeDeps,
        pod: Pod,
        status: PodRuntimeStatus,
        actions: PodActions,
        result: PodSyncResult,
        *,
        context: PodContext,
        auths: list[RegistryAuth],
        backoff: backoff_mod.Backoff,
        image_backoff: backoff_mod.Backoff,
    ) -> None:
        self.deps = deps
        self.pod = pod
        self.status = status
        self.actions = actions
        self.result = result
        self.context = context
        self.auths = auths
        self.backoff = backoff
        self.image_backoff = image_backoff
        self.pulls: dict[str, ImagePull] = {}
        self.sandbox_id = actions.sandbox_id
        assert pod.spec is not None  # noqa: S101  (type narrowing: an admitted pod has a spec)
        self.spec = pod.spec

    def event(self, type: str, reason: str, message: str, container: str | None = None) -> None:
        self.deps.events(self.pod, type=type, reason=reason, message=message, container=container)

    async def execute(self) -> None:
        _trace.mark("sync")
        actions = self.actions
        if actions.containers_to_reset:
            await self._reset()
            return
        if actions.create_sandbox and self.status.sandboxes:
            self.event(
                "Normal", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created."
            )
        if actions.kill_pod:
            with measured(self.deps.metrics, "kill_pod"):
                killed = await kill_pod(self.deps, self.pod, self.status, grace_period=None)
            count_failed_steps(self.deps.metrics, killed)
            self.result.results.extend(killed.results)
            if not killed.ok:
                return
            if actions.create_sandbox:
                await self._purge_init_containers()
        else:
            await self._kill_unwanted()
            await self._resize()
        init = self.spec.initContainers or []
        to_start = [init[i] for i in actions.init_containers_to_start] if init else []
        app = [self.spec.containers[i] for i in actions.containers_to_start]
        ephemeral = [
            ephemeral_containers(self.pod)[i] for i in actions.ephemeral_containers_to_start
        ]
        volumes_ready = await self._setup_volumes()
        if not (actions.create_sandbox or to_start or app or ephemeral) or not volumes_ready:
            return
        async with anyio.create_task_group() as tg:
            for container in ephemeral + to_start + app:
                self._prefetch(tg, container)
            try:
                await self._run(to_start, app, ephemeral)
            finally:
                tg.cancel_scope.cancel()

    async def _run(
        self, init: list[Container], app: list[Container], ephemeral: list[Container]
    ) -> None:
        try:
            await self._run_in_order(init, app, ephemeral)
        finally:
            self.deps.starts.unclaim(self.status.uid)

    async def _run_in_order(
        self, init: list[Container], app: list[Container], ephemeral: list[Container]
    ) -> None:
        if self.actions.create_sandbox:
            created = await self._create_sandbox(self.actions.attempt)
            if created is None:
                return
            self.sandbox_id = created
        # Ephemeral containers start first, so that one can debug a pod whose init
        # containers fail (the kubelet's order).
        for container in ephemeral:
            await self._start_ephemeral(container)
        for container in init:
            ok = await self._start(container, init=True)
            if not ok and container.restartPolicy != "Always":
                return
        async with anyio.create_task_group() as tg:
            for container in app:
                tg.start_soon(self._start, container, False)

    async def _setup_volumes(self) -> bool:
        """The kubelet's ``WaitForAttachAndMount``: no container starts before its volumes."""
        provider = self.deps.volumes
        if provider is None or not self.spec.volumes:
            return True
        try:
            await provider.setup_pod(self.pod, context=self.context, docker=self.deps.docker)
        except errors.VolumeError as e:
            self.event("Warning", "FailedMount", str(e))
            return False
        return True

    # -- killing --------------------------------------------------------------------------

    async def _reset(self) -> None:
        """A restart in place (``RestartAllContainers``): stop the instances still running
        (the pod's grace period, no ``preStop``), then remove every listed instance, in
        order; the sandbox, its IP and the volumes stay. The first error ends the sync, and
        the next one takes up what is left. Each container's next instance is one restart
        further than the one removed."""
        by_id = {c.id: c for c in self.status.containers}
        grace = grace_period_of(self.pod, None)
        uid = self.status.uid
        with anyio.CancelScope(shield=True):
            for item in self.actions.containers_to_reset:
                status = by_id.get(item.container_id)
                if not item.kill or status is None:
                    continue
                before = len(self.result.errors)
                await kill_container(
                    self.deps,
                    self.pod,
                    status,
                    grace_period=grace,
                    reason=KILL_REASON_RESTART_ALL_CONTAINERS,
                    message=f"Container {item.name} is restarted with all the pod's containers",
                    result=self.result,
                    pre_stop=False,
                )
                if len(self.result.errors) > before:
                    return
            for item in self.actions.containers_to_reset:
                step = self.result.add(SyncAction.REMOVE_CONTAINER, item.name)
                key = (uid, item.name)
                counts = self.deps.reset_restart_counts
                counts[key] = max(counts.get(key, 0), item.restart_count + 1)
                try:
                    await self.deps.docker.remove_container(item.container_id, force=True)
                except errors.NotFound:
                    pass
                except errors.DockerError as e:
                    step.fail(SyncError.KILL_CONTAINER, str(e))
                    return
        self.result.containers_reset = True

    async def _kill_unwanted(self) -> None:
        to_kill = list(self.actions.containers_to_kill.values())
        if not to_kill:
            return
        by_id = {c.id: c for c in self.status.containers}
        grace = grace_period_of(self.pod, None)
        async with anyio.create_task_group() as tg:
            for info in to_kill:
                status = by_id.get(info.container_id)
                if status is None:
                    continue
                tg.start_soon(self._kill_one, status, self._probe_grace(info, grace), info.message)

    async def _resize(self) -> None:
        """``doPodResizeAction``: each container's new CPU and memory through the engine's
        update call, a lowered memory limit only above the container's usage; a failure is
        the pod's ``PodResizeInProgress`` error."""
        docker = self.deps.docker
        for update in self.actions.containers_to_update:
            try:
                usage = None
                if update.lowers_memory:
                    usage = await resizing.memory_usage(docker, update.container_id)
                limit = update.action.update.get("Memory")
                if usage is not None and limit is not None and limit < usage:
                    raise resizing.ResizeError(
                        f'attempting to set container "{update.name}" memory limit ({limit}) '
                        f"below current usage ({usage})"
                    )
                await resizing.carry_out(docker, update.container_id, update.action)
                self.result.resized = True
            except (resizing.ResizeError, errors.AsyncKubeletError) as e:
                self.result.resize_error = str(e)
            finally:
                self.deps.cache.forget(update.container_id)

    def _probe_grace(self, info: ContainerToKill, grace: float) -> float:
        """A probe's own ``terminationGracePeriodSeconds`` when it is why the kill happens."""
        spec = container_spec(self.pod, info.name)
        if spec is None:
            return grace
        probe = {
            KILL_REASON_LIVENESS_PROBE: spec.livenessProbe,
            KILL_REASON_STARTUP_PROBE: spec.startupProbe,
        }.get(info.reason)
        if probe is not None and probe.terminationGracePeriodSeconds is not None:
            return float(probe.terminationGracePeriodSeconds)
        return grace

    async def _kill_one(self, status: ContainerStatus, grace: float, message: str) -> None:
        await kill_container(
            self.deps, self.pod, status, grace_period=grace, message=message, result=self.result
        )

    async def _purge_init_containers(self) -> None:
        names = {c.name for c in self.spec.initContainers or []}
        with anyio.CancelScope(shield=True):
            for c in self.status.containers:
                if c.name in names and c.state is not ContainerState.RUNNING:
                    await self.deps.docker.remove_container(c.id, force=True)

    # -- the sandbox ----------------------------------------------------------------------

    async def _sandbox_config(self, attempt: int) -> PodSandboxConfig:
        """The inputs that need I/O, then the pure configuration."""
        deps = self.deps
        local = deps.engine.is_local()
        cgroup_root = deps.config.cgroup_root if local else None
        return generate_pod_sandbox_config(
            self.pod,
            node=deps.node,
            owner=deps.config.owner,
            attempt=attempt,
            dns=deps.config.dns,
            node_resolver=(
                ResolverConfig() if self.spec.hostNetwork else await node_resolver(deps.config.dns)
            ),
            cgroup_root=cgroup_root,
            cgroup_driver=await deps.engine.find_cgroup_driver() if cgroup_root is not None else "",
            log_root=deps.config.pod_log_dir if local else None,
        )

    async def _make_sandbox(self, config: ContainerConfig, name: str) -> str:
        """Create and start the pause container as one step a cancelled caller cannot split;
        a sandbox that fails to start is removed."""
        async with self.deps.starts.slot(sandbox=True, pod=self.status.uid):
            _trace.mark("sandbox slot")
            with anyio.CancelScope(shield=True):
                sandbox_id = await self.deps.docker.create_container(config, name=name)
                _trace.mark("sandbox created")
                try:
                    await self.deps.docker.start_container(sandbox_id)
                except BaseException:
                    await self.deps.docker.remove_container(sandbox_id, force=True)
                    raise
                _trace.mark("sandbox started")
        return sandbox_id

    async def _create_sandbox(self, attempt: int) -> str | None:
        deps = self.deps
        step = self.result.add(SyncAction.CREATE_POD_SANDBOX, ctr.pod_identity(self.pod)[0])
        host_network = bool(self.spec.hostNetwork)
        mode = deps.network.sandbox_network_mode(host_network=host_network)
        # The network backend makes the namespace and the node can write the pod's files:
        # Docker need not build a network sandbox of its own.
        own_files = mode == "none" and deps.volumes is not None and deps.engine.is_local()
        sandbox_id: str | None = None
        try:
            image = await deps.engine.pause_image()
            sandbox = await self._sandbox_config(attempt)
            extra = deps.network.sandbox_extra(
                host_network=host_network, port_mappings=sandbox.port_mappings
            )
            config = sandbox_docker_config(
                self.pod,
                sandbox,
                image=image,
                network_mode=mode,
                extra=extra,
                engine_dns_keys=not deps.engine.is_local(),
                network_disabled=own_files,
                log_config=await deps.engine.container_log_config(),
            )
            try:
                sandbox_id = await self._make_sandbox(config, sandbox.name)
            except errors.ImageNotFound:
                await deps.images.ensure(image, policy="IfNotPresent")
                sandbox_id = await self._make_sandbox(config, sandbox.name)
            ips = () if host_network else await self._setup_network(sandbox, sandbox_id)
            _trace.mark("network")
            if own_files:
                await self._write_network_files(ips)
            else:
                await write_pod_files(
                    docker=deps.docker,
                    pod=self.pod,
                    sandbox_id=sandbox_id,
                    pod_ips=ips,
                    settings=deps.config.dns,
                    event=self.event,
                )
            self.context = dataclasses.replace(self.context, pod_ips=ips)
            _trace.mark("pod files")
            return sandbox_id
        except (errors.AsyncKubeletError, OSError) as e:
            message = f"Failed to create pod sandbox: {e}"
            step.fail(SyncError.CREATE_POD_SANDBOX, message)
            self.event("Warning", "FailedCreatePodSandBox", message)
            await self._remove_sandbox(sandbox_id)
            return None
        except BaseException:
            await self._remove_sandbox(sandbox_id)
            raise

    async def _write_network_files(self, ips: tuple[str, ...]) -> None:
        """The pod's resolv.conf and hosts file, in its directory on the node, for a sandbox
        of which Docker made none; its containers mount them."""
        assert self.deps.volumes is not None  # noqa: S101  (type narrowing: checked by the caller)
        files = await read_pod_files(
            self.pod, settings=self.deps.config.dns, pod_ips=ips, whole=True
        )
        try:
            await self.deps.volumes.write_network_files(
                ctr.pod_identity(self.pod)[2],
                resolv_conf=files.resolv_conf,
                hosts=files.hosts or "",
            )
        except OSError as e:
            raise errors.SandboxError(f"writing the pod's resolv.conf and hosts: {e}") from e
        for ev in files.events:
            self.event(ev.type, ev.reason, ev.message)

    async def _setup_network(self, sandbox: PodSandboxConfig, sandbox_id: str) -> tuple[str, ...]:
        """The network backend's part; returns the pod's IPs."""
        net_step = self.result.add(SyncAction.SETUP_NETWORK, sandbox.name)
        pid = await self.deps.sandbox_pid(ctr.pod_identity(self.pod)[2], sandbox_id)
        try:
            request = pod_network_request(self.pod, sandbox, sandbox_id=sandbox_id, pid=pid)
            net = await self.deps.network.setup_pod(request)
        except errors.AsyncKubeletError as e:
            net_step.fail(SyncError.SETUP_NETWORK, str(e))
            raise
        return net.ips

    async def _remove_sandbox(self, sandbox_id: str | None) -> None:
        if sandbox_id is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await self.deps.network.teardown_pod(sandbox_id=sandbox_id)
            finally:
                await self.deps.docker.remove_container(sandbox_id, force=True)

    # -- images ---------------------------------------------------------------------------

    def _pull(self, container: Container) -> ImagePull:
        return ImagePull(
            container,
            images=self.deps.images,
            pod_uid=self.status.uid,
            auths=self.auths,
            image_backoff=self.image_backoff,
        )

    def _prefetch(self, tg: anyio.abc.TaskGroup, container: Container) -> None:
        image = container.image or ""
        if image in self.pulls:
            return
        task = self._pull(container)
        self.pulls[image] = task
        tg.start_soon(task.run)

    async def _ensure_image(self, container: Container, step: SyncResult) -> bool:
        task = self.pulls.get(container.image or "")
        if task is None:
            task = self._pull(container)
            await task.run()
        if task.pulling and not task.done.is_set():
            # A pull keeps the pod's containers from the engine for longer than a start:
            # the slot its sandbox left goes to the next pod meanwhile.
            self.deps.starts.unclaim(self.status.uid)
        await task.done.wait()
        for type, reason, message in task.events:
            self.event(type, reason, message, container.name)
        if task.error is not None:
            error, message = task.error
            step.fail(error, message)
            return False
        return True

    # -- containers -----------------------------------------------------------------------

    async def _start_ephemeral(self, container: Container) -> bool:
        """An ephemeral container, in the pod's network and IPC namespaces and, when it
        names a target, that running container's process namespace."""
        target = next(
            (
                ec.targetContainerName
                for ec in self.spec.ephemeralContainers or []
                if ec.name == container.name
            ),
            None,
        )
        if not target:
            return await self._start(container, init=False)
        found = self.status.find_container(target)
        if found is None or found.state is not ContainerState.RUNNING:
            step = self.result.add(SyncAction.START_CONTAINER, container.name)
            step.fail(
                SyncError.CREATE_CONTAINER_CONFIG, f"unable to find target container {target}"
            )
            return False
        return await self._start(container, init=False, pid_of=found.id)

    async def _start(self, container: Container, init: bool, pid_of: str = "") -> bool:
        action = SyncAction.INIT_CONTAINER if init else SyncAction.START_CONTAINER
        step = self.result.add(action, container.name)
        check = backoff_mod.should_back_off(
            backoff=self.backoff, pod=self.pod, container=container, status=self.status
        )
        if check.in_backoff:
            step.fail(SyncError.CRASH_LOOP_BACK_OFF, check.message)
            if check.report:
                self.event("Warning", "BackOff", check.event_message, container.name)
            return False
        if not await self._ensure_image(container, step):
            return False
        previous = self.status.find_container(container.name)
        reset_key = (self.status.uid, container.name)
        if previous is not None:
            restart_count = previous.restart_count + 1
        else:
            restart_count = self.deps.reset_restart_counts.get(reset_key, 0)
        try:
            environment, host = await self._container_setup(container, restart_count)
        except errors.ContainerConfigError as e:
            step.fail(SyncError.CREATE_CONTAINER_CONFIG, str(e))
            self.event("Warning", "Failed", f"Error: {e}", container.name)
            return False
        if pid_of:
            host["PidMode"] = f"container:{pid_of}"
        cgroup_parent = await self.deps.engine.cgroup_parent(self.pod)
        if cgroup_parent is not None:
            host["CgroupParent"] = cgroup_parent
        log_config = await self.deps.engine.container_log_config()
        if log_config is not None:
            host["LogConfig"] = log_config
        name, config = ctr.container_config(
            self.pod,
            container,
            node=self.deps.node,
            owner=self.deps.config.owner,
            sandbox_id=self.sandbox_id,
            restart_count=restart_count,
            environment=environment,
            extra_host=host,
        )
        # Created and started as one step: a cancelled caller never leaves a container
        # that was made but not started.
        async with self.deps.starts.slot(pod=self.status.uid):
            _trace.mark("container slot")
            with anyio.CancelScope(shield=True):
                cid = await self._create_and_start(container, name, config, step)
        if cid is None:
            return False
        self.deps.reset_restart_counts.pop(reset_key, None)
        await self.deps.engine.link_log(self.pod, container.name, restart_count, cid)
        lifecycle = container.lifecycle
        if lifecycle is not None and lifecycle.postStart is not None:
            return await self._post_start(container, cid, step)
        return True

    async def _container_setup(
        self, container: Container, restart_count: int
    ) -> tuple[Environment, HostConfig]:
        """The container's environment, and its resources, security settings and mounts;
        :class:`~errors.ContainerConfigError` when the spec cannot be carried out."""
        environment = make_environment(self.pod, container, self.context)
        host = host_config_resources(container)
        host.update(
            security.host_config_security(
                self.pod, container, seccomp_default=self.deps.config.seccomp_default
            )
        )
        if security.effective(self.pod, container).run_as_non_root:
            image = await self.deps.docker.inspect_image(container.image or "")
            security.verify_run_as_non_root(
                self.pod, container, image_user_field=image.get("Config", {}).get("User") or ""
            )
        volumes = self.deps.volumes
        if volumes is None and container.volumeMounts:
            raise errors.ContainerConfigError(
                f"container {container.name} mounts volumes, but this node cannot provide"
                " them (pod volumes are directories on the node: they need a local Docker"
                " engine)"
            )
        if volumes is not None and container.volumeMounts:
            mounts = await volumes.mounts_for(
                self.pod, container, environment=dict(environment.env)
            )
            host["Mounts"] = [m.to_docker() for m in mounts]
        if volumes is not None:
            files = await volumes.network_file_mounts(self.pod, container)
            host.setdefault("Mounts", []).extend(m.to_docker() for m in files)
            log = await volumes.termination_log(self.pod, container, restart_count=restart_count)
            target = container.terminationMessagePath or DEFAULT_TERMINATION_MESSAGE_PATH
            host.setdefault("Mounts", []).append(Mount(target=target, source=log).to_docker())
        return environment, host

    async def _post_start(self, container: Container, cid: str, step: SyncResult) -> bool:
        """Run ``postStart``; on failure kill the container, as ``kuberuntime`` does."""
        assert container.lifecycle is not None  # noqa: S101  (type narrowing: called only for a container with postStart)
        target = await self.deps.hook_target(self.pod, container_id=cid, sandbox_id=self.sandbox_id)
        message = await hooks.run_hook(
            container.lifecycle.postStart,
            self.pod,
            container,
            target,
            docker=self.deps.docker,
            timeout=None,
        )
        if message is None:
            return True
        step.fail(SyncError.POST_START_HOOK, message)
        self.event("Warning", "FailedPostStartHook", "PostStartHook failed", container.name)
        started = ContainerStatus(
            id=cid, name=container.name, state=ContainerState.RUNNING, created_at=datetime.now(UTC)
        )
        await kill_container(
            self.deps,
            self.pod,
            started,
            grace_period=grace_period_of(self.pod, None),
            message="FailedPostStartHook",
            result=self.result,
        )
        return False

    async def _create_and_start(
        self, container: Container, name: str, config: ContainerConfig, step: SyncResult
    ) -> str | None:
        docker = self.deps.docker
        try:
            try:
                cid = await docker.create_container(config, name=name)
            except errors.Conflict:
                await self._remove_stale(name)
                cid = await docker.create_container(config, name=name)
        except errors.DockerError as e:
            step.fail(SyncError.CREATE_CONTAINER, str(e))
            self.event("Warning", "Failed", f"Error: {e}", container.name)
            if isinstance(e, errors.RuntimeUnavailable):
                # The answer was lost, not the create: Docker may have made the container.
                with contextlib.suppress(errors.DockerError):
                    await self._remove_stale(name)
            return None
        _trace.mark("container created")
        self.event("Normal", "Created", f"Created container {container.name}", container.name)
        try:
            await docker.start_container(cid)
        except errors.DockerError as e:
            step.fail(SyncError.RUN_CONTAINER, str(e))
            self.event("Warning", "Failed", f"Error: {e}", container.name)
            return None
        _trace.mark("container started")
        self.event("Normal", "Started", f"Started container {container.name}", container.name)
        return cid

    async def _remove_stale(self, name: str) -> None:
        """A container of this name exists from a sync that died before starting it."""
        rows = await self.deps.docker.list_containers(
            labels={naming.LABEL_NODE: self.deps.node}, name=f"^/{name}$"
        )
        for row in rows:
            if row.get("State") != "running":
                await self.deps.docker.remove_container(row["Id"], force=True)


__all__ = ["PodSync"]
