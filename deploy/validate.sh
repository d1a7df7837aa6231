#!/usr/bin/env bash
# Renders every kustomization under deploy/k8s and validates the result without a cluster:
#
#   deploy/validate.sh [OUT_DIR]        (default: a new temporary directory)
#
# Writes OUT_DIR/<name>.yaml for the base, each overlay and the smoke test, and the TLS Secrets
# of the small-tls and ha-tls overlays under OUT_DIR/tls/ and OUT_DIR/ha-tls-secret/; prints what it checked; exits non-zero on any
# failure. Run by ctest as `deploy_validate` (tests/CMakeLists.txt).
#
# What runs here, offline:
#   1. `kubectl kustomize` renders each kustomization (kustomize parses every file, resolves
#      bases, components, patches, generators and image overrides: a patch whose target is
#      gone fails here);
#   2. kubectl decodes every rendered object into its typed API objects, offline
#      (`kubectl set env --local --list`): unknown kinds and mistyped values fail. (`kubectl
#      apply --dry-run=client` and `--validate` need an API server: no cluster here);
#   3. make-tls-secret.sh issues the small-tls and ha-tls overlays' certificates; openssl
#      verifies their chains, identities (SANs) and keys;
#   4. deploy/validate_manifests.py checks every object against the Kubernetes API models of
#      python3-kubernetes (field names too) and the deployment's own rules (flags, probes,
#      volumes, RBAC, ...; its docstring lists them), and that the TLS Secret holds every file
#      a pod's flags name;
#   5. each patches/replicas/images/generator/labels entry of every kustomization changes the
#      output (kustomize silently skips a patch whose target matches nothing);
#   6. deploy/validate_kubeflow.py checks the Kubeflow Pipelines files of deploy/kubeflow: the
#      component YAMLs (KFP's component spec; `granary precache`/`run` with only flags those
#      commands accept, tools/commands.cc) and the example pipeline's IR (its steps are those
#      components, training runs after precache with the same pipeline, seed and policy).
# overlays/small-redis (components/redis) puts the cache in the in-memory Redis tier (issue 20).
# overlays/ha runs a replicated dispatcher: 3 replicas journaling to the 3-member etcd of
# components/etcd (issue 32); overlays/ha-tls adds mutual TLS, to etcd and between its members
# too (components/tls, components/etcd-tls).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s="$root/deploy/k8s"
out=${1:-$(mktemp -d "${TMPDIR:-/tmp}/granary-deploy.XXXXXX")}
kubectl=${KUBECTL:-kubectl}
python=${PYTHON:-/usr/bin/python3}
mkdir -p "$out"

fail() { echo "deploy/validate.sh: FAIL: $*" >&2; exit 1; }

# --- tools ------------------------------------------------------------------------------
command -v "$kubectl" >/dev/null || fail "no kubectl (scripts/setup_deps.sh installs one)"
command -v openssl >/dev/null || fail "no openssl (scripts/setup_deps.sh installs it)"
"$python" -c 'import yaml, kubernetes' 2>/dev/null ||
  fail "$python lacks python3-yaml or python3-kubernetes (scripts/setup_deps.sh installs them)"
# kustomize as kubectl >= 1.21 embeds it (v4+): `resources` naming directories, `patches`,
# `replicas`, `labels`, components. Debian 12's own kubernetes-client (1.20, kustomize v2.0.3)
# reads none of these.
client=$("$kubectl" version --client -o json 2>/dev/null |
  "$python" -c 'import json,sys; v=json.load(sys.stdin)["clientVersion"]; print(v["major"], v["minor"].rstrip("+"), v["gitVersion"])') ||
  fail "cannot read '$kubectl version --client'"
read -r major minor git_version <<< "$client"
if (( major < 1 || (major == 1 && minor < 21) )); then
  # Exit 77: ctest reports the test as skipped (SKIP_RETURN_CODE), visibly, rather than passed.
  echo "deploy/validate.sh: SKIPPED, the deployment was NOT validated: kubectl $git_version embeds a kustomize too old for these kustomizations; kubectl 1.21 or newer is needed (set KUBECTL=/path/to/kubectl)" >&2
  exit 77
