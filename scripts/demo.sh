#!/usr/bin/env bash
# Quick-start command 1: installs what is missing, builds, generates a small ImageNet-style
# dataset, starts a local Granary cluster (a dispatcher and 2 workers), and reads 3 epochs of
# the ResNet-style example pipeline through it with `granary run` — SIGKILLing one worker in the
# middle of an epoch and restarting it — then compares every epoch's digest with an in-process
# reference run (`granary local`) and prints the verdict and the throughput.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GRANARY_BUILD_DIR:-$root/build}
images=${GRANARY_DEMO_IMAGES:-6000}
epochs=${GRANARY_DEMO_EPOCHS:-3}
seed=42
"$root/scripts/build.sh" > "$build_dir.demo-build.log" 2>&1 || { cat "$build_dir.demo-build.log"; exit 1; }
rm -f "$build_dir.demo-build.log"
granary="$build_dir/tools/granary"
demo="$build_dir/demo"
data="$demo/data"
mkdir -p "$demo"
if [[ ! -f "$data/.complete-$images" ]]; then
  rm -rf "$data"
  "$granary" datagen imagenet --out "$data" --images "$images" --files 8 --size 64
  touch "$data/.complete-$images"
fi
export GRANARY_DATA="$data"
pipeline="$root/examples/imagenet_resnet.json"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

echo "== reference: $epochs epochs in-process (granary local)"
"$granary" local --pipeline "$pipeline" --epochs "$epochs" --seed "$seed" \
  --digest_out "$demo/reference.jsonl" | tail -n 1

echo "== cluster: a dispatcher and 2 workers on 127.0.0.1, mutual TLS with a throwaway CA"
rm -rf "$demo/cluster"
"$granary" cluster --workers 2 --restart --dir "$demo/cluster" --data_roots "$data" > "$demo/cluster.out" &
pids+=($!)
for _ in $(seq 600); do grep -q "cluster ready" "$demo/cluster.out" && break; sleep 0.1; done
grep -q "cluster ready" "$demo/cluster.out" || { cat "$demo/cluster.out"; exit 1; }
grep -E "^(dispatcher|worker)" "$demo/cluster.out"
# The cluster runs TLS with a throwaway CA in its directory; this names the client's certificate.
read -r -a client_flags <<< "$(sed -n 's/^client flags: //p' "$demo/cluster.out")"
dispatcher=$(awk '/^dispatcher/ {print $2}' "$demo/cluster.out")
victim_pid=$(awk '/^worker worker-0/ {print $5}' "$demo/cluster.out")

echo "== granary run: $epochs epochs through the service"
"$granary" run --dispatcher "$dispatcher" "${client_flags[@]}" --pipeline "$pipeline" --epochs "$epochs" \
  --seed "$seed" --job_name demo --digest_out "$demo/service.jsonl" > "$demo/run.out" 2>&1 &
run_pid=$!
pids+=($run_pid)
# Once epoch 0 is read: kill worker-0 for real, mid-epoch; the cluster (--restart) brings it back
# under the same id and address. (An epoch takes a fraction of a second here: the epoch the kill
# lands in is the one whose line shows recomputed elements.)
for _ in $(seq 600); do grep -q "^epoch 0:" "$demo/run.out" && break; sleep 0.02; done
sleep 0.05
echo "killing worker-0 (pid $victim_pid) with SIGKILL after epoch 0"
kill -KILL "$victim_pid"
for _ in $(seq 600); do
  grep -q "^worker worker-0 .*(restart 1)" "$demo/cluster.out" && break
  sleep 0.1
done
grep -E "^worker-0|^worker worker-0 .*restart" "$demo/cluster.out" | sed 's/^/cluster: /'
status=0
wait "$run_pid" || status=$?
cat "$demo/run.out" | grep -E "^epoch|granary run"
[[ $status == 0 ]] || { echo "granary run failed"; exit 1; }

echo "== verdict: every epoch's digest against the in-process reference"
verdict=PASS
for ((e = 0; e < epochs; e++)); do
  ref=$(grep "\"epoch\":$e," "$demo/reference.jsonl")
  got=$(grep "\"epoch\":$e," "$demo/service.jsonl")
  field() { sed -E "s/.*\"$1\":\"?([0-9a-f]+)\"?.*/\1/" <<< "$2"; }
  if [[ "$(field elements "$ref")" == "$(field elements "$got")" &&
        "$(field multiset_xxh64 "$ref")" == "$(field multiset_xxh64 "$got")" ]]; then
    echo "epoch $e: $(field elements "$got") images, multiset digest $(field multiset_xxh64 "$got") = reference; $(field duplicates_dropped "$got") duplicates/recomputed dropped: exactly once"
  else
    echo "epoch $e: MISMATCH: service $got, reference $ref"
    verdict=FAIL
  fi
done
rows=$(awk '/^epoch [0-9]+:/ {r += $5; s += $8} END {printf "%d %.2f", r, s}' "$demo/run.out")
echo "throughput through the service: $(awk '{printf "%.0f images/s (%d images in %.2f s)", $1 / $2, $1, $2}' <<< "$rows")"
echo "verdict: $verdict"
[[ "$verdict" == PASS ]]
