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
    # Seconds each module's tests took in `tox -e integration` on this machine (2 cores; a
    # run beside another such run, times 0.77, its ratio to a run alone), the session
    # fixtures counted in the module that first used them.
    "test_app.py": 38,
    "test_attach_ended.py": 1,
    "test_cli_daemon.py": 42,
    "test_cli_events.py": 12,
    "test_cli_get_templates.py": 5,
    "test_cli_kubectl_forms.py": 6,
    "test_cli_node.py": 146,
    "test_cli_progress.py": 15,
    "test_cluster_kubelet_authz.py": 25,
    "test_cluster_node.py": 164,
    "test_cronjob_daemonset.py": 87,
    "test_delete_wait.py": 11,
    "test_describe_workloads.py": 20,
    "test_dev_build.py": 32,
    "test_dev_watch.py": 20,
    "test_dns_boundary.py": 6,
    "test_docker_streams.py": 7,
    "test_engine_cli.py": 6,
    "test_ephemeral_debug.py": 7,
    "test_harness.py": 5,
    "test_host_safety.py": 7,
    "test_images_load.py": 4,
    "test_instances.py": 32,
    "test_kubectl_api.py": 13,
    "test_kubectl_clients.py": 24,
    "test_kubectl_controllerrevisions.py": 17,
    "test_kubectl_machinery.py": 28,
    "test_kubectl_resize.py": 31,
    "test_kubectl_resources.py": 32,
    "test_kubectl_rollout.py": 40,
    "test_kubectl_streams.py": 16,
    "test_kubectl_watch.py": 21,
    "test_kubectl_writes.py": 25,
    "test_library_docs.py": 6,
    "test_library_network.py": 3,
    "test_lifecycle_today.py": 22,
    "test_logs_bounds.py": 24,
    "test_loopback_guard.py": 5,
    "test_metrics_top.py": 54,
    "test_network_bridge.py": 179,
    "test_network_cli.py": 16,
    "test_network_cni.py": 244,
    "test_network_dns.py": 62,
    "test_network_docker.py": 167,
    "test_network_dualstack.py": 28,
    "test_network_engines.py": 6,
    "test_node_aiohttp.py": 2,
    "test_node_delete_race.py": 28,
    "test_node_dockerd_restart.py": 5,
    "test_node_kubelet.py": 12,
    "test_pod_resize.py": 1,
    "test_port_forward_cli.py": 12,
    "test_readme.py": 23,
    "test_readme_kubectl.py": 16,
    "test_restart_all_containers.py": 3,
    "test_run_cli.py": 20,
    "test_run_ends.py": 40,
    "test_run_first_start.py": 5,
    "test_run_lifecycle.py": 3,
    "test_runtime_crash.py": 97,
    "test_runtime_images.py": 6,
    "test_runtime_sync.py": 45,
    "test_service_account_issuer.py": 4,
    "test_service_ports.py": 56,
    "test_services.py": 99,
    "test_spec_deadline.py": 3,
    "test_spec_examples.py": 66,
    "test_spec_hooks.py": 14,
    "test_spec_probes.py": 25,
    "test_spec_security.py": 12,
    "test_spec_termination.py": 2,
    "test_spec_volumes.py": 21,
    "test_wait_failures.py": 19,
    "test_workloads.py": 33,
    # Marker dind throughout: they start DinD containers themselves, so inside DinD they
    # are deselected and only collected (they run in the host's integration run).
    "test_remote_build.py": 1,
    "test_remote_daemon.py": 1,
    "test_remote_probes.py": 1,
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
