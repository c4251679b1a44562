"""Run the upstream e2e ``[NodeConformance]`` specs with asynckubelet as the only node.

A private dockerd (no default bridge), the suite's images made offline
(:mod:`conformance.images`), the control plane of ``integration/cluster`` and one
``asynckubelet serve --kubeconfig`` agent on the bridge backend; then ``e2e.test`` with the
skip list (``conformance/skip.txt``), its JUnit report, and a per-spec table. Everything
is torn down at the end whatever happened: the agent with its containers, bridge and state,
the control plane, the dockerd and its directories.

Usage: ``python -m conformance.run [--specs FILE] [--results FILE] [--report-dir DIR]``;
``--specs`` runs only the specs named in FILE (one full name a line), the CI subset.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio

from asynckubelet.docker import DockerClient
from asynckubelet.docker.engine import Dockerd
from conformance import images
from integration.cluster_fixtures import SCRIPTS, Agent, Cluster, _free_cluster_cidr
from integration.harness import Engine

HERE = Path(__file__).resolve().parent
FOCUS = r"\[NodeConformance\]"
NODE = "akl-conformance"
_GO_SPECIAL = set("\\.+*?()|[]{}^$")


def go_quote(text: str) -> str:
    """``text`` as a Go regular expression matching it literally."""
    return "".join(f"\\{c}" if c in _GO_SPECIAL else c for c in text)


@dataclass(frozen=True)
class Skip:
    pattern: str
    reason: str


def read_skips(path: Path) -> list[Skip]:
    skips = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        pattern, _, reason = line.partition("  # ")
        skips.append(Skip(pattern=pattern.strip(), reason=reason.strip()))
    return skips


def read_specs(path: Path) -> list[str]:
    return [s.strip() for s in path.read_text().splitlines() if s.strip() and not s.startswith("#")]


def log(message: str) -> None:
    print(f"conformance: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def private_engine(root: Path) -> Iterator[Engine]:
    daemon = Dockerd(root=root, name=f"aklconf-{secrets.token_hex(4)}")
    try:
        daemon.start()
        yield Engine(url=daemon.url, private=True)
    finally:
        daemon.stop(remove=True)


@contextlib.contextmanager
def control_plane(directory: Path, bin_dir: str) -> Iterator[Cluster]:
    env = {
        **os.environ,
        "AKL_CLUSTER_BIN": bin_dir,
        "AKL_CLUSTER_CLUSTER_CIDR": _free_cluster_cidr(),
        "NODE_NAME": NODE,
    }
    try:
        subprocess.run([str(SCRIPTS / "up.sh"), str(directory)], check=True, env=env)
        values = {}
        for line in (directory / "cluster.env").read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                values[key.strip()] = value.strip().strip("'\"")
        yield Cluster(dir=directory, env={**env, **values})
    finally:
        subprocess.run([str(SCRIPTS / "down.sh"), str(directory)], check=False)


@contextlib.contextmanager
def node(cluster: Cluster, engine: Engine, root: Path) -> Iterator[Agent]:
    agent = Agent(
        cluster=cluster,
        engine=engine,
        name=NODE,
        root=root,
        pause_image=images.PAUSE,
        bridge=f"aklcf{secrets.token_hex(3)}",
        extra=("--pod-security", "privileged"),
    )
    try:
        agent.start()
        agent.wait_ready(timeout=180)
        yield agent
    finally:
        log(f"agent log: {agent.log_paths[-1] if agent.log_paths else '-'}")
        keep = os.environ.get("AKL_CONFORMANCE_KEEP_LOG")
        if keep and agent.log_paths:
            shutil.copy(agent.log_paths[-1], keep)
        agent.cleanup()


def e2e_command(
    *, bin_dir: Path, cluster: Cluster, report_dir: Path, focus: str, skips: list[Skip]
) -> list[str]:
    return [
        str(bin_dir / "e2e.test"),
        f"--kubeconfig={cluster.admin}",
        "--provider=skeleton",
        f"--report-dir={report_dir}",
        "--node-os-distro=debian",
        "--allowed-not-ready-nodes=0",
        "--disable-log-dump",
        "--ginkgo.noColor",
        "--ginkgo.succinct",
        "--ginkgo.noisySkippings=false",
        f"--ginkgo.focus={focus}",
        f"--ginkgo.skip={'|'.join(s.pattern for s in skips)}",
    ]


@dataclass(frozen=True)
class Result:
    name: str
    outcome: str
    seconds: float
    message: str


def failure_message(failure: ET.Element) -> str:
    """The failure's first line after the spec's source location, without its time."""
    lines = [line.strip() for line in (failure.text or "").splitlines() if line.strip()]
    message = next((line for line in lines if not line.startswith("/")), "")
    _, sep, rest = message.partition(": ")
    return (rest if sep and message[:3].isalpha() else message)[:200]


def read_junit(report_dir: Path) -> list[Result]:
    results = []
    for path in sorted(report_dir.glob("junit*.xml")):
        for case in ET.parse(path).getroot().iter("testcase"):
            name = case.get("name", "")
            if FOCUS.replace("\\", "") not in name:
                continue
            seconds = float(case.get("time", "0") or 0)
            failure = case.find("failure")
            if failure is not None:
                results.append(Result(name, "failed", seconds, failure_message(failure)))
            elif case.find("skipped") is not None:
                results.append(Result(name, "skipped", seconds, ""))
            else:
                results.append(Result(name, "passed", seconds, ""))
    return results


def results_table(results: list[Result], *, skips: list[Skip], total: int, took: float) -> str:
    passed = sum(r.outcome == "passed" for r in results)
    failed = [r for r in results if r.outcome == "failed"]
    ran = [r for r in results if r.outcome != "skipped"]
    lines = [
        "# Upstream NodeConformance results",
        "",
        "Written by `conformance/run.sh` (`tox -e conformance`); the JUnit file is in its",
        "report directory.",
        "",
        f"{passed} of {total} upstream NodeConformance specs pass "
        f"({len(ran)} run, {len(failed)} failed, {total - len(ran)} not run); "
        f"the run took {took / 60:.1f} min.",
        "",
        "| spec | result | seconds |",
        "|---|---|---|",
    ]
    for r in sorted(ran, key=lambda r: r.name):
        cell = r.outcome if r.outcome == "passed" else f"**failed**: {r.message.replace('|', '/')}"
        lines.append(f"| {r.name.replace('|', '/')} | {cell} | {r.seconds:.0f} |")
    lines += ["", "## Skipped (the skip list, `conformance/skip.txt`)", ""]
    lines += [f"- `{s.pattern}`: {s.reason}" for s in skips]
    notes = HERE / "notes.md"
    if notes.exists():
        lines += ["", notes.read_text().rstrip()]
    return "\n".join(lines) + "\n"


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="conformance/run.sh", description=__doc__)
    parser.add_argument("--specs", type=Path, help="run only the specs this file names")
    parser.add_argument("--results", type=Path, help="write the per-spec table here")
    parser.add_argument("--report-dir", type=Path, help="JUnit report directory")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminated)
    if os.geteuid() != 0:
        log("needs root (dockerd, the bridge, the control plane)")
        return 2
    skips = read_skips(HERE / "skip.txt")
    focus = FOCUS
    if args.specs:
        focus = "|".join(go_quote(s) for s in read_specs(args.specs))
    built = subprocess.run([str(SCRIPTS / "build.sh")], check=True, capture_output=True, text=True)
    bin_dir = Path(built.stdout.strip().splitlines()[-1])
    total = (
        len(read_specs(args.specs))
        if args.specs
        else len(read_specs(bin_dir / "nodeconformance-specs.txt"))
    )
    work = Path(tempfile.mkdtemp(prefix="akl-conformance-"))
    report_dir = args.report_dir or work / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        status = _run(work, bin_dir, report_dir, focus, skips)
    finally:
        for name in ("cluster", "repo-list.yaml"):
            with contextlib.suppress(OSError):
                (shutil.rmtree if name == "cluster" else os.remove)(work / name)
        if args.report_dir:
            shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - started
    results = read_junit(report_dir)
    table = results_table(results, skips=skips, total=total, took=took)
    if args.results:
        args.results.write_text(table)
    log(table.splitlines()[0])
    log(f"JUnit report in {report_dir}")
    return status


def _run(work: Path, bin_dir: Path, report_dir: Path, focus: str, skips: list[Skip]) -> int:
    with private_engine(work / "dockerd") as engine:

        async def build() -> None:
            async with DockerClient(url=engine.url) as docker:
                await images.build_all(docker, programs=bin_dir)

        anyio.run(build)
        log("images loaded")
        (work / "cluster").mkdir()
        with (
            control_plane(work / "cluster", str(bin_dir)) as cluster,
            node(cluster, engine, work / "agent"),
        ):
            repo_list = work / "repo-list.yaml"
            repo_list.write_text(images.repo_list())
            command = e2e_command(
                bin_dir=bin_dir, cluster=cluster, report_dir=report_dir, focus=focus, skips=skips
            )
            log(" ".join(command))
            env = {**os.environ, "KUBE_TEST_REPO_LIST": str(repo_list)}
            return subprocess.run(command, env=env, cwd=work, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
