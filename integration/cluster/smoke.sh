#!/usr/bin/env bash
# Check that a control plane from up.sh does what a node agent needs, acting as node
# NAME through its node kubeconfig: it registers its Node and reports status, the
# controller manager gives it a pod CIDR, it creates and renews its Lease, reads a pod bound
# to it and updates that pod's status, gets a service-account token bound to that pod (and
# the API server accepts the token), and the scheduler places a pod on it. It is refused
# another node's Node and Lease and a token for a pod bound elsewhere (Node authorizer,
# NodeRestriction). What it creates is deleted again. Exit status 0 when every check holds.
#
# Usage: smoke.sh DIR [NAME]  (NAME: default the node of DIR/node.kubeconfig; another name
# gets its kubeconfig from node-kubeconfig.sh)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: smoke.sh DIR [NAME]" >&2; exit 2; }
[ -f "$1/cluster.env" ] || { echo "smoke.sh: $1 holds no cluster made by up.sh" >&2; exit 2; }
# shellcheck disable=SC1091
. "$1/cluster.env"
dir="$AKL_CLUSTER_DIR"
name="${2:-$AKL_CLUSTER_NODE_NAME}"
if [ "$name" = "$AKL_CLUSTER_NODE_NAME" ]; then
    node_kc="$dir/node.kubeconfig"
else
    node_kc="$("$here/node-kubeconfig.sh" "$dir" "$name")"
fi
other="smoke-other-$RANDOM"
pod="smoke-bound-$RANDOM"
elsewhere="smoke-elsewhere-$RANDOM"
unbound="smoke-unbound-$RANDOM"

admin() { "$AKL_CLUSTER_BIN/kubectl" --kubeconfig "$dir/admin.kubeconfig" "$@"; }
node() { "$AKL_CLUSTER_BIN/kubectl" --kubeconfig "$node_kc" "$@"; }
json() { python3 -c "import json, sys; d = json.load(sys.stdin); print($1)"; }
now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
micro_now() { date -u +%Y-%m-%dT%H:%M:%S.%6NZ; }
piped() {
    local input="$1"
    shift
    printf '%s\n' "$input" | "$@"
}

failures=0
ok() { echo "ok    $*"; }
fail() { echo "FAIL  $*"; failures=$((failures + 1)); }
check() {
    local what="$1"
    shift
    if out="$("$@" 2>&1)"; then ok "$what"; else fail "$what: $out"; fi
}
refused() {
    local what="$1" out
    shift
    if out="$("$@" 2>&1)"; then
        fail "$what was allowed"
    elif grep -qi forbidden <<<"$out"; then
        ok "$what is forbidden"
    else
        fail "$what failed otherwise: $out"
    fi
}
until_true() {
    local deadline=$(($(date +%s) + 60))
    until "$@"; do
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.5
    done
}

cleanup() {
    # No kubelet confirms these pods' end: they are removed at once.
    admin delete pod --namespace default --ignore-not-found --grace-period=0 --force \
        "$pod" "$elsewhere" "$unbound" >/dev/null 2>&1 || true
    admin delete lease --namespace kube-node-lease --ignore-not-found "$name" "$other" >/dev/null 2>&1 || true
    admin delete node --ignore-not-found "$name" "$other" >/dev/null 2>&1 || true
}
trap cleanup EXIT

node_object() {
    cat <<EOF
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "$1", "labels": {"kubernetes.io/hostname": "$1", "kubernetes.io/os": "linux"}}}
EOF
}
status_fields() {
    local t
    t="$(now)"
    cat <<EOF
{
  "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
  "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
  "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                  "message": "smoke check", "lastHeartbeatTime": "$t", "lastTransitionTime": "$t"}],
  "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": "$name"}],
  "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "",
               "containerRuntimeVersion": "docker://20.10", "kubeletVersion": "v1.20.2",
               "kubeProxyVersion": "v1.20.2", "operatingSystem": "linux", "architecture": "amd64"}}
EOF
}
# The whole Node as read, with a new status: NodeRestriction refuses a status update that
# changes the spec (the controller manager taints a new node), and a stale read is a
# conflict, so a few tries.
report_status() {
    local body out
    for _ in 1 2 3 4 5; do
        body="$(node get node "$name" -o json | python3 -c '
import json, sys
node = json.load(sys.stdin)
node["status"] = json.loads(sys.argv[1])
print(json.dumps(node))' "$(status_fields)")"
        if out="$(piped "$body" node replace --raw "/api/v1/nodes/$name/status" -f - 2>&1)"; then
            return 0
        fi
        sleep 0.5
    done
    echo "$out"
    return 1
}
lease_object() {
    cat <<EOF
{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
 "metadata": {"name": "$1", "namespace": "kube-node-lease"},
 "spec": {"holderIdentity": "$1", "leaseDurationSeconds": 40, "renewTime": "$(micro_now)"}}
EOF
}
# pod_object NAME bound|for NODE: a pod bound to NODE, or one the scheduler is to place
# there (its node selector names NODE, as other nodes may be Ready at the same time).
pod_object() {
    local pod_name="$1" how="$2" node_name="$3" placement
    if [ "$how" = bound ]; then
        placement="\"nodeName\": \"$node_name\""
    else
        placement="\"nodeSelector\": {\"kubernetes.io/hostname\": \"$node_name\"}"
    fi
    cat <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$pod_name", "namespace": "default"},
 "spec": {$placement,
          "containers": [{"name": "c", "image": "busybox:1.29", "command": ["sleep", "3600"]}]}}
