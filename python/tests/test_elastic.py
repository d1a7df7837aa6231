"""Elastic resume at another world size, from Python rank processes (explicit consumer and
num_consumers): N ranks read part of epoch 0 with equal shares and save their state_dict()s;
M new ranks each load the list of the N states and read the rest of epoch 0 and epoch 1.
Everything delivered (old + new, padding left out) plus what was dropped is exactly once each
epoch's data, the new ranks take as many steps, and a run that always ran at M sees the same
multiset per epoch (the same seed gives the same global order at any number of ranks)."""

import os
import random
import sys
import tempfile
import unittest

from cluster import ClusterTestCase
from ranks import assert_equal_steps, assert_exactly_once, epoch_ids, run_ranks

HERE = os.path.dirname(os.path.abspath(__file__))


def rank_argvs(address, job_name, seed, remainder, world_size, stop_after, states_out,
               states_in):
    return [[sys.executable, os.path.join(HERE, "elastic_rank.py"), address, job_name, str(seed),
             remainder, str(rank), str(world_size), str(stop_after),
             states_out[rank] if states_out else "-"] + list(states_in)
            for rank in range(world_size)]


class ElasticTest(ClusterTestCase):
    def multisets(self, reports, epoch):
        """The multiset digest of what the `reports` of `epoch` delivered plus dropped."""
        return sum(r["digest"]["multiset"] + r["digest"]["dropped_multiset"]
                   for r in reports if r["epoch"] == epoch) % (1 << 64)

    def resume(self, old, new, remainder):
        seed = random.randrange(1 << 30)
        stop_after = random.Random(seed).randrange(1, 25)
        why = (f"seed {seed}, {old} ranks stopped after {stop_after} steps, resumed at {new}, "
               f"remainder {remainder}")
        job_name = f"elastic-{old}-{new}-{remainder}"
        address = self.cluster.address
        with tempfile.TemporaryDirectory() as tmp:
            states = [os.path.join(tmp, f"state.{rank}") for rank in range(old)]
            before = run_ranks(rank_argvs(address, job_name, seed, remainder, old, stop_after,
                                          states, []), tmp, "old", why)
            after = run_ranks(rank_argvs(address, job_name, seed, remainder, new, -1, None,
                                         states), tmp, "new", why)
            always = run_ranks(rank_argvs(address, f"{job_name}-always", seed, remainder, new,
                                          -1, None, []), tmp, "always", why)
        expected = epoch_ids(seed, 2)
        old_reports = [rank_reports[0] for rank_reports in before]
        self.assertEqual([(r["epoch"], r["steps"]) for r in old_reports],
                         [(0, stop_after)] * old, why)
        for epoch in range(2):
            at = f"{why}, epoch {epoch}"
            new_reports = [rank_reports[epoch] for rank_reports in after]
            self.assertEqual([r["epoch"] for r in new_reports], [epoch] * new, at)
            assert_equal_steps(self, new_reports, f"{at}, the new ranks")
            # Each new rank reads a share of its own (not only padding, nor nothing under drop).
            self.assertTrue(all(r["ids"] for r in new_reports),
                            f"{at}: ids per new rank {[len(r['ids']) for r in new_reports]}")
            assert_exactly_once(self, expected[epoch],
                                new_reports + (old_reports if epoch == 0 else []), at)
            always_reports = [rank_reports[epoch] for rank_reports in always]
            assert_equal_steps(self, always_reports, f"{at}, always at {new}")
            assert_exactly_once(self, expected[epoch], always_reports, f"{at}, always at {new}")
            self.assertEqual(self.multisets(old_reports + new_reports, epoch),
                             self.multisets(always_reports, epoch),
                             f"{at}: resumed and always at {new} differ")

    def test_4_ranks_resume_as_2_pad(self):
        self.resume(4, 2, "pad")

    def test_4_ranks_resume_as_2_drop(self):
        self.resume(4, 2, "drop")

    def test_2_ranks_resume_as_3_pad(self):
        self.resume(2, 3, "pad")

    def test_2_ranks_resume_as_3_drop(self):
        self.resume(2, 3, "drop")


if __name__ == "__main__":
    unittest.main()
