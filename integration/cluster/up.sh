#!/usr/bin/env bash
# Start a single-machine Kubernetes control plane with its state in DIR: etcd, the API
# server (secure port only, on 127.0.0.1, certificates made for this run, Node and RBAC
# authorization with NodeRestriction admission), the controller manager (node CIDR
# allocation, service-account tokens, CSR signing by the run's CA) and the scheduler. Wait
# until they answer, then write DIR/admin.kubeconfig and DIR/node.kubeconfig and print the
# API server's URL. Nothing listens beyond loopback; no node runs: agents join with
# node.kubeconfig (or one from node-kubeconfig.sh for another name).
#
# Usage: up.sh DIR. DIR is created when missing and must not hold a running cluster.
# On failure, what was started and made is removed again (down.sh DIR).
#
# Environment:
#   NODE_NAME                  the identity in node.kubeconfig (default: hostname, lowercased)
#   AKL_CLUSTER_BIN            directory with the Kubernetes programs (default: build.sh's)
#   AKL_ETCD                   the etcd program (default: etcd on PATH, Debian's etcd-server)
#   AKL_CLUSTER_APISERVER_PORT, AKL_CLUSTER_ETCD_PORT, AKL_CLUSTER_ETCD_PEER_PORT,
#   AKL_CLUSTER_CONTROLLER_MANAGER_PORT, AKL_CLUSTER_SCHEDULER_PORT
#                              loopback ports (default: free ones picked at start)
#   AKL_CLUSTER_SERVICE_CIDR   service cluster IP range (default 10.0.0.0/24; the API
#                              server's service IP is its first address)
#   AKL_CLUSTER_CLUSTER_CIDR   pod range that nodes' spec.podCIDR come from (default
#                              10.244.0.0/16, a /24 per node)
#   AKL_CLUSTER_NODE_MONITOR_GRACE_PERIOD  time without a heartbeat before a node turns
#                              NotReady/Unknown (default 40s)
#   AKL_CLUSTER_LOG_LEVEL      --v of the Kubernetes programs (default 1)
#   AKL_CLUSTER_TIMEOUT        seconds to wait for readiness (default 180)
#   AKL_CLUSTER_AUDIT          1: the API server writes an audit log, DIR/logs/audit.log,
#                              one JSON line per request at level Metadata (user, verb,
#                              resource, user agent, times), for counting a node's requests
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"

log() { echo "up.sh: [${SECONDS}s] $*" >&2; }
die() { log "$*"; exit 1; }

