"""Through a real cluster (a dispatcher and two workers started by the test): two consumers in
two Python processes share each epoch and their digests add up to granary.local's; the arrays
view the received bytes; errors carry the C++ message."""

import gc
import json
import os
import subprocess
import sys
import threading
import unittest

import numpy as np

import granary
from cluster import Cluster
from pipelines import range_pipeline

HERE = os.path.dirname(os.path.abspath(__file__))


class ClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(workers=2).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)

    def test_two_consumer_processes_add_up_to_the_epoch(self):
        seed, epochs = 21, 2
        consumers = [subprocess.Popen([sys.executable, os.path.join(HERE, "consumer_process.py"),
                                       self.cluster.address, str(c), "2", str(epochs), str(seed)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                     for c in range(2)]
        lines = []
        for c, process in enumerate(consumers):
            out, err = process.communicate(timeout=120)
            self.assertEqual(process.returncode, 0, f"consumer {c}: {err.decode()[-3000:]}")
            lines.append([json.loads(line) for line in out.decode().splitlines()])
        expected = granary.local_digests(range_pipeline(), epochs, seed)
        for epoch in range(epochs):
            shares = [lines[c][epoch] for c in range(2)]
            # Tasks lease splits from the epoch's shared plan as they go, so how the rows divide
            # depends on timing (a consumer that starts late may find them all taken): only the
            # sum is fixed.
            self.assertEqual(sum(s["rows"] for s in shares), expected[epoch]["elements"])
            multiset = sum(s["multiset"] for s in shares) % (1 << 64)
            self.assertEqual(f"{multiset:016x}", expected[epoch]["multiset_xxh64"],
                             f"epoch {epoch}, seed {seed}")

    def test_arrays_view_the_received_bytes_and_outlive_the_reader(self):
        job = granary.connect(self.cluster.address).open_job(range_pipeline(), seed=4)
        reader = job.epoch(0)
        element = reader.next_element()
        (values,) = element.arrays()
        image = element.wire_image()
        self.assertTrue(np.shares_memory(values, image), "the array is a view, not a copy")
        self.assertTrue(values.flags.writeable)  # the bytes are this process's own
        self.assertFalse(values.flags.owndata)
        kept = values
        copy = values.copy()
        rest = list(reader)  # the reader moves on to the end of the epoch
        del reader, element, image, job
        gc.collect()
        np.testing.assert_array_equal(kept, copy)
        self.assertEqual(len(rest) + 1, 4000 // 20)

    def test_position_resumes_exactly(self):
        seed = 8
        job = granary.connect(self.cluster.address).open_job(range_pipeline(), name="resume",
                                                              seed=seed)
        first = job.epoch(0, digest=True)
        for _ in range(37):
            next(first)
        saved = first.position()
        self.assertIsInstance(saved, bytes)
        del first
        rest = job.epoch(0, position=saved, digest=True)
        for _ in rest:
            pass
        expected = granary.local_digests(range_pipeline(), 1, seed)[0]
        self.assertEqual(rest.digest["rows"] + 37 * 20, expected["elements"], f"seed {seed}")

    def test_scaling_mid_epoch_keeps_exactly_once(self):
        seed = 6
        job = granary.connect(self.cluster.address).open_job(range_pipeline(), name="scaled",
                                                              seed=seed, num_worker_slots=1)
        reader = job.epoch(0, digest=True)
        for _ in range(5):
            next(reader)
        self.assertGreaterEqual(job.scale(2, reason="python test"), 0)
        with self.assertRaises(granary.InvalidArgument):
            job.scale(0)
        for _ in reader:
            pass
        expected = granary.local_digests(range_pipeline(), 1, seed)[0]
        self.assertEqual(f"{reader.digest['multiset']:016x}", expected["multiset_xxh64"])

    def test_local_workers_serve_the_trainer_exactly_once(self):
        seed = 8
        client = granary.connect(self.cluster.address, local_worker_flags=["--shm_min_bytes=1"])
        job = client.open_job(range_pipeline(), name="with-local-workers", seed=seed,
                              num_worker_slots=1, local_workers=1)
        reader = job.epoch(0, digest=True)
        for _ in reader:
            pass
        expected = granary.local_digests(range_pipeline(), 1, seed)[0]
        self.assertEqual(f"{reader.digest['multiset']:016x}", expected["multiset_xxh64"],
                         f"seed {seed}")
        self.assertGreater(reader.stats["shared_memory_elements"], 0)
        with self.assertRaises(granary.InvalidArgument):
            client.open_job(range_pipeline(), placement="everywhere")

    def test_stats(self):
        job = granary.connect(self.cluster.address).open_job(range_pipeline(), seed=2)
        reader = job.epoch(0)
        n = sum(1 for _ in reader)
        self.assertEqual(reader.stats["elements"], n)
        self.assertGreater(reader.stats["payload_bytes"], 0)
        self.assertEqual(reader.stats["duplicates_dropped"], 0)

    def test_errors_carry_the_cpp_message(self):
        client = granary.connect(self.cluster.address)
        with self.assertRaises(granary.InvalidArgument):
            client.open_job(range_pipeline(), cache_policy="sometimes")
        with self.assertRaises(granary.InvalidArgument) as raised:
            client.open_job(range_pipeline(), compression="gzip")
        self.assertIn("gzip", str(raised.exception))
        job = client.open_job(range_pipeline(), name="errors")
        with self.assertRaises(granary.FailedPrecondition) as raised:
            job.epoch(5)
        self.assertIn("next epoch is 0", str(raised.exception))
        with self.assertRaises(granary.InvalidArgument):
            job.epoch(0, position=b"not a position")
        with self.assertRaises(granary.Unavailable):
            granary.connect("127.0.0.1:1", rpc_timeout_ms=300)


class GilTest(unittest.TestCase):
    def test_waiting_for_data_releases_the_gil(self):
        # No worker: the reader waits (until its stall timeout) for a task nobody runs. Another
        # Python thread runs meanwhile only if the wait released the GIL.
        with Cluster(workers=0) as cluster:
            job = granary.connect(cluster.address, stall_timeout_ms=1500).open_job(
                range_pipeline(), num_worker_slots=1)
            reader = job.epoch(0)
            counted = [0]
            stop = threading.Event()

            def count():
                while not stop.is_set():
                    counted[0] += 1

            counter = threading.Thread(target=count)
            counter.start()
            try:
                with self.assertRaises(granary.Unavailable):
                    next(reader)
            finally:
                stop.set()
                counter.join()
        self.assertGreater(counted[0], 100000, "the other thread barely ran during the wait")


if __name__ == "__main__":
    unittest.main()
