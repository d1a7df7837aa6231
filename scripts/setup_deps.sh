#!/usr/bin/env bash
# Installs the Debian packages Granary builds and runs with. A no-op when all are present.
# Uses sudo when not root. Set GRANARY_SKIP_APT=1 to skip (e.g. on a non-Debian machine
# where the dependencies were installed by other means).
set -euo pipefail

packages=(
  build-essential cmake pkg-config ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev librocksdb-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libjpeg-dev libpng-dev zlib1g-dev libgoogle-glog-dev
  # Optional wire compression of elements for remote clients (transport/compression.h).
  liblz4-dev libzstd-dev
  # TLS (security/): OpenSSL's libcrypto makes the throwaway CA of `granary cluster`; the
  # openssl tool makes the tests' own certificates.
  libssl-dev openssl
  # The benchmark suite: the PyTorch DataLoader peer (bench/pytorch_peer.py) and the plots.
  python3 python3-torch python3-pil python3-numpy python3-matplotlib
  # The Python package (python/): the pybind11 extension over the client library, and the
  # interpreter's headers it builds against; its tests use python3-numpy and python3-torch.
  pybind11-dev python3-pybind11 python3-dev
  # The pip-installable package (setup.py, scripts/pip_install.sh): a virtualenv, and pip,
  # setuptools, wheel and build from Debian, so it builds offline (--no-build-isolation).
  python3-venv python3-pip python3-setuptools python3-wheel python3-build
  # Python functions as UDFs (Dataset.map(fn)): shipped to the workers with their closures.
  python3-cloudpickle
  # The safety nets (docs/verification.md, "Safety nets"): clang for the libFuzzer build (scripts/fuzz.sh),
  # the sanitizer build (scripts/sanitize.sh) and -Wthread-safety; libclang-rt-14-dev holds
  # clang's runtimes: libFuzzer and the ASan/UBSan libraries.
  clang libclang-rt-14-dev
  # Observability (obs/): civetweb serves /metrics, the probes and the status page; headless
  # Chromium loads the status page in its test (tests/ops_process_test.cc).
  libcivetweb-dev chromium
  # The in-memory cache tier (cache/redis_env.h): hiredis; its tests start a real redis-server.
  libhiredis-dev redis-server
  # The replicated dispatcher's journal (issue 32) lives in etcd, reached through our own gRPC
  # client (etcd/); its tests start real etcd members on loopback (testing/etcd_test_cluster.h).
  etcd-server
  # The Kubernetes deployment's check (deploy/validate.sh, ctest deploy_validate): PyYAML and
  # the Kubernetes API models of the Python client, which it validates the manifests against.
  python3-yaml python3-kubernetes
  # `granary chaos` beyond crash-stop (issue 33): network namespaces, veth links, routes and
  # tc bandwidth limits (iproute2), and clock jumps in real processes (faketime's libfaketime).
  iproute2 faketime
)
# kubectl renders the deployment's kustomizations (deploy/validate.sh): the machine's own when it
# has one (e.g. the `kubectl` package of Kubernetes' apt repository, which conflicts with
# Debian's), else Debian's kubernetes-client. (Debian 12's is kubectl 1.20, whose kustomize is
# too old for deploy/k8s/: validate.sh then says kubectl 1.21 or newer is needed.)
if ! command -v kubectl > /dev/null 2>&1; then
  packages+=(kubernetes-client)
fi

if [[ "${GRANARY_SKIP_APT:-0}" == 1 ]]; then
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "granary setup: installing missing Debian packages: ${missing[*]}" >&2
sudo_cmd=()
if [[ "$(id -u)" != 0 ]]; then
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