[ $# = 1 ] && [ -n "$1" ] || die "usage: up.sh DIR"
node_name="${NODE_NAME:-$(default_node_name)}"
valid_node_name "$node_name" || die "NODE_NAME '$node_name' is not a valid node name (a lowercase DNS-1123 subdomain)"
service_cidr="${AKL_CLUSTER_SERVICE_CIDR:-10.0.0.0/24}"
cluster_cidr="${AKL_CLUSTER_CLUSTER_CIDR:-10.244.0.0/16}"
grace="${AKL_CLUSTER_NODE_MONITOR_GRACE_PERIOD:-40s}"
verbosity="${AKL_CLUSTER_LOG_LEVEL:-1}"
timeout="${AKL_CLUSTER_TIMEOUT:-180}"

ipv4_re='^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})/([0-9]{1,2})$'
[[ "$service_cidr" =~ $ipv4_re ]] || die "AKL_CLUSTER_SERVICE_CIDR '$service_cidr' is not an IPv4 CIDR"
service_ip="${BASH_REMATCH[1]}.${BASH_REMATCH[2]}.${BASH_REMATCH[3]}.$((BASH_REMATCH[4] + 1))"
[[ "$cluster_cidr" =~ $ipv4_re ]] || die "AKL_CLUSTER_CLUSTER_CIDR '$cluster_cidr' is not an IPv4 CIDR"
[[ "$grace" =~ ^[0-9]+(ms|s|m|h)$ ]] || die "AKL_CLUSTER_NODE_MONITOR_GRACE_PERIOD '$grace' is not a duration such as 40s"
[[ "$timeout" =~ ^[0-9]+$ ]] || die "AKL_CLUSTER_TIMEOUT '$timeout' is not a number of seconds"

bin="${AKL_CLUSTER_BIN:-}"
if [ -z "$bin" ]; then
    bin="$("$here/build.sh" | tail -n 1)"
fi
for p in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [ -x "$bin/$p" ] || die "$bin/$p is missing (run build.sh, or set AKL_CLUSTER_BIN)"
done
etcd="${AKL_ETCD:-$(command -v etcd || true)}"
[ -n "$etcd" ] && [ -x "$etcd" ] || die "no etcd program (install etcd-server, or set AKL_ETCD)"
command -v openssl >/dev/null || die "openssl is missing"
command -v curl >/dev/null || die "curl is missing"

created=""
if [ ! -d "$1" ]; then
    mkdir -p "$1"
    created=1
fi
dir="$(cd "$1" && pwd -P)"
if [ -e "$dir/.akl-cluster" ]; then
    for name in "${cluster_processes[@]}"; do
        if cluster_pid "$dir" "$name" >/dev/null; then
            die "$dir holds a running cluster ($name); run down.sh $dir first"
        fi
    done
    die "$dir holds a stopped cluster's state; run down.sh $dir first"
fi
for f in "${cluster_made[@]}"; do
    [ ! -e "$dir/$f" ] || die "$dir/$f exists; up.sh makes it (use an empty directory)"
done

started=""
finish() {
    local rc=$?
    if [ -z "$started" ]; then
        log "failed; stopping and removing what was started"
        # The logs of what has exited, or of everything started when all still run.
        local name shown=""
        for pass in exited all; do
            for name in "${cluster_processes[@]}"; do
                [ -f "$dir/run/$name.pid" ] && [ -f "$dir/logs/$name.log" ] || continue
                if [ "$pass" = exited ] && cluster_pid "$dir" "$name" >/dev/null; then continue; fi
                echo "--- last lines of $dir/logs/$name.log" >&2
                tail -n 15 "$dir/logs/$name.log" >&2
                shown=1
            done
            [ -z "$shown" ] || break
        done
        "$here/down.sh" "$dir" >&2 || true
        [ "$rc" != 0 ] || rc=1
    fi
    exit "$rc"
}
printf 'created_dir=%s\n' "${created:-0}" >"$dir/.akl-cluster"
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$dir/pki" "$dir/logs" "$dir/run" "$dir/nodes"
chmod 700 "$dir/pki"

# Ports: given ones, else random unused ones below the ephemeral range.
chosen=" "
in_use() { [ -n "$(ss -Htan "( sport = :$1 )" 2>/dev/null)" ]; }
pick_port() {
    local var="$1" given="${!1:-}" p
    if [ -n "$given" ]; then
        [[ "$given" =~ ^[0-9]+$ ]] && [ "$given" -gt 0 ] && [ "$given" -lt 65536 ] \
            || die "$var '$given' is not a port number"
        [[ "$chosen" != *" $given "* ]] || die "$var $given is given to another component too"
        in_use "$given" && die "$var $given is in use on this machine"
        echo "$given"
        return
    fi
    for _ in $(seq 200); do
        p=$((20000 + RANDOM % 12000))
        [[ "$chosen" == *" $p "* ]] && continue
        in_use "$p" && continue
        echo "$p"
        return
    done
    die "no free loopback port found"
}
# pick_port runs in a subshell ($(...)): what it picked is noted here.
etcd_port="$(pick_port AKL_CLUSTER_ETCD_PORT)"; chosen+="$etcd_port "
etcd_peer_port="$(pick_port AKL_CLUSTER_ETCD_PEER_PORT)"; chosen+="$etcd_peer_port "
api_port="$(pick_port AKL_CLUSTER_APISERVER_PORT)"; chosen+="$api_port "
cm_port="$(pick_port AKL_CLUSTER_CONTROLLER_MANAGER_PORT)"; chosen+="$cm_port "
sched_port="$(pick_port AKL_CLUSTER_SCHEDULER_PORT)"; chosen+="$sched_port "
server="https://127.0.0.1:$api_port"
etcd_url="http://127.0.0.1:$etcd_port"

{
    printf 'AKL_CLUSTER_DIR=%q\n' "$dir"
    printf 'AKL_CLUSTER_SERVER=%q\n' "$server"
    printf 'AKL_CLUSTER_API_PORT=%q\n' "$api_port"
    printf 'AKL_CLUSTER_ETCD=%q\n' "$etcd_url"
    printf 'AKL_CLUSTER_CONTROLLER_MANAGER_PORT=%q\n' "$cm_port"
    printf 'AKL_CLUSTER_SCHEDULER_PORT=%q\n' "$sched_port"
    printf 'AKL_CLUSTER_SERVICE_CIDR=%q\n' "$service_cidr"
    printf 'AKL_CLUSTER_SERVICE_IP=%q\n' "$service_ip"
    printf 'AKL_CLUSTER_CLUSTER_CIDR=%q\n' "$cluster_cidr"
    printf 'AKL_CLUSTER_NODE_NAME=%q\n' "$node_name"
    printf 'AKL_CLUSTER_BIN=%q\n' "$bin"
    printf 'AKL_CLUSTER_CA=%q\n' "$dir/pki/ca.crt"
    printf 'AKL_CLUSTER_ADMIN_KUBECONFIG=%q\n' "$dir/admin.kubeconfig"
    printf 'AKL_CLUSTER_NODE_KUBECONFIG=%q\n' "$dir/node.kubeconfig"
} >"$dir/cluster.env"

t0="$(date +%s.%N)"
log "certificates in $dir/pki"
pki="$dir/pki"
make_ca "$pki" ca asynckubelet-test-cluster-ca
# The aggregation layer's request-header identity has a CA of its own, as kubeadm sets it up.
make_ca "$pki" front-proxy-ca asynckubelet-test-front-proxy-ca
signing_ca=front-proxy-ca make_cert "$pki" front-proxy-client /CN=front-proxy-client client
make_cert "$pki" apiserver /CN=kube-apiserver server \
    "IP:127.0.0.1, IP:$service_ip, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local"
make_cert "$pki" apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" client
make_cert "$pki" admin "/O=system:masters/CN=kubernetes-admin" client
make_cert "$pki" kube-controller-manager /CN=system:kube-controller-manager client
make_cert "$pki" kube-scheduler /CN=system:kube-scheduler client
(umask 077 && openssl genpkey -quiet -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key")
openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

write_kubeconfig "$dir/admin.kubeconfig" "$server" "$pki/ca.crt" kubernetes-admin "$pki/admin.crt" "$pki/admin.key"
write_kubeconfig "$pki/kube-controller-manager.kubeconfig" "$server" "$pki/ca.crt" \
    system:kube-controller-manager "$pki/kube-controller-manager.crt" "$pki/kube-controller-manager.key"
write_kubeconfig "$pki/kube-scheduler.kubeconfig" "$server" "$pki/ca.crt" \
    system:kube-scheduler "$pki/kube-scheduler.crt" "$pki/kube-scheduler.key"
node_kubeconfig "$dir" "$node_name" "$dir/nodes/$node_name.kubeconfig"
cp -p "$dir/nodes/$node_name.kubeconfig" "$dir/node.kubeconfig"

start() { start_process "$dir" "$@"; }

# wait_for NAME DESCRIPTION COMMAND...: until COMMAND succeeds, while NAME's process lives.
wait_for() {
    local name="$1" what="$2" deadline
    shift 2
    deadline=$(($(date +%s) + timeout))
    until "$@" >/dev/null 2>&1; do
        cluster_pid "$dir" "$name" >/dev/null || die "$name exited while waiting for $what"
        [ "$(date +%s)" -lt "$deadline" ] || die "timed out after ${timeout}s waiting for $what"
        sleep 0.2
    done
}

mkdir -p "$dir/etcd"
chmod 700 "$dir/etcd"
log "etcd on $etcd_url"
start etcd "$etcd" --name akl --data-dir "$dir/etcd" \
    --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "akl=http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster-state new --initial-cluster-token "akl-$api_port"
wait_for etcd "etcd's /health" curl -fsS "$etcd_url/health"

audit_flags=()
if [ "${AKL_CLUSTER_AUDIT:-0}" = 1 ]; then
    printf '%s\n' "apiVersion: audit.k8s.io/v1" "kind: Policy" \
        "omitStages: [RequestReceived]" "rules:" "- level: Metadata" >"$dir/run/audit-policy.yaml"
    audit_flags=(--audit-policy-file="$dir/run/audit-policy.yaml" --audit-log-path="$dir/logs/audit.log")
fi

log "kube-apiserver on $server"
# The API server listens on loopback only, so it has no address a Service endpoint may
# name (the API rejects loopback endpoints): the `kubernetes` Service keeps no endpoints.
start kube-apiserver "$bin/kube-apiserver" \
    --v="$verbosity" \
    --etcd-servers="$etcd_url" \
    --bind-address=127.0.0.1 --secure-port="$api_port" \
    --endpoint-reconciler-type=none \
    --cert-dir="$dir/run/kube-apiserver" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --requestheader-client-ca-file="$pki/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$pki/front-proxy-client.crt" \
    --proxy-client-key-file="$pki/front-proxy-client.key" \
    --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction \
    --allow-privileged=true \
    --service-cluster-ip-range="$service_cidr" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-signing-key-file="$pki/sa.key" \
    --service-account-key-file="$pki/sa.pub" \
    "${audit_flags[@]}"
admin_curl() {
    curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$server$1"
}
wait_for kube-apiserver "the API server's /readyz" admin_curl /readyz

log "kube-controller-manager on 127.0.0.1:$cm_port, kube-scheduler on 127.0.0.1:$sched_port"
start kube-controller-manager "$bin/kube-controller-manager" \
    --v="$verbosity" \
    --kubeconfig="$pki/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$pki/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="$pki/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$cm_port" --port=0 \
    --cert-dir="$dir/run/kube-controller-manager" \
    --leader-elect=false \
    --use-service-account-credentials \
    --root-ca-file="$pki/ca.crt" \
    --service-account-private-key-file="$pki/sa.key" \
    --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
    --allocate-node-cidrs --cluster-cidr="$cluster_cidr" \
    --service-cluster-ip-range="$service_cidr" \
    --node-monitor-grace-period="$grace"
start kube-scheduler "$bin/kube-scheduler" \
    --v="$verbosity" \
    --kubeconfig="$pki/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$pki/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$pki/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$sched_port" --port=0 \
    --cert-dir="$dir/run/kube-scheduler" \
    --leader-elect=false
wait_for kube-controller-manager "the controller manager's /healthz" \
    curl -fsSk "https://127.0.0.1:$cm_port/healthz"
wait_for kube-scheduler "the scheduler's /healthz" curl -fsSk "https://127.0.0.1:$sched_port/healthz"

log "control plane answers; waiting for the default service account"
kubectl_admin() { "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" "$@"; }
wait_for kube-apiserver "kubectl get namespaces" kubectl_admin get namespaces
# Pods are admitted once their service account has its token secret.
default_sa_token() {
    [ -n "$(kubectl_admin get serviceaccount default --namespace default -o jsonpath='{.secrets[0].name}')" ]
}
wait_for kube-controller-manager "the default service account and its token" default_sa_token

for name in "${cluster_processes[@]}"; do
    cluster_pid "$dir" "$name" >/dev/null || die "$name is not running"
done
started=1
t1="$(date +%s.%N)"
log "ready in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')s"
cat <<EOF
API server:        $server (CA $pki/ca.crt)
admin kubeconfig:  $dir/admin.kubeconfig
node kubeconfig:   $dir/node.kubeconfig (system:node:$node_name)
more nodes:        $here/node-kubeconfig.sh $dir NAME
service CIDR:      $service_cidr (API service IP $service_ip), pod CIDR $cluster_cidr
kubectl:           $bin/kubectl --kubeconfig $dir/admin.kubeconfig get nodes
environment:       . $dir/cluster.env
stop:              $here/down.sh $dir
EOF
