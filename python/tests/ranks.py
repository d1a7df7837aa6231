"""Rank processes for the multi-rank tests (test_ddp.py, test_elastic.py): starting them under
one deadline, and checking that what they read is exactly once an epoch's data.

A rank prints one JSON report per (part of an) epoch it read: "rank", "epoch", "steps",
"ids" (the element ids it delivered, padding left out), "padding_steps", and its reader's
"stats" and "digest" (granary.torch.GranaryIterableDataset with digest=True)."""

import collections
import json
import os
import subprocess
import time

import numpy as np

import granary
from pipelines import unequal_split_pipeline

# One group of rank processes must end within this: a hang fails the test.
DEADLINE_S = 300


def epoch_ids(seed, epochs):
    """Each epoch's element ids under granary.local (the reference), as Counters."""
    ids = [collections.Counter() for _ in range(epochs)]
    for epoch in range(epochs):
        for (values,) in granary.local(unequal_split_pipeline(), 1, seed, first_epoch=epoch):
            ids[epoch].update(values.tolist())
    return ids


def ids_multiset(ids):
    """The digest multiset of the rows `ids` (int64 scalars), as a reader's digest has it."""
    digest = granary.Digest(True)
    if ids:
        digest.add((np.array(sorted(ids), dtype=np.int64),))
    return digest.multiset


def _last_line(path):
    with open(path, "rb") as f:
        lines = f.read().decode(errors="replace").splitlines()
    return lines[-1] if lines else "(nothing written)"


def run_ranks(argvs, tmp, name, why):
    """Runs one process per argv (rank i: argvs[i]) at once and returns each one's reports (its
    stdout's JSON lines). Raises AssertionError starting with `why` if one fails, or if they
    have not all ended within DEADLINE_S (then naming the last line each unfinished rank wrote
    to stderr: where it stood); the unfinished ones are killed."""
    ranks, outputs, errors = [], [], []
    for rank, argv in enumerate(argvs):
        outputs.append(os.path.join(tmp, f"{name}.{rank}.out"))
        errors.append(os.path.join(tmp, f"{name}.{rank}.err"))
        with open(outputs[-1], "wb") as out, open(errors[-1], "wb") as err:
            ranks.append(subprocess.Popen(argv, stdout=out, stderr=err))
    deadline = time.monotonic() + DEADLINE_S
    while any(p.poll() is None for p in ranks) and time.monotonic() < deadline:
        time.sleep(0.2)
    stuck = [rank for rank, p in enumerate(ranks) if p.poll() is None]
    for rank in stuck:
        ranks[rank].kill()
        ranks[rank].wait()
    if stuck:
        raise AssertionError(f"{why}: {name} not finished after {DEADLINE_S} s: " + "; ".join(
            f"rank {rank} at '{_last_line(errors[rank])}'" for rank in stuck))
    failed = [rank for rank, process in enumerate(ranks) if process.returncode != 0]
    if failed:
        # Every failed rank's stderr: the first to fail may not be the lowest rank (one rank
        # dying leaves the others waiting for its share until their stall timeout).
        def tail(rank):
            with open(errors[rank], "rb") as f:
                return f.read().decode(errors="replace")[-3000:]
        raise AssertionError(f"{why}: {name} rank(s) {failed} failed: " + "\n".join(
            f"rank {rank} exited {ranks[rank].returncode}: {tail(rank)}" for rank in failed))
    reports = []
    for rank in range(len(ranks)):
        with open(outputs[rank]) as f:
            reports.append([json.loads(line) for line in f])
    return reports


def assert_exactly_once(test, expected, reports, at):
    """Asserts that the ids the `reports` (of one epoch, by any ranks) delivered plus those
    their remainder rule dropped are exactly the Counter `expected`, that each report's digest
    and padding count agree with its ids, and returns the dropped ids (a Counter)."""
    delivered = collections.Counter()
    for r in reports:
        delivered.update(r["ids"])
        test.assertEqual(r["padding_steps"], r["stats"]["padding"], f"{at}: rank {r['rank']}")
        test.assertEqual(r["digest"]["rows"], len(r["ids"]), f"{at}: rank {r['rank']}")
        test.assertEqual(r["digest"]["multiset"], ids_multiset(r["ids"]),
                         f"{at}: rank {r['rank']}")
    test.assertEqual(delivered - expected, collections.Counter(),
                     f"{at}: delivered twice, or not in the epoch")
    dropped = expected - delivered
    test.assertEqual(sum(r["digest"]["dropped_rows"] for r in reports), sum(dropped.values()),
                     f"{at}: ids neither delivered nor dropped")
    test.assertEqual(sum(r["digest"]["dropped_multiset"] for r in reports) % (1 << 64),
                     ids_multiset(list(dropped.elements())), f"{at}: the dropped ids")
    return dropped


def assert_equal_steps(test, reports, at):
    """Asserts that the `reports` (one per rank, of one epoch) took as many steps."""
    steps = [r["steps"] for r in reports]
    test.assertEqual(steps, [steps[0]] * len(steps), f"{at}: steps per rank")
