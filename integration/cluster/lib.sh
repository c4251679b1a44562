# shellcheck shell=bash disable=SC2034
# Shared by up.sh, down.sh and node-kubeconfig.sh (sourced, not run): the layout of a
# cluster directory, certificates signed by its CA, kubeconfig files, process checks.
#
# DIR/.akl-cluster       marks a directory up.sh made a cluster in (down.sh needs it)
# DIR/cluster.env        shell assignments: server URL, ports, node name, binaries
# DIR/admin.kubeconfig   system:masters
# DIR/node.kubeconfig    system:node:$NODE_NAME in system:nodes
# DIR/nodes/NAME.kubeconfig  more node identities (node-kubeconfig.sh)
# DIR/pki/               CA, serving and client certificates, service-account keys
# DIR/etcd/ DIR/logs/ DIR/run/   etcd data, process logs, pid files

cluster_made=(.akl-cluster cluster.env admin.kubeconfig node.kubeconfig nodes pki etcd logs run)
cluster_processes=(etcd kube-apiserver kube-controller-manager kube-scheduler)

# DNS-1123 subdomain, as the API server validates a Node's name.
valid_node_name() {
    local name="$1" label='[a-z0-9]([-a-z0-9]*[a-z0-9])?'
    [ "${#name}" -le 253 ] && [[ "$name" =~ ^$label(\.$label)*$ ]]
}

default_node_name() {
    hostname | tr '[:upper:]' '[:lower:]'
}

# ECDSA P-256 keys, as the kubelet makes for itself: made at once, where RSA key generation
# takes seconds on a busy machine. (The service-account key stays RSA, for RS256 tokens.)
new_key() {
    (umask 077 && openssl genpkey -quiet -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1")
}

# make_ca DIR/pki NAME CN: a self-signed CA, NAME.key and NAME.crt.
make_ca() {
    local pki="$1" name="$2" cn="$3" cnf
    cnf="$(mktemp "$pki/.ca.XXXXXX")"
    printf '%s\n' "[req]" "distinguished_name = dn" "x509_extensions = ca" "prompt = no" \
        "[dn]" "CN = $cn" \
        "[ca]" "basicConstraints = critical, CA:TRUE" \
        "keyUsage = critical, keyCertSign, cRLSign, digitalSignature" \
        "subjectKeyIdentifier = hash" >"$cnf"
    new_key "$pki/$name.key"
    openssl req -x509 -new -config "$cnf" -key "$pki/$name.key" -days 3650 -sha256 -out "$pki/$name.crt"
    rm -f "$cnf"
}

# make_cert DIR/pki NAME SUBJECT PROFILE [SAN]: a new key and a certificate signed
# by the directory's CA (the one named by $signing_ca, default ca). PROFILE: client or server.
make_cert() {
    local pki="$1" name="$2" subject="$3" profile="$4" san="${5:-}" ext ca="${signing_ca:-ca}"
    ext="$(mktemp "$pki/.ext.XXXXXX")"
    {
        echo "basicConstraints = critical, CA:FALSE"
        echo "subjectKeyIdentifier = hash"
        echo "authorityKeyIdentifier = keyid"
        echo "keyUsage = critical, digitalSignature"
        if [ "$profile" = server ]; then
            echo "extendedKeyUsage = serverAuth"
            echo "subjectAltName = $san"
        else
            echo "extendedKeyUsage = clientAuth"
        fi
    } >"$ext"
    new_key "$pki/$name.key"
    openssl req -new -key "$pki/$name.key" -subj "$subject" -out "$pki/$name.csr" 2>/dev/null
    openssl x509 -req -in "$pki/$name.csr" -CA "$pki/$ca.crt" -CAkey "$pki/$ca.key" \
        -set_serial "0x$(openssl rand -hex 16)" -days 3650 -sha256 -extfile "$ext" \
        -out "$pki/$name.crt" 2>/dev/null
    rm -f "$pki/$name.csr" "$ext"
}

# write_kubeconfig OUT SERVER CA USER CERT KEY: a self-contained kubeconfig (data embedded).
write_kubeconfig() {
    local out="$1" server="$2" ca="$3" user="$4" cert="$5" key="$6" tmp
    tmp="$(mktemp "$out.XXXXXX")"
    cat >"$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: asynckubelet-test
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 "$ca")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 "$cert")
    client-key-data: $(base64 -w0 "$key")
contexts:
- name: $user@asynckubelet-test
  context:
    cluster: asynckubelet-test
    user: $user
current-context: $user@asynckubelet-test
EOF
    chmod 600 "$tmp"
    mv "$tmp" "$out"
}

# node_kubeconfig DIR NAME OUT: a client certificate for system:node:NAME (group
# system:nodes, what the Node authorizer and NodeRestriction expect) and its kubeconfig.
node_kubeconfig() {
    local dir="$1" name="$2" out="$3" server
    # shellcheck disable=SC1091
    server="$(. "$dir/cluster.env" && echo "$AKL_CLUSTER_SERVER")"
    mkdir -p "$dir/pki/nodes"
    make_cert "$dir/pki" "nodes/$name" "/O=system:nodes/CN=system:node:$name" client
    write_kubeconfig "$out" "$server" "$dir/pki/ca.crt" "system:node:$name" \
        "$dir/pki/nodes/$name.crt" "$dir/pki/nodes/$name.key"
}

# alive PID: the process runs (it exists and is not a zombie).
alive() {
    local state
    state="$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null)" || return 1
    [ -n "$state" ] && [ "$state" != Z ]
}

# The pid in DIR/run/NAME.pid when that process is alive, is not a zombie and was started
# for DIR (its command line names files in DIR); nothing otherwise.
cluster_pid() {
    local dir="$1" name="$2" pid
    [ -f "$dir/run/$name.pid" ] || return 1
    pid="$(cat "$dir/run/$name.pid")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    alive "$pid" || return 1
    grep -qzF -- "$dir/" "/proc/$pid/cmdline" 2>/dev/null || return 1
    echo "$pid"
}

# start_process DIR NAME PROGRAM [ARG...]: PROGRAM in a session of its own (it outlives the
# script and is not hit by a terminal's Ctrl-C), its output in DIR/logs/NAME.log, its pid in
# DIR/run/NAME.pid. The pid is recorded once the child runs PROGRAM itself: before, it is
# this shell and then setsid (whose command line names DIR/ too), and while setsid execs
# PROGRAM, /proc/PID/cmdline reads empty, which cluster_pid must never be shown.
start_process() {
    local dir="$1" name="$2" pid tries=0 program
    shift 2
    program="$(readlink -f "$1")"
    setsid "$@" </dev/null >"$dir/logs/$name.log" 2>&1 &
    pid="$!"
    until [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$program" ] &&
        grep -qzF -- "$dir/" "/proc/$pid/cmdline" 2>/dev/null; do
        alive "$pid" || break
        tries=$((tries + 1))
        [ "$tries" -lt 1000 ] || break
        sleep 0.01
    done
    echo "$pid" >"$dir/run/$name.pid"
}
