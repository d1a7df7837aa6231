"""granary.torch: tensors without copies, and a trainer SIGKILLed mid-epoch that resumes from
its last state_dict() delivers the epoch exactly once over both processes."""

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import torch

import granary
import granary.torch
from cluster import Cluster
from pipelines import range_pipeline

HERE = os.path.dirname(os.path.abspath(__file__))
BATCHES = 4000 // 20


class TorchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(workers=2).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)

    def test_tensors_share_the_received_bytes(self):
        job = granary.connect(self.cluster.address).open_job(range_pipeline(), seed=1)
        element = job.epoch(0).next_element()
        arrays = element.arrays()
        (tensor,) = granary.torch.as_tensors(arrays)
        image = element.wire_image()
        start = image.ctypes.data
        self.assertEqual(tensor.data_ptr(), arrays[0].ctypes.data)
        self.assertTrue(start <= tensor.data_ptr() < start + image.nbytes)
        self.assertEqual(tensor.dtype, torch.int64)

    def test_a_data_loader_reads_each_epoch_once(self):
        ds = granary.torch.GranaryIterableDataset(range_pipeline(), dispatcher=self.cluster.address,
                                                  job_name="loader", seed=3)
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
        expected = granary.local_digests(range_pipeline(), 2, 3)
        for epoch in range(2):
            digest = granary.Digest(True)
            for (values,) in loader:
                self.assertIsInstance(values, torch.Tensor)
                digest.add((values.numpy(),))
            self.assertEqual(f"{digest.multiset:016x}", expected[epoch]["multiset_xxh64"])
            self.assertEqual(ds.state_dict()["epoch"], epoch + 1)

    def test_images_and_labels(self):
        images = torch.zeros(4, 8, 6, 3, dtype=torch.uint8)
        labels = torch.arange(4, dtype=torch.int32).reshape(4, 1)
        x, y = granary.torch.images_and_labels((images, labels))
        self.assertEqual(tuple(x.shape), (4, 3, 8, 6))
        self.assertEqual(x.data_ptr(), images.data_ptr())  # a view
        self.assertEqual(y.tolist(), [0, 1, 2, 3])
        self.assertEqual(y.dtype, torch.int64)

    def test_state_of_another_consumer_is_refused(self):
        ds = granary.torch.GranaryIterableDataset(range_pipeline(), dispatcher=self.cluster.address,
                                                  job_name="two", consumer=1, num_consumers=2)
        with self.assertRaises(granary.InvalidArgument):
            ds.load_state_dict({"epoch": 0, "position": None, "consumer": 0})
        with self.assertRaises(granary.InvalidArgument):
            granary.torch.GranaryIterableDataset(range_pipeline(), dispatcher="x", job_name="")

    def test_torch_distributed_ranks_are_consumers(self):
        seed = 17
        with tempfile.TemporaryDirectory() as tmp:
            ranks = [subprocess.Popen([sys.executable, os.path.join(HERE, "distributed_consumer.py"),
                                       self.cluster.address, os.path.join(tmp, "rendezvous"),
                                       str(rank), "2", str(seed)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                     for rank in range(2)]
            results = []
            for rank, process in enumerate(ranks):
                out, err = process.communicate(timeout=120)
                self.assertEqual(process.returncode, 0, f"rank {rank}: {err.decode()[-3000:]}")
                results.append(json.loads(out.decode().splitlines()[-1]))
        self.assertEqual([r["consumer"] for r in results], [0, 1])
        expected = granary.local_digests(range_pipeline(), 1, seed)[0]
        self.assertEqual(sum(r["rows"] for r in results), expected["elements"])
        self.assertEqual(f"{sum(r['multiset'] for r in results) % (1 << 64):016x}",
                         expected["multiset_xxh64"])

    def run_trainer(self, checkpoint, save_at, hang_at, seed):
        return subprocess.Popen([sys.executable, os.path.join(HERE, "torch_trainer.py"),
                                 self.cluster.address, checkpoint, "2", str(seed), str(save_at),
                                 str(hang_at)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def test_a_killed_trainer_resumes_its_epoch_exactly_once(self):
        seed = random.randrange(1 << 30)
        rng = random.Random(seed)
        save_at = rng.randrange(1, BATCHES - 20)
        hang_at = save_at + rng.randrange(1, 20)  # trained past the checkpoint, then killed
        why = f"seed {seed}, state saved after step {save_at}, killed at step {hang_at}"
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = os.path.join(tmp, "checkpoint.pt")
            first = self.run_trainer(checkpoint, save_at, hang_at, seed)
            line = first.stdout.readline().decode()
            if "hanging" not in line:
                first.kill()
                _, err = first.communicate()
                self.fail(f"{why}: the first trainer did not reach its step: {line!r} "
                          f"{err.decode()[-3000:]}")
            first.send_signal(signal.SIGKILL)
            first.communicate()
            self.assertTrue(os.path.exists(checkpoint), why)
            second = self.run_trainer(checkpoint, -1, -1, seed)
            out, err = second.communicate(timeout=120)
            self.assertEqual(second.returncode, 0, f"{why}: {err.decode()[-3000:]}")
        lines = [json.loads(line) for line in out.decode().splitlines()]
        expected = granary.local_digests(range_pipeline(), 2, seed)
        self.assertEqual([l["epoch"] for l in lines], [0, 1], why)
        for line, want in zip(lines, expected):
            self.assertEqual(line["rows"], want["elements"], why)
            self.assertEqual(f"{line['multiset']:016x}", want["multiset_xxh64"], why)


if __name__ == "__main__":
    unittest.main()
