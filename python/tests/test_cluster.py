"""Through a real cluster (a dispatcher and two workers started by the test): two consumers in
two Python processes share each epoch and their digests add up to granary.local's; the arrays
view the received bytes; errors carry the C++ message."""

import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

import granary
from cluster import Cluster, ClusterTestCase
from pipelines import assert_local_digest, range_pipeline

HERE = os.path.dirname(os.path.abspath(__file__))


class ClusterTest(ClusterTestCase):
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

    def test_one_reader_per_consumer_and_a_takeover_fences_the_old_one(self):
        seed = 9
        client = granary.connect(self.cluster.address)
        old = client.open_job(range_pipeline(), name="one-reader", seed=seed).epoch(0)
        for _ in range(10):
            next(old)
        saved = old.position()
        # A second live reader of the consumer is refused, naming the first (this process).
        with self.assertRaisesRegex(granary.FailedPrecondition,
                                    rf"consumer 0 of job \d+ is read by reader [0-9a-f]+ "
                                    rf"\([^)]*:{os.getpid()}, generation 1\)"):
            client.open_job(range_pipeline(), name="one-reader", seed=seed).epoch(0)
        # A takeover reads the rest from the old reader's saved position, exactly once...
        new = client.open_job(range_pipeline(), name="one-reader", seed=seed,
                              takeover=True).epoch(0, position=saved, digest=True)
        for _ in new:
            pass
        expected = granary.local_digests(range_pipeline(), 1, seed)[0]
        self.assertEqual(new.digest["rows"] + 10 * 20, expected["elements"], f"seed {seed}")
        # ...and the old reader is fenced: its next read after a heartbeat interval (200 ms; a
        # reader that has not heartbeat for three asks first) fails, queued elements or not.
        time.sleep(1)
        with self.assertRaisesRegex(granary.Aborted, r"taken over.*\(fenced\)"):
            next(old)

    def test_reopening_a_job_with_other_options_is_refused(self):
        client = granary.connect(self.cluster.address)
        client.open_job(range_pipeline(), name="fixed", seed=3, num_consumers=2)
        with self.assertRaisesRegex(granary.InvalidArgument,
                                    "job 'fixed' has num_consumers 2; this request gives 4"):
            client.open_job(range_pipeline(), name="fixed", seed=3, num_consumers=4)
        with self.assertRaisesRegex(granary.InvalidArgument,
                                    "job 'fixed' has seed 3; this request gives 5"):
            client.open_job(range_pipeline(), name="fixed", seed=5, num_consumers=2)
        # The job's own spec opens it again, as every consumer does.
        client.open_job(range_pipeline(), name="fixed", seed=3, num_consumers=2)

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
        self.assertEqual(reader.stats["elements"], 0)
        self.assertEqual(reader.stats["wait_us"], 0)
        n = sum(1 for _ in reader)
        self.assertEqual(reader.stats["elements"], n)
        self.assertGreater(reader.stats["payload_bytes"], n * 20 * 8)  # 20 int64 per batch
        self.assertGreater(reader.stats["wait_us"], 0)
        # Without faults nothing is received twice or recomputed (client_reader_test and
        # granary_run_test make them move).
        self.assertEqual(reader.stats["duplicates_dropped"], 0)
        self.assertEqual(reader.stats["recomputed_dropped"], 0)
        self.assertEqual(set(reader.stats), {
            "elements", "payload_bytes", "wait_us", "duplicates_dropped", "recomputed_dropped",
            "retries", "checksum_mismatches", "shared_memory_elements", "trainer_tail_elements",
            "remainder_dropped", "padding"})

    def test_a_reader_without_shared_memory_normalizes_itself_with_the_same_bytes(self):
        seed = 13
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([os.environ.get("GRANARY_BINARY", "granary"), "datagen", "imagenet",
                            f"--out={tmp}/data", "--images=40", "--files=2", "--size=32"],
                           check=True, capture_output=True)
            os.environ["GRANARY_DATA"] = f"{tmp}/data"
            try:
                ds = granary.Dataset.from_json(
                    os.path.join(HERE, "..", "..", "examples", "imagenet_resnet.json"))
            finally:
                del os.environ["GRANARY_DATA"]
            expected = granary.local_digests(ds, 1, seed)[0]["multiset_xxh64"]
            with Cluster(workers=2, data_roots=tmp) as cluster:
                client = granary.connect(cluster.address, shared_memory=False)
                for tail, here in (("auto", True), ("worker", False)):
                    reader = client.open_job(ds, name=f"tail-{tail}", seed=seed,
                                             tail=tail).epoch(0, digest=True)
                    for _ in reader:
                        pass
                    self.assertEqual(f"{reader.digest['multiset']:016x}", expected,
                                     f"tail {tail}, seed {seed}")
                    self.assertEqual(reader.stats["trainer_tail_elements"],
                                     reader.stats["elements"] if here else 0, f"tail {tail}")
                    self.assertGreater(reader.stats["elements"], 0)
                with self.assertRaisesRegex(granary.InvalidArgument,
                                            "tail 'sideways' is none of"):
                    client.open_job(ds, tail="sideways")

    def test_auto_order_reaches_the_job_and_its_workers(self):
        seed = 4
        client = granary.connect(self.cluster.address)
        # The workers hold the pipeline as written (another job's), and run it reordered too.
        for _ in client.open_job(range_pipeline(), name="as-written", seed=seed).epoch(0):
            pass
        job = client.open_job(range_pipeline(), name="auto-ordered", seed=seed, auto_order=True)
        reader = job.epoch(0, digest=True)
        for _ in reader:
            pass
        assert_local_digest(self, reader.digest["multiset"], seed)
        with self.assertRaisesRegex(granary.InvalidArgument,
                                    "job 'auto-ordered' has auto_order true; this request gives "
                                    "false"):
            client.open_job(range_pipeline(), name="auto-ordered", seed=seed)
        logs = ""
        for i in range(len(self.cluster.worker_processes)):
            with open(os.path.join(self.cluster.dir, f"worker-{i}.log")) as f:
                logs += f.read()
        self.assertIn("AutoOrder runs its ops as shuffle add batch", logs)

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