fi
echo "== tools: kubectl $git_version (kustomize $("$kubectl" version --client -o json | "$python" -c 'import json,sys; print(json.load(sys.stdin).get("kustomizeVersion","?"))')), $("$python" -c 'import kubernetes; print("python3-kubernetes", kubernetes.__version__)'), $(openssl version | cut -d' ' -f1-2)"

# --- 1. render ----------------------------------------------------------------------------
declare -A dirs=(
  [base]="$k8s/base"
  [small]="$k8s/overlays/small"
  [large]="$k8s/overlays/large"
  [small-tls]="$k8s/overlays/small-tls"
  [small-redis]="$k8s/overlays/small-redis"
  [ha]="$k8s/overlays/ha"
  [ha-tls]="$k8s/overlays/ha-tls"
  [smoke-test]="$k8s/smoke-test"
)
names=(base small large small-tls small-redis ha ha-tls smoke-test)
# Every kustomization is rendered: a new one must be added above.
while IFS= read -r kfile; do
  dir=$(dirname "$kfile")
  grep -q '^kind: Component' "$kfile" && continue
  found=0
  for n in "${names[@]}"; do [[ "${dirs[$n]}" == "$dir" ]] && found=1; done
  [[ $found == 1 ]] || fail "$dir is a kustomization validate.sh does not render: add it to its list"
done < <(find "$k8s" -name kustomization.yaml | sort)

echo "== 1. kubectl kustomize → $out"
for n in "${names[@]}"; do
  if ! "$kubectl" kustomize "${dirs[$n]}" > "$out/$n.yaml" 2> "$out/$n.stderr"; then
    cat "$out/$n.stderr" >&2
    fail "kubectl kustomize ${dirs[$n]#$root/}"
  fi
  # kustomize warns (deprecated fields, ...) on stderr: none is accepted.
  [[ ! -s "$out/$n.stderr" ]] || { cat "$out/$n.stderr" >&2; fail "kubectl kustomize ${dirs[$n]#$root/} warned"; }
  rm -f "$out/$n.stderr"
  printf '  %-11s %3d objects: %s\n' "$n" "$(grep -c '^kind:' "$out/$n.yaml")" \
    "$(grep '^kind:' "$out/$n.yaml" | sort | uniq -c | awk '{printf "%s%s %s", sep, $1, $3; sep=", "}')"
done

# --- 2. kubectl's own decoding, offline ------------------------------------------------------
# `kubectl apply/create --dry-run=client` and `--validate` need an API server (the REST mapping,
# the OpenAPI schema). What kubectl does offline is decode manifests into its own typed objects
# (the API of its release): `kubectl set env --local -f FILE --list` does that for every document
# and fails on an unknown apiVersion/kind or a value of the wrong type (it ignores unknown
# field names; the checker below does not).
echo "== 2. kubectl set env --local: every object decodes into kubectl $git_version's API types"
for n in "${names[@]}"; do
  "$kubectl" set env --local -f "$out/$n.yaml" --list > /dev/null 2> "$out/$n.stderr" ||
    { cat "$out/$n.stderr" >&2; fail "kubectl cannot decode $out/$n.yaml"; }
  rm -f "$out/$n.stderr"
done
echo "  ${#names[@]} renders decoded"

# --- 3. TLS certificates of small-tls and ha-tls (before the checker, which reads the Secrets) --
echo "== 3. make-tls-secret.sh for overlays/small-tls and ha-tls (certificates checked with openssl)"
# verify_pod DIR POD: POD's certificate in DIR/pods chains to DIR's CA, names what POD must be
# reached and identified by, and has its key beside it.
verify_pod() {
  local dir=$1 pod=$2 san want w
  openssl verify -CAfile "$dir/ca.crt" "$dir/pods/$pod.crt" > /dev/null ||
    fail "$pod.crt does not verify against the CA"
  san=$(openssl x509 -in "$dir/pods/$pod.crt" -noout -ext subjectAltName)
  case "$pod" in
    granary-dispatcher-*) want="URI:granary://dispatcher DNS:granary-dispatcher.granary.svc.cluster.local DNS:$pod.granary-dispatcher-headless.granary.svc.cluster.local DNS:localhost" ;;
    granary-etcd-*) want="DNS:$pod.granary-etcd DNS:$pod.granary-etcd.granary.svc.cluster.local" ;;
    *) want="URI:granary://worker/$pod DNS:$pod.granary-worker.granary.svc.cluster.local" ;;
  esac
  for w in $want; do
    grep -q -- "$w\(,\|$\)" <<< "$san" || fail "$pod.crt lacks $w (has: $san)"
  done
  # The key is the certificate's.
  [[ "$(openssl x509 -in "$dir/pods/$pod.crt" -noout -pubkey)" == "$(openssl pkey -in "$dir/pods/$pod.key" -pubout)" ]] ||
    fail "$pod.key is not the key of $pod.crt"
}
tls="$out/tls"
rm -rf "$tls"
max_workers=$(sed -n 's/^ *--max_workers=\([0-9]*\)$/\1/p' "$out/small-tls.yaml" | tail -n 1)
[[ -n "$max_workers" ]] || fail "no --max_workers in the small-tls render"
"$k8s/components/tls/make-tls-secret.sh" --out "$tls" --namespace granary --workers "$max_workers" \
  --standbys 0 > /dev/null