EOF
}
token_request() {
    cat <<EOF
{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
 "spec": {"audiences": ["https://kubernetes.default.svc.cluster.local"], "expirationSeconds": 3600,
          "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "$1", "uid": "$2"}}}
EOF
}

echo "cluster $AKL_CLUSTER_SERVER, node $name"
check "admin lists namespaces" admin get namespaces
check "admin lists nodes" admin get nodes

check "node registers Node $name" piped "$(node_object "$name")" node create -f -
check "node reports its status (Ready)" report_status
pod_cidr() { [ -n "$(admin get node "$name" -o jsonpath='{.spec.podCIDR}')" ]; }
if until_true pod_cidr; then
    ok "the controller manager gave $name spec.podCIDR $(admin get node "$name" -o jsonpath='{.spec.podCIDR}')"
else
    fail "no spec.podCIDR on $name"
fi
# Right after the status report: a node that reports no more turns NotReady (unreachable)
# after the node monitor grace period and takes no new pods.
check "admin creates unbound Pod $unbound for $name" piped "$(pod_object "$unbound" for "$name")" admin create -f -
scheduled() { [ "$(admin get pod --namespace default "$unbound" -o jsonpath='{.spec.nodeName}')" = "$name" ]; }
if until_true scheduled; then ok "the scheduler bound Pod $unbound to $name"; else fail "Pod $unbound not scheduled to $name"; fi
refused "node $name registering Node $other" piped "$(node_object "$other")" node create -f -

check "node creates Lease kube-node-lease/$name" piped "$(lease_object "$name")" node create -f -
before="$(admin get lease --namespace kube-node-lease "$name" -o jsonpath='{.spec.renewTime}')"
sleep 1
check "node renews its Lease" node patch lease --namespace kube-node-lease "$name" --type merge \
    -p "{\"spec\": {\"renewTime\": \"$(micro_now)\"}}"
after="$(admin get lease --namespace kube-node-lease "$name" -o jsonpath='{.spec.renewTime}')"
if [ "$before" != "$after" ]; then ok "renewTime moved ($before -> $after)"; else fail "renewTime unchanged ($before)"; fi
refused "node $name creating Lease $other" piped "$(lease_object "$other")" node create -f -

check "admin creates Pod $pod bound to $name" piped "$(pod_object "$pod" bound "$name")" admin create -f -
check "admin creates Pod $elsewhere bound to $other" piped "$(pod_object "$elsewhere" bound "$other")" admin create -f -
check "node reads Pod $pod" node get pod --namespace default "$pod"
uid="$(node get pod --namespace default "$pod" -o jsonpath='{.metadata.uid}')"
sa="$(node get pod --namespace default "$pod" -o jsonpath='{.spec.serviceAccountName}')"
status="$(node get pod --namespace default "$pod" -o json | json '
json.dumps({**d, "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
            "hostIP": "127.0.0.1"}})')"
check "node updates Pod $pod status" piped "$status" node replace --raw "/api/v1/namespaces/default/pods/$pod/status" -f -

token_json="$(token_request "$pod" "$uid" | node create --raw "/api/v1/namespaces/default/serviceaccounts/$sa/token" -f - 2>&1)" || true
token="$(json 'd["status"]["token"]' <<<"$token_json" 2>/dev/null || true)"
if [ -n "$token" ]; then ok "node gets a token for service account $sa bound to Pod $pod"; else fail "TokenRequest: $token_json"; fi
if [ -n "$token" ]; then
    review="$(printf '{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "%s"}}' "$token" \
        | admin create --raw /apis/authentication.k8s.io/v1/tokenreviews -f - 2>&1)" || true
    who="$(json 'd["status"]["user"]["username"] if d["status"].get("authenticated") else ""' <<<"$review" 2>/dev/null || true)"
    bound="$(json 'd["status"]["user"]["extra"]["authentication.kubernetes.io/pod-name"][0]' <<<"$review" 2>/dev/null || true)"
    if [ "$who" = "system:serviceaccount:default:$sa" ] && [ "$bound" = "$pod" ]; then
        ok "the API server accepts the token as $who for pod $bound"
    else
        fail "TokenReview: $review"
    fi
fi
other_uid="$(admin get pod --namespace default "$elsewhere" -o jsonpath='{.metadata.uid}')"
refused "node $name getting a token for Pod $elsewhere (bound to $other)" \
    piped "$(token_request "$elsewhere" "$other_uid")" node create --raw "/api/v1/namespaces/default/serviceaccounts/$sa/token" -f -


if [ "$failures" = 0 ]; then
    echo "all checks passed"
else
    echo "$failures check(s) failed"
    exit 1
fi
