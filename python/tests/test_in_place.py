"""Issue 30: a trainer writes in place into what it received — NumPy arrays and torch tensors —
from a worker on its host, which serves through shared memory (the default). Every write works
(no crash, no hidden warning), stays in the trainer, and the worker's data is unaffected: every
epoch still matches granary.local."""

import unittest
import warnings

import numpy as np
import torch

import granary
import granary.torch
from cluster import Cluster
from pipelines import assert_local_digest, range_pipeline


class InPlaceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # --shm_min_bytes=1: every element through shared memory, however small.
        cls.cluster = Cluster(workers=1, worker_flags=["--shm_min_bytes=1"]).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)

    def test_numpy_arrays_are_writable_views(self):
        seed = 5
        job = granary.connect(self.cluster.address).open_job(range_pipeline(), name="numpy",
                                                              seed=seed)
        kept = []
        for epoch in range(2):
            reader = job.epoch(epoch, digest=True)  # digests each element as it arrives
            while (element := reader.next_element()) is not None:
                (values,) = element.arrays()
                self.assertTrue(np.shares_memory(values, element.wire_image()), "not a view")
                self.assertTrue(values.flags.writeable)
                original = values.copy()
                values += 1
                values[:5] = -1
                np.testing.assert_array_equal(values[5:], original[5:] + 1)
                np.testing.assert_array_equal(values[:5], [-1] * 5)
                if len(kept) < 8:
                    kept.append((values, original))  # held while the worker serves on
            self.assertEqual(reader.stats["shared_memory_elements"], reader.stats["elements"],
                             "the elements did not come through shared memory")
            assert_local_digest(self, reader.digest["multiset"], seed, epoch)
        for values, original in kept:
            np.testing.assert_array_equal(values[5:], original[5:] + 1)

    def test_torch_tensors_take_in_place_ops_without_warnings(self):
        seed = 9
        ds = granary.torch.GranaryIterableDataset(range_pipeline(), dispatcher=self.cluster.address,
                                                  job_name="torch", seed=seed)
        for epoch in range(2):
            digest = granary.Digest(True)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for (values,) in ds:
                    digest.add((values.numpy(),))  # before the writes: what was delivered
                    original = values.clone()
                    values.add_(1)
                    values[:3] = 0
                    self.assertTrue(torch.equal(values[3:], original[3:] + 1))
                    self.assertEqual(values[:3].tolist(), [0, 0, 0])
            self.assertEqual([str(w.message) for w in caught], [])
            assert_local_digest(self, digest.multiset, seed, epoch)

    def test_granary_local_arrays_are_writable(self):
        for (values,) in granary.local(range_pipeline(), seed=1):
            values *= 2
        self.assertTrue(values.flags.writeable)


if __name__ == "__main__":
    unittest.main()
