#!/usr/bin/env bash
# Makes a CA and the certificates the tls component (deploy/k8s/components/tls) mounts, and the
# Secret granary-tls holding them, as a manifest to `kubectl apply -f`:
#
#   make-tls-secret.sh --out DIR [--namespace granary] [--workers 4] [--standbys 0]
#                      [--dispatchers 1] [--etcd-members 0]
#                      [--cluster-domain cluster.local] [--client operator]... [--days 365]
#
# Writes, under DIR:
#   ca.crt, ca.key            the cluster's CA (keep ca.key offline: it issues identities)
#   pods/<pod>.crt, .key      one per pod, named as the pod: granary-dispatcher-0..D-1,
#                             granary-worker-0..N-1, granary-worker-standby-0..M-1,
#                             granary-etcd-0..E-1 (components/etcd-tls)
#   clients/<name>.crt, .key  client certificates (trainers, `granary status`); `operator` is
#                             the --admin_clients the component configures
#   granary-tls.yaml          the Secret: ca.crt and every pod's certificate and key
#
# Identities follow SECURITY.md: a worker's certificate names it in the URI SAN
# granary://worker/<pod name> (its --worker_id) and carries the DNS name it registers
# (<pod>.granary-worker.<namespace>.svc.<domain>, the address trainers dial); the dispatcher's
# carries granary://dispatcher and the names workers and trainers dial (the granary-dispatcher
# Service's and, for a replicated dispatcher's redirects, its pod's under
# granary-dispatcher-headless) plus localhost (for `kubectl port-forward`); a client's
# granary://client/<name>; an etcd member's the names the dispatchers dial
# (granary-etcd-<k>.granary-etcd[.<namespace>[.svc[.<domain>]]]) and its peers' plus localhost.
# Certificates are ECDSA P-256, as the throwaway CA of `granary cluster` issues. Re-running with
# the same DIR reuses its CA and issues missing certificates only (so raising --workers later
# keeps the existing ones valid).
#
# For clusters that scale to many workers, cert-manager's csi-driver can issue each pod's
# certificate at mount time instead (deploy/README.md, "TLS").
set -euo pipefail

out="" namespace=granary workers=4 standbys=0 dispatchers=1 etcd_members=0 domain=cluster.local
days=365 clients=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --namespace) namespace=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --standbys) standbys=$2; shift 2 ;;
    --dispatchers) dispatchers=$2; shift 2 ;;
    --etcd-members) etcd_members=$2; shift 2 ;;
    --cluster-domain) domain=$2; shift 2 ;;
    --client) clients+=("$2"); shift 2 ;;
    --days) days=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "make-tls-secret.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$out" ]] || { echo "make-tls-secret.sh: --out DIR is required" >&2; exit 2; }
[[ "$workers" =~ ^[0-9]+$ && "$standbys" =~ ^[0-9]+$ && "$dispatchers" =~ ^[1-9][0-9]*$ &&
   "$etcd_members" =~ ^[0-9]+$ ]] ||
  { echo "make-tls-secret.sh: --workers, --standbys and --etcd-members take counts," \
      "--dispatchers a count of at least 1" >&2; exit 2; }
[[ ${#clients[@]} -gt 0 ]] || clients=(operator)
command -v openssl >/dev/null || { echo "make-tls-secret.sh: needs openssl" >&2; exit 1; }
kubectl=${KUBECTL:-kubectl}
command -v "$kubectl" >/dev/null || { echo "make-tls-secret.sh: needs kubectl" >&2; exit 1; }

mkdir -p "$out/pods" "$out/clients"
umask 077

if [[ ! -f "$out/ca.crt" ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$out/ca.key" \
    -out "$out/ca.crt" -days "$days" -subj "/CN=granary CA ($namespace)" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null
fi

# issue DIR NAME SAN: a key and a certificate DIR/NAME.{key,crt} with subjectAltName SAN.
issue() {
  local dir=$1 name=$2 san=$3
  [[ -f "$dir/$name.crt" ]] && return 0
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' \
    "$san" > "$dir/$name.ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/$name.key" \
    -out "$dir/$name.csr" -subj "/CN=$name" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" \
    -CAcreateserial -out "$dir/$name.crt" -days "$days" -extfile "$dir/$name.ext" 2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
}

service=granary-dispatcher
for ((k = 0; k < dispatchers; k++)); do
  pod=granary-dispatcher-$k
  issue "$out/pods" "$pod" \
    "URI:granary://dispatcher,DNS:$service,DNS:$service.$namespace,DNS:$service.$namespace.svc,DNS:$service.$namespace.svc.$domain,DNS:$pod.$service-headless.$namespace.svc.$domain,DNS:localhost,IP:127.0.0.1"
done
for ((k = 0; k < workers; k++)); do
  pod=granary-worker-$k
  issue "$out/pods" "$pod" "URI:granary://worker/$pod,DNS:$pod.granary-worker.$namespace.svc.$domain"
done
for ((k = 0; k < standbys; k++)); do
  pod=granary-worker-standby-$k
  issue "$out/pods" "$pod" "URI:granary://worker/$pod,DNS:$pod.granary-worker.$namespace.svc.$domain"
done
for ((k = 0; k < etcd_members; k++)); do
  pod=granary-etcd-$k
  issue "$out/pods" "$pod" \
    "DNS:$pod.granary-etcd,DNS:$pod.granary-etcd.$namespace,DNS:$pod.granary-etcd.$namespace.svc,DNS:$pod.granary-etcd.$namespace.svc.$domain,DNS:localhost,IP:127.0.0.1"
done
for name in "${clients[@]}"; do
  issue "$out/clients" "$name" "URI:granary://client/$name"
done
cp "$out/ca.crt" "$out/pods/ca.crt"

# The Secret as a manifest (no cluster needed: --dry-run=client).
"$kubectl" create secret generic granary-tls --namespace "$namespace" --from-file="$out/pods" \
  --dry-run=client -o yaml > "$out/granary-tls.yaml"
certs=("$out"/pods/*.crt)
echo "make-tls-secret.sh: ${#certs[@]} certificates (CA included) in $out/pods;" \
  "apply the Secret with: kubectl apply -f $out/granary-tls.yaml"
