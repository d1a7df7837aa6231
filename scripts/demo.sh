#!/usr/bin/env bash
# Quick-start command 1: installs what is missing, builds, generates a small ImageNet-style
# dataset and runs the ResNet-style example pipeline in-process for several epochs, then checks
# that every epoch delivered every image exactly once and that a second run with the same seed
# reproduces every epoch's digest byte for byte. Prints throughput.
#
# (The service demo — a dispatcher, workers, a worker killed and restarted — replaces the
# in-process run when the data plane lands.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GRANARY_BUILD_DIR:-$root/build}
images=${GRANARY_DEMO_IMAGES:-2000}
epochs=${GRANARY_DEMO_EPOCHS:-3}
"$root/scripts/build.sh"
granary="$build_dir/tools/granary"
data="$build_dir/demo/data"
if [[ ! -f "$data/.complete-$images" ]]; then
  rm -rf "$data"
  "$granary" datagen imagenet --out "$data" --images "$images" --files 4 --size 64
  touch "$data/.complete-$images"
fi
export GRANARY_DATA="$data"
echo "== run 1: $epochs epochs of examples/imagenet_resnet.json, in-process"
"$granary" local --pipeline "$root/examples/imagenet_resnet.json" --epochs "$epochs" --seed 42 \
  --digest_out "$build_dir/demo/digest1.jsonl"
echo "== run 2: the same seed again"
"$granary" local --pipeline "$root/examples/imagenet_resnet.json" --epochs "$epochs" --seed 42 \
  --digest_out "$build_dir/demo/digest2.jsonl" > /dev/null
verdict=PASS
while read -r line; do
  rows=$(sed -E 's/.*"elements":([0-9]+).*/\1/' <<< "$line")
  epoch=$(sed -E 's/.*"epoch":([0-9]+).*/\1/' <<< "$line")
  if [[ "$rows" == "$images" ]]; then
    echo "epoch $epoch: $rows of $images images delivered"
  else
    echo "epoch $epoch: $rows of $images images delivered: FAIL"
    verdict=FAIL
  fi
done < "$build_dir/demo/digest1.jsonl"
if cmp -s "$build_dir/demo/digest1.jsonl" "$build_dir/demo/digest2.jsonl"; then
  echo "same seed, same bytes: every epoch's digest reproduced"
else
  echo "same seed, same bytes: digests differ: FAIL"
  verdict=FAIL
fi
echo "verdict: $verdict"
[[ "$verdict" == PASS ]]
