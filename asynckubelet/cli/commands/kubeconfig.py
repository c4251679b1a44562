"""``asynckubelet kubeconfig``: where the node's kubeconfig is, for kubectl and every
other Kubernetes client (``export KUBECONFIG=$(asynckubelet kubeconfig)``), and, with
``--merge``, its cluster, user and context added to ``~/.kube/config``."""

from __future__ import annotations

from asynckubelet.cli.options import KubeconfigMergeOpt, LogOptions, StateDirOpt
from asynckubelet.cli.output import command, fail, out


@command()
def kubeconfig(
    *, merge: KubeconfigMergeOpt = False, state_dir: StateDirOpt = None, log: LogOptions
) -> None:
    """Print the path of the node's kubeconfig (written by `serve`); --merge adds its
    context to ~/.kube/config."""
    from pathlib import Path

    from asynckubelet.api.kube import kubeconfigs
    from asynckubelet.errors import KubeconfigError
    from asynckubelet.node.locate import default_state_dir

    state = state_dir if state_dir is not None else default_state_dir()
    path = state / kubeconfigs.KUBECONFIG
    if not merge:
        if not path.is_file():
            raise fail(f"no kubeconfig at {path}: start the node with `asynckubelet serve`")
        out.print(str(path), markup=False)
        return
    try:
        merged = kubeconfigs.merge_kubeconfig(state, home=Path.home())
    except KubeconfigError as e:
        raise fail(str(e)) from None
    name = kubeconfigs.CONTEXT
    out.print(
        f"added context {name} to {merged}; use it with `kubectl config use-context {name}` "
        f"or `kubectl --context {name}`",
        markup=False,
    )
