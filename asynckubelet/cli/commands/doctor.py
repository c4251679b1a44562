"""``asynckubelet doctor``: what a node needs, checked one by one, with a fix for each problem."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import typer

from asynckubelet.cli.options import (
    DEFAULT_FIREWALL,
    DEFAULT_NETWORK,
    DockerHostOpt,
    FirewallOpt,
    LogOptions,
    NetworkOpt,
    PauseImageOpt,
    StateDirOpt,
    check_network,
)
from asynckubelet.cli.output import command, escape, out, run_async

CNI_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))
CNI_PLUGINS = ("bridge", "host-local", "portmap", "loopback")


@dataclasses.dataclass
class _Report:
    problems: int = 0

    def __call__(self, ok: bool, what: str, fix: str = "") -> None:
        mark = "[green]ok[/green]  " if ok else "[red]FAIL[/red]"
        out.print(f"{mark} {escape(what)}")
        if not ok:
            self.problems += 1
            if fix:
                out.print(f"      fix: {escape(fix)}")


@dataclasses.dataclass
class _Engine:
    """What the engine said, when it answered."""

    version: str | None = None
    problem: str = "not reachable"
    pause_image: str = ""
    pause_present: bool = False
    isolated: bool = False
    probe_image_present: bool = False


async def _ask_engine(url: str | None, pause_image: str | None, probe_tag: str) -> _Engine:
    from asynckubelet.docker import DockerClient
    from asynckubelet.images.build import DEFAULT_PAUSE_TAG
    from asynckubelet.runtime import probehelper

    async with DockerClient(url=url, retry_attempts=1) as docker:
        if not await docker.ping():
            return _Engine()
        version = await docker.version()
        image = pause_image or DEFAULT_PAUSE_TAG
        present = await docker.image_exists(image)
        return _Engine(
            version=f"{version.get('Version', '?')} (API {version.get('ApiVersion', '?')})",
            pause_image=image,
            pause_present=present,
            isolated=probehelper.engine_is_isolated(await docker.info()),
            probe_image_present=await docker.image_exists(probe_tag),
        )


@command()
def doctor(
    *,
    state_dir: StateDirOpt = None,
    pause_image: PauseImageOpt = None,
    firewall: FirewallOpt = DEFAULT_FIREWALL,
    network: NetworkOpt = DEFAULT_NETWORK,
    docker_host: DockerHostOpt = None,
    log: LogOptions,
) -> None:
    """Check what a node needs, with a fix for each problem (exit 1 when any).

    The defaults are those of `run` and `serve` (the same --network, --pause-image and
    engine), so a clean report means they can start a pod as they are. The node instances
    of this host (--instance) are listed last: running or not, their bridge and ranges."""
    from asynckubelet import errors
    from asynckubelet.docker.engine import is_local_daemon, resolve_docker_url
    from asynckubelet.images.build import default_probe_tag
    from asynckubelet.node.daemon import default_state_dir

    check_network(network)
    report = _Report()
    url = resolve_docker_url(docker_host)
    local = is_local_daemon(url)
    probe_tag = default_probe_tag()
    try:
        engine = run_async(_ask_engine, url, pause_image, probe_tag)
    except errors.AsyncKubeletError as e:
        engine = _Engine(problem=str(e))
    _check_engine(report, url, engine, probe_tag=probe_tag, local=local)
    _check_network(report, url, network=network, firewall=firewall, local=local)
    _check_state_dir(report, state_dir or default_state_dir())
    report(
        shutil.which("dockerd") is not None or engine.version is not None,
        "dockerd installed or an engine answering",
        "apt-get install docker.io",
    )
    _list_instances(report, default_state_dir())
    raise typer.Exit(1 if report.problems else 0)


def _check_engine(
    report: _Report, url: str | None, engine: _Engine, *, probe_tag: str, local: bool
) -> None:
    from asynckubelet.docker.engine import tls_from_environment
    from asynckubelet.images.build import DEFAULT_PAUSE_TAG
    from asynckubelet.runtime import probehelper

    report(
        engine.version is not None,
        f"Docker engine at {url or 'the default socket'}: "
        + (f"version {engine.version}" if engine.version else engine.problem),
        "start one with `asynckubelet engine start` (or set DOCKER_HOST)",
    )
    shape = probehelper.describe_engine(
        url=url, tls=tls_from_environment(), isolated=engine.isolated
    )
    report(True, f"engine shape: {shape}")
    if engine.version is None:
        return
    if not local or engine.isolated:
        compiler = shutil.which("musl-gcc") or shutil.which("gcc")
        report(
            engine.probe_image_present or compiler is not None,
            f"probe helper image {probe_tag}: "
            + ("present" if engine.probe_image_present else "missing, loaded at first use"),
            "install a C compiler here (apt-get install musl-tools), or run "
            "`asynckubelet images build-probe` on a machine that has one",
        )
    _check_pause_image(report, engine, default=engine.pause_image == DEFAULT_PAUSE_TAG)


def _check_pause_image(report: _Report, engine: _Engine, *, default: bool) -> None:
    """The sandbox image: present; or the project's own, made at first use when a compiler
    is here; or another, pulled at first use."""
    compiler = shutil.which("musl-gcc") or shutil.which("gcc")
    if engine.pause_present:
        state, ok = "present", True
    elif default and compiler is not None:
        state, ok = f"missing, built at first use (with {compiler})", True
    elif default:
        state, ok = "missing, and no C compiler here to build it", False
    else:
        state, ok = "missing, pulled at first use", True
    report(
        ok,
        f"pause image {engine.pause_image}: {state}",
        "install a C compiler with a static libc (apt-get install musl-tools), or run "
        "`asynckubelet images build-pause` on a machine that has one",
    )


def _check_network(
    report: _Report, url: str | None, *, network: str, firewall: str, local: bool
) -> None:
    from asynckubelet.network.factory import choose_backend

    if network == "auto":
        backend, why = choose_backend(docker_url=url)
        report(True, f"network backend (--network auto): {backend}, because {why}")
    else:
        report(True, f"network backend (--network): {network}")
    wall = {"iptables": "iptables", "nftables": "nft"}.get(firewall)
    where = shutil.which(wall) if wall else None
    report(
        where is not None or (wall is not None and not local),
        f"firewall of the bridge network (--firewall): {firewall}, "
        + (f"{wall} at {where}" if where else f"{wall or firewall} not found"),
        "install it (apt-get install nftables or iptables), or choose "
        + ("--firewall iptables" if firewall == "nftables" else "--firewall nftables")
        if wall
        else "--firewall must be iptables or nftables",
    )
    found = [p for p in CNI_PLUGINS if any((d / p).exists() for d in CNI_DIRS)]
    report(
        len(found) == len(CNI_PLUGINS) or not local,
        f"CNI plugins: {', '.join(found) or 'none'} found in {', '.join(map(str, CNI_DIRS))}"
        + ("" if local else " (not used: --network cni needs a local engine)"),
        "install them: apt-get install containernetworking-plugins (needed for --network cni)",
    )
    if local:
        from asynckubelet.network.bridge import ipv6_support

        ipv6, how = ipv6_support()
        report(
            True, f"IPv6 dual stack (--dual-stack): {'possible' if ipv6 else 'not possible'}, {how}"
        )


def _check_state_dir(report: _Report, state: Path) -> None:
    try:
        state.mkdir(parents=True, exist_ok=True)
        probe_file = state / f".doctor.{os.getpid()}"
        probe_file.write_text("ok")
        probe_file.unlink()
        writable = True
    except OSError:
        writable = False
    report(
        writable,
        f"state dir {state}: " + ("writable" if writable else "not writable"),
        "pass --state-dir DIR (or ASYNCKUBELET_STATE_DIR) with a directory you can write",
    )


def _list_instances(report: _Report, default_state: Path) -> None:
    """The default instance and every named one whose state dir is on this host."""
    from asynckubelet.cli import instance

    for found in instance.found(instance.instances_root(), default_state=default_state):
        report(True, found.line())
