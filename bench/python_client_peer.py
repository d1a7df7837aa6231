#!/usr/bin/python3
"""Granary from Python: a PyTorch trainer process reading a service job's epochs the way a
trainer does — granary.torch.GranaryIterableDataset under DataLoader(batch_size=None,
num_workers=0), every batch turned into torch.Tensors (zero-copy views) and touched no further,
like the C++ client's row in the same benchmark. One process reads every epoch, as a trainer
would (its mappings of the workers' shared memory stay warm, as the C++ client's do).

    PYTHONPATH=build/python /usr/bin/python3 bench/python_client_peer.py --dispatcher A \\
        --pipeline P.json --job_name J --go_dir D [--num_worker_slots N] [--seed S]

The job is opened first; then, for E = 0, 1, 2, ..., the process waits for the file D/go.E to
appear (the benchmark's signal to read epoch E, the other configurations having had their turn)
and prints one JSON line {"epoch": E, "images": n, "batches": b, "seconds": s,
"cpu_seconds": c}: seconds from the request for the epoch to its last batch, cpu_seconds this
process's user + sys time over the same span (the trainer process's cost of reading). It exits
when D/stop appears.
"""

import argparse
import json
import os
import resource
import time

import torch

import granary
import granary.torch


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def wait_for(go, stop):
    """True once `go` exists; False once `stop` does."""
    while True:
        if os.path.exists(go):
            return True
        if os.path.exists(stop):
            return False
        time.sleep(0.005)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dispatcher", required=True)
    parser.add_argument("--pipeline", required=True)
    parser.add_argument("--job_name", required=True)
    parser.add_argument("--go_dir", required=True)
    parser.add_argument("--num_worker_slots", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    ds = granary.torch.GranaryIterableDataset(
        granary.Dataset.from_json(args.pipeline), dispatcher=args.dispatcher,
        job_name=args.job_name, seed=args.seed, num_worker_slots=args.num_worker_slots)
    ds.open()  # connected and registered before any clock starts, as the C++ client's job is
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    epoch = 0
    while wait_for(os.path.join(args.go_dir, f"go.{epoch}"), os.path.join(args.go_dir, "stop")):
        images = batches = 0
        start, cpu_start = time.perf_counter(), cpu_seconds()
        for batch in loader:
            images += batch[0].shape[0]
            batches += 1
        seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
        print(json.dumps({"epoch": epoch, "images": images, "batches": batches,
                          "seconds": seconds, "cpu_seconds": cpu}), flush=True)
        epoch += 1


if __name__ == "__main__":
    main()
