#!/usr/bin/python3
"""Python UDFs (issue 35): the ResNet-style pipeline written as one Python function, run by
Granary's workers, against the PyTorch DataLoader running the same Python functions; and the
cost of Granary's Python call path per element against a C++ UDF that does nothing.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_udf_bench.py \\
        --granary build/tools/granary [--images 4000] [--size 96] [--epochs 3] [--out DIR]

Both sides read the same TFRecord files (`granary datagen imagenet`) and, per image, run the
functions of bench/pytorch_peer.py: parse the Example, decode the JPEG with PIL, random crop
(0.875), random flip, normalize — in Python. Same cores:
  * the peer: pytorch_peer.py --num_workers 2 (two DataLoader worker processes, the default
    collate into batches of 128);
  * Granary: `granary cluster --workers 2 --allow_python_udfs` and the pipeline
    tfrecord -> map(transform) -> batch(128): each worker runs the function in one helper
    process (a map, not a parallel_map), so two Python processes do the work, as on the peer's
    side. The trainer (this process) reads the job's epochs with granary.connect.
Images per second are the epoch's images over its wall time, from the first batch asked for to
the last received; the first epoch of each side is reported apart (worker start-up). The
function is `transform` below, pickled by reference to bench/pytorch_peer.py's functions, which
the helpers import (the cluster runs with PYTHONPATH=bench/).

The call path: granary.local over range(N) with map(lambda x: x) (a Python UDF: an element image
into shared memory, a request line, the call, the answer) against map("simulate_cost",
us_per_element=0) (a C++ UDF that does nothing); the difference per element is the overhead.

Prints one JSON line per measurement and a summary; exit status 0 unless something failed.
"""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import granary

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pytorch_peer import (  # noqa: E402 (imported by the helpers too: PYTHONPATH below)
    IMAGE_KEY, LABEL_KEY, augment, decode_jpeg, parse_example, single_value)
CROP_FRACTION = 0.875
BATCH_SIZE = 128


def transform(record, rng):
    """The peer's work on one record, as a Granary Python UDF: (float32 [h', w', 3], label)."""
    found = parse_example(record, (IMAGE_KEY, LABEL_KEY))
    image = decode_jpeg(single_value(found, IMAGE_KEY, "bytes_list"))
    label = single_value(found, LABEL_KEY, "int64_list")
    return augment(image, rng, CROP_FRACTION), label


def report(**fields):
    print(json.dumps(fields), flush=True)
    return fields


def run_peer(data_dir, epochs):
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, "pytorch_peer.py"), f"--data_dir={data_dir}",
         "--num_workers=2", f"--batch_size={BATCH_SIZE}", f"--crop_fraction={CROP_FRACTION}",
         f"--epochs={epochs}"], check=True, capture_output=True, text=True)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return [report(side="pytorch_dataloader_2_workers", epoch=line["epoch"],
                   images=line["images"], seconds=line["seconds"],
                   images_per_second=line["images"] / line["seconds"]) for line in lines]


def start_cluster(binary, directory, data_dir):
    log = open(os.path.join(directory, "cluster.log"), "wb")
    process = subprocess.Popen([binary, "cluster", "--workers=2", f"--dir={directory}/cluster",
                                f"--data_roots={data_dir}", "--insecure", "--allow_python_udfs",
                                "--", f"--python_interpreter={sys.executable}"],
                               stdout=subprocess.PIPE, stderr=log,
                               # The workers' helpers import pytorch_peer, as a user's helpers
                               # import the user's modules installed on the workers.
                               env=dict(os.environ, PYTHONPATH=HERE))
    address = None
    for line in process.stdout:
        line = line.decode()
        match = re.match(r"dispatcher (\S+) pid", line)
        if match:
            address = match.group(1)
        if line.startswith("cluster ready"):
            break
    if address is None:
        process.kill()
        process.wait()
        raise RuntimeError(f"granary cluster did not start: see {directory}/cluster.log")
    return process, address, log


def run_granary(binary, data_dir, epochs, directory):
    files = sorted(glob.glob(os.path.join(data_dir, "*.tfrecord")))
    ds = granary.Dataset.tfrecord(files, records_per_split=256).map(transform).batch(BATCH_SIZE)
    process, address, log = start_cluster(binary, directory, data_dir)
    results = []
    try:
        job = granary.connect(address, insecure=True).open_job(ds, name="python_udf_bench",
                                                               seed=1)
        for epoch in range(epochs):
            start = time.monotonic()
            images = sum(len(labels) for (_, labels) in job.epoch(epoch))
            seconds = time.monotonic() - start
            results.append(report(side="granary_2_workers_python_udf", epoch=epoch,
                                  images=images, seconds=seconds,
                                  images_per_second=images / seconds))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        process.stdout.close()
        log.close()
    return results


def call_overhead(elements):
    def per_element(ds):
        start = time.monotonic()
        count = sum(1 for _ in granary.local(ds))
        assert count == elements, count
        return (time.monotonic() - start) / elements * 1e6

    base = granary.Dataset.range(elements)
    cpp = per_element(base.map("simulate_cost", us_per_element=0))
    python = per_element(base.map(lambda x: x))
    return report(measure="call_path_us_per_element", cpp_noop_udf=cpp, python_identity_udf=python,
                  overhead=python - cpp)


def mean_steady(results):
    steady = results[1:] or results
    return sum(r["images_per_second"] for r in steady) / len(steady)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--granary", required=True, help="the granary binary")
    parser.add_argument("--images", type=int, default=4000)
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--call_elements", type=int, default=20000)
    parser.add_argument("--out", help="a directory to keep (default: a temporary one)")
    args = parser.parse_args()
    directory = args.out or tempfile.mkdtemp(prefix="granary-python-udf-bench-")
    os.makedirs(directory, exist_ok=True)
    try:
        data_dir = os.path.join(directory, "imagenet")
        if not glob.glob(os.path.join(data_dir, "*.tfrecord")):
            subprocess.run([args.granary, "datagen", "imagenet", f"--out={data_dir}",
                            f"--images={args.images}", "--files=8", f"--size={args.size}"],
                           check=True, capture_output=True)
        overhead = call_overhead(args.call_elements)
        peer_results = run_peer(data_dir, args.epochs)
        granary_results = run_granary(args.granary, data_dir, args.epochs, directory)
        peer_rate, granary_rate = mean_steady(peer_results), mean_steady(granary_results)
        report(summary="python_udf", images=args.images, size=args.size, epochs=args.epochs,
               granary_images_per_second=granary_rate, dataloader_images_per_second=peer_rate,
               ratio=granary_rate / peer_rate, target_ratio=1.0,
               call_overhead_us_per_element=overhead["overhead"])
    finally:
        if not args.out:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
