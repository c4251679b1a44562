"""The integration modules split into shards of similar duration, for CI's Docker-in-Docker job.

The whole suite inside DinD takes longer than CI can add to every run, so each run takes one
shard and every module runs inside DinD once in every ``COUNT`` consecutive commits: the
shard is the commit's number (``git rev-list --count HEAD``) modulo ``COUNT``, so a re-run of
a commit repeats its shard and the next commit takes the next one. Without git it is the
day's number.

Modules are found on disk, so a new one is always in a shard; until it is measured it
weighs ``UNMEASURED``. Shards are filled longest module first into the lightest shard
(ties by name), which keeps them within a few percent of each other.

Usage: ``python3 -m integration.dind.shards [--count N] [--shard K]`` prints the chosen
shard's modules, one per line, and on stderr which shard it is (``K`` from 1).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
COUNT = 3

UNMEASURED = 30.0
SECONDS: dict[str, float] = {
    # Seconds each module's tests took in `tox -e integration` on this machine (2 cores, the
    # mean of two CI runs), the session fixtures counted in the module that first used them.
    "test_app.py": 24,
    "test_cli_daemon.py": 20,
    "test_cli_events.py": 6,
    "test_cli_kubectl_forms.py": 3,
    "test_cli_node.py": 95,
    "test_cli_progress.py": 10,
    "test_cluster_kubelet_authz.py": 22,
    "test_cluster_node.py": 130,
    "test_dns_boundary.py": 4,
    "test_docker_streams.py": 8,
    "test_engine_cli.py": 5,
    "test_harness.py": 5,
    "test_host_safety.py": 6,
    "test_library_docs.py": 3,
    "test_logs_bounds.py": 20,
    "test_loopback_guard.py": 3,
    "test_network_bridge.py": 85,
    "test_network_cli.py": 8,
    "test_network_cni.py": 84,
    "test_network_dns.py": 32,
    "test_network_docker.py": 76,
    "test_network_dualstack.py": 17,
    "test_network_engines.py": 4,
    "test_node_aiohttp.py": 1,
    "test_node_delete_race.py": 20,
    "test_node_dockerd_restart.py": 3,
    "test_node_kubelet.py": 8,
    "test_readme.py": 14,
    # Marker dind throughout: they start DinD containers themselves, so inside DinD they
    # are deselected and only collected (they run in the host's integration run).
    "test_remote_build.py": 1,
    "test_remote_daemon.py": 1,
    "test_remote_probes.py": 1,
    "test_restart_all_containers.py": 2,
    "test_run_cli.py": 12,
    "test_run_ends.py": 34,
    "test_run_first_start.py": 3,
    "test_run_lifecycle.py": 2,
    "test_runtime_crash.py": 118,
    "test_runtime_images.py": 3,
    "test_runtime_sync.py": 49,
    "test_service_account_issuer.py": 2,
    "test_service_ports.py": 60,
    "test_services.py": 79,
    "test_spec_deadline.py": 4,
    "test_spec_examples.py": 68,
    "test_spec_hooks.py": 17,
    "test_spec_probes.py": 29,
    "test_spec_security.py": 13,
    "test_spec_termination.py": 2,
    "test_spec_volumes.py": 22,
    "test_workloads.py": 30,
}


def modules(repo: Path = REPO) -> list[str]:
    """Every integration test module, as a path from the repository's root, sorted."""
    return sorted(f"integration/{p.name}" for p in (repo / "integration").glob("test_*.py"))


def weight(module: str) -> float:
    return SECONDS.get(Path(module).name, UNMEASURED)


def split(names: list[str], *, count: int = COUNT) -> list[list[str]]:
    """``names`` in ``count`` shards of similar total weight, each sorted."""
    if count < 1:
        raise ValueError(f"count must be at least 1, not {count}")
    shards: list[list[str]] = [[] for _ in range(count)]
    totals = [0.0] * count
    for name in sorted(names, key=lambda n: (-weight(n), n)):
        lightest = min(range(count), key=lambda i: (totals[i], i))
        shards[lightest].append(name)
        totals[lightest] += weight(name)
    return [sorted(shard) for shard in shards]


def rotation_number(repo: Path = REPO) -> int:
    """The commit's number on its branch, or the day's number where there is no git."""
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "rev-list", "--count", "HEAD"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        done = None
    if done is not None and done.returncode == 0 and done.stdout.strip().isdigit():
        return int(done.stdout.strip())
    return int(time.time() // 86400)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m integration.dind.shards")
    parser.add_argument("--count", type=int, default=COUNT, help="number of shards")
    parser.add_argument("--shard", type=int, help="the shard to print, from 1 (default: rotate)")
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error(f"--count must be at least 1, not {args.count}")
    shards = split(modules(), count=args.count)
    if args.shard is None:
        number = rotation_number()
        index = number % args.count
        why = f"commit or day number {number}"
    elif 1 <= args.shard <= args.count:
        index = args.shard - 1
        why = "--shard"
    else:
        parser.error(f"--shard must be between 1 and {args.count}, not {args.shard}")
    chosen = shards[index]
    estimate = sum(weight(m) for m in chosen)
    print(
        f"DinD shard {index + 1} of {args.count} ({why}): {len(chosen)} modules, "
        f"about {estimate / 60:.0f} min of tests on the host",
        file=sys.stderr,
    )
    print("\n".join(chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
