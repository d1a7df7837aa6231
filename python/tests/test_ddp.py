"""DistributedDataParallel on CPU (gloo) over one Granary job with equal shares: 2 and 4 rank
processes train a small model for 3 epochs of a pipeline whose shares hold unequal numbers of
elements; every rank takes as many steps in every epoch (none hangs), and what the ranks trained
on (padding left out) plus what the remainder rule dropped is exactly once each epoch's data."""

import os
import random
import sys
import tempfile
import unittest

from cluster import ClusterTestCase
from ranks import assert_equal_steps, assert_exactly_once, epoch_ids, run_ranks

HERE = os.path.dirname(os.path.abspath(__file__))
EPOCHS = 3


class DdpTest(ClusterTestCase):
    def train(self, world_size, remainder):
        seed = random.randrange(1 << 30)
        why = f"seed {seed}, {world_size} ranks, remainder {remainder}"
        job_name = f"ddp-{world_size}-{remainder}"
        with tempfile.TemporaryDirectory() as tmp:
            rendezvous = os.path.join(tmp, "rendezvous")
            reports = run_ranks(
                [[sys.executable, os.path.join(HERE, "ddp_trainer.py"), self.cluster.address,
                  rendezvous, str(rank), str(world_size), str(seed), str(EPOCHS), remainder,
                  job_name] for rank in range(world_size)], tmp, job_name, why)
        expected = epoch_ids(seed, EPOCHS)
        evened = 0  # padding steps (pad) or dropped ids (drop) over every epoch and rank
        for epoch in range(EPOCHS):
            at = f"{why}, epoch {epoch}"
            epoch_reports = [rank_reports[epoch] for rank_reports in reports]
            self.assertEqual([r["epoch"] for r in epoch_reports], [epoch] * world_size, at)
            assert_equal_steps(self, epoch_reports, at)
            dropped = assert_exactly_once(self, expected[epoch], epoch_reports, at)
            padding_steps = sum(r["padding_steps"] for r in epoch_reports)
            if remainder == "pad":
                self.assertEqual(sum(dropped.values()), 0, at)
                evened += padding_steps
            else:
                self.assertEqual(padding_steps, 0, at)
                evened += sum(dropped.values())
        # The shares were unequal (39 splits), so the remainder rule had something to even out.
        self.assertGreater(evened, 0, why)

    def test_2_ranks_pad(self):
        self.train(2, "pad")

    def test_4_ranks_pad(self):
        self.train(4, "pad")

    def test_2_ranks_drop(self):
        self.train(2, "drop")

    def test_4_ranks_drop(self):
        self.train(4, "drop")


if __name__ == "__main__":
    unittest.main()
