#!/usr/bin/env bash
# Make a kubeconfig for one more node of the cluster up.sh started in DIR: a client
# certificate for system:node:NAME in group system:nodes, signed by the cluster's CA, so the
# Node authorizer and NodeRestriction treat its holder as node NAME. Prints the file's path
# (DIR/nodes/NAME.kubeconfig); an existing one is kept and printed again.
#
# Usage: node-kubeconfig.sh DIR NAME
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"

die() { echo "node-kubeconfig.sh: $*" >&2; exit 1; }

[ $# = 2 ] || die "usage: node-kubeconfig.sh DIR NAME"
[ -f "$1/.akl-cluster" ] && [ -f "$1/pki/ca.key" ] && [ -f "$1/cluster.env" ] \
    || die "$1 holds no cluster made by up.sh"
dir="$(cd "$1" && pwd -P)"
name="$2"
valid_node_name "$name" || die "'$name' is not a valid node name (a lowercase DNS-1123 subdomain)"
out="$dir/nodes/$name.kubeconfig"
mkdir -p "$dir/nodes"
exec 9>"$dir/nodes/.lock"
flock 9
[ -f "$out" ] || node_kubeconfig "$dir" "$name" "$out"
echo "$out"