for pod in granary-dispatcher-0 granary-worker-0 "granary-worker-$((max_workers - 1))"; do
  verify_pod "$tls" "$pod"
done
san=$(openssl x509 -in "$tls/clients/operator.crt" -noout -ext subjectAltName)
grep -q "URI:granary://client/operator" <<< "$san" || fail "operator.crt lacks URI:granary://client/operator"
certs=("$tls"/pods/*.crt)
echo "  small-tls: ${#certs[@]} certificates for $max_workers workers + the dispatcher + the CA; chains, SANs and keys verified"
# ha-tls: 3 dispatcher replicas, the ha overlay's workers (a replica count: no provisioner) and
# the 3 etcd members, as its kustomization.yaml says to make them.
ha_tls="$out/ha-tls-secret"
rm -rf "$ha_tls"
ha_workers=$("$python" -c 'import sys, yaml
print(next(o["spec"]["replicas"] for o in yaml.safe_load_all(open(sys.argv[1]))
           if o and o["kind"] == "StatefulSet" and o["metadata"]["name"] == "granary-worker"))' "$out/ha-tls.yaml") ||
  fail "no granary-worker replica count in the ha-tls render"
"$k8s/components/tls/make-tls-secret.sh" --out "$ha_tls" --namespace granary --dispatchers 3 \
  --workers "$ha_workers" --etcd-members 3 > /dev/null
for pod in granary-dispatcher-0 granary-dispatcher-2 granary-worker-0 granary-etcd-0 granary-etcd-2; do
  verify_pod "$ha_tls" "$pod"
done
certs=("$ha_tls"/pods/*.crt)
echo "  ha-tls: ${#certs[@]} certificates for 3 dispatcher replicas + $ha_workers workers + 3 etcd members + the CA; chains, SANs and keys verified"

# --- 4. the checker -----------------------------------------------------------------------
echo "== 4. validate_manifests.py: schema (python3-kubernetes models), references, granary rules"
renders=()
for n in "${names[@]}"; do renders+=("$n=$out/$n.yaml"); done
"$python" "$root/deploy/validate_manifests.py" --repo "$root" \
  --against smoke-test="small" --tls-secret small-tls="$tls/granary-tls.yaml" \
  --tls-secret ha-tls="$ha_tls/granary-tls.yaml" "${renders[@]}" ||
  fail "manifest checks (see FAIL lines above)"

# --- 5. every overlay entry takes effect ----------------------------------------------------
echo "== 5. kustomize ignores a patch whose target is gone: each entry must change a render"
tops=()
for n in "${names[@]}"; do tops+=("$n=${dirs[$n]#$k8s/}"); done
"$python" "$root/deploy/validate_manifests.py" --repo "$root" --kubectl "$kubectl" \
  --entries-effective "$k8s" "${tops[@]}" || fail "an overlay entry has no effect (see FAIL lines above)"

# --- 6. Kubeflow Pipelines files ------------------------------------------------------------
echo "== 6. validate_kubeflow.py: deploy/kubeflow (KFP component spec, pipeline IR, granary flags)"
"$python" "$root/deploy/validate_kubeflow.py" --repo "$root" --kubeflow "$root/deploy/kubeflow" \
  base="$out/base.yaml" small="$out/small.yaml" || fail "Kubeflow checks (see FAIL lines above)"

echo "deploy/validate.sh: PASS (rendered manifests in $out)"
