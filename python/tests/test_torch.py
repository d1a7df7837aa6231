"""granary.torch: tensors without copies, and a trainer SIGKILLed mid-epoch that resumes from
its last state_dict() delivers the epoch exactly once over both processes."""

import base64
import itertools
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
from cluster import ClusterTestCase
from pipelines import range_pipeline

HERE = os.path.dirname(os.path.abspath(__file__))
BATCHES = 4000 // 20


def saved_state(consumer, num_consumers, epoch=0):
    """A state_dict() as a rank that had read nothing of `epoch` saved it."""
    return {"epoch": epoch, "position": None, "consumer": consumer,
            "num_consumers": num_consumers}


class TorchTest(ClusterTestCase):
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
        loader = granary.torch.DataLoader(ds)
        self.assertIsInstance(loader, torch.utils.data.DataLoader)
        expected = granary.local_digests(range_pipeline(), 2, 3)
        for epoch in range(2):
            digest = granary.Digest(True)
            for (values,) in loader:
                self.assertIsInstance(values, torch.Tensor)
                digest.add((values.numpy(),))
            self.assertEqual(f"{digest.multiset:016x}", expected[epoch]["multiset_xxh64"])
            self.assertEqual(ds.state_dict()["epoch"], epoch + 1)

    def test_the_length_of_an_epoch_is_unknown(self):
        # Known only once the epoch is read (filters, ...): len() is a TypeError, as for any
        # IterableDataset without a length.
        ds = granary.torch.GranaryIterableDataset(range_pipeline(), dispatcher=self.cluster.address,
                                                  job_name="length")
        with self.assertRaises(TypeError):
            len(ds)
        with self.assertRaises(TypeError):
            len(granary.torch.DataLoader(ds))

    def test_granary_data_loader_refuses_batching_and_worker_processes(self):
        ds = granary.torch.GranaryIterableDataset(range_pipeline(), dispatcher=self.cluster.address,
                                                  job_name="refused")
        with self.assertRaisesRegex(granary.InvalidArgument,
                                    r"batch_size must be None, not 1: the pipeline batches"):
            granary.torch.DataLoader(ds, batch_size=1)
        with self.assertRaisesRegex(granary.InvalidArgument,
                                    r"num_workers must be 0, not 2: Granary's workers do"):
            granary.torch.DataLoader(ds, num_workers=2)

    def test_a_data_loader_batching_a_batched_pipeline_is_refused(self):
        ds = granary.torch.GranaryIterableDataset(range_pipeline(), dispatcher=self.cluster.address,
                                                  job_name="rebatched")
        with self.assertRaisesRegex(granary.InvalidArgument,
                                    r"yields batches .* batches them again .*batch_size=None"):
            next(iter(torch.utils.data.DataLoader(ds)))  # its default batch_size=1
        # An unbatched pipeline's elements are the DataLoader's to batch.
        unbatched = granary.torch.GranaryIterableDataset(
            granary.Dataset.range(40, elements_per_split=10), dispatcher=self.cluster.address,
            job_name="unbatched")
        batches = [values for (values,) in torch.utils.data.DataLoader(unbatched, batch_size=8)]
        self.assertEqual([tuple(b.shape) for b in batches], [(8,)] * 5)
        self.assertEqual(sorted(torch.cat(batches).tolist()), list(range(40)))

    def test_auto_order_reaches_the_job(self):
        def dataset(auto_order):
            return granary.torch.GranaryIterableDataset(
                range_pipeline(), dispatcher=self.cluster.address, job_name="auto-ordered",
                auto_order=auto_order)

        dataset(True).open()
        with self.assertRaisesRegex(granary.InvalidArgument,
                                    "has auto_order true; this request gives false"):
            dataset(False).open()

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

    def rank_dataset(self, consumer, num_consumers):
        return granary.torch.GranaryIterableDataset(
            range_pipeline(), dispatcher=self.cluster.address, job_name="states",
            consumer=consumer, num_consumers=num_consumers)

    def test_one_state_at_another_world_size_is_refused_naming_both(self):
        with self.assertRaisesRegex(granary.InvalidArgument, r"consumer 1 of 4.*consumer 1 of 2"):
            self.rank_dataset(1, 2).load_state_dict(saved_state(1, 4))

    def test_a_duplicate_consumer_in_the_states_is_refused(self):
        with self.assertRaisesRegex(granary.InvalidArgument, r"consumers \[0, 0, 2, 3\]"):
            self.rank_dataset(0, 2).load_state_dict(
                [saved_state(0, 4), saved_state(0, 4), saved_state(2, 4), saved_state(3, 4)])

    def test_states_of_different_epochs_are_refused(self):
        with self.assertRaisesRegex(granary.InvalidArgument, r"different epochs \[0, 1\]"):
            self.rank_dataset(0, 3).load_state_dict([saved_state(0, 2, epoch=0),
                                                     saved_state(1, 2, epoch=1)])

    def test_states_of_some_consumers_only_are_refused(self):
        with self.assertRaisesRegex(granary.InvalidArgument, r"the states of all 4"):
            self.rank_dataset(0, 2).load_state_dict(
                [saved_state(0, 4), saved_state(1, 4), saved_state(2, 4)])

    def test_a_malformed_position_is_refused_naming_the_consumer(self):
        job = granary.connect(self.cluster.address).open_job(range_pipeline(), name="malformed")
        reader = job.epoch(0)
        next(reader)
        of_epoch_0 = granary.torch._encode_position(reader.position())
        not_a_position = base64.b64encode(b"a model checkpoint").decode()
        cases = [("not base64!", r"consumer 0 \(epoch 0\): its position is not base64"),
                 (not_a_position, r"consumer 0 \(epoch 0\): position is malformed \(18 bytes"),
                 (17, r"consumer 0 \(epoch 0\): its position is of type int, not a base64 string"),
                 (of_epoch_0, r"consumer 0 \(epoch 1\): position does not match this reader: "
                              r"its epoch is 0, not 1")]
        ds = granary.torch.GranaryIterableDataset(range_pipeline(), dispatcher=self.cluster.address,
                                                  job_name="malformed")
        for position, error in cases:
            with self.subTest(position=position), self.assertRaisesRegex(granary.InvalidArgument,
                                                                         error):
                epoch = 1 if position is of_epoch_0 else 0
                ds.load_state_dict({"epoch": epoch, "position": position, "consumer": 0,
                                    "num_consumers": 1})
        # Among every rank's states (elastic resume), the one at fault is named.
        with self.assertRaisesRegex(granary.InvalidArgument,
                                    r"consumer 2 \(epoch 0\): its position is not base64"):
            self.rank_dataset(0, 2).load_state_dict(
                [saved_state(0, 4), saved_state(1, 4), dict(saved_state(2, 4), position="%"),
                 saved_state(3, 4)])

    def test_a_state_with_a_bytes_position_resumes_exactly_once(self):
        # As the version before positions were strings saved it (bytes, e.g. in a torch.save
        # checkpoint): a restarted trainer still resumes from it.
        seed = random.randrange(1 << 30)
        stop_after = random.Random(seed).randrange(1, BATCHES)
        why = f"seed {seed}, state saved after {stop_after} batches"
        first = granary.torch.GranaryIterableDataset(
            range_pipeline(), dispatcher=self.cluster.address, job_name="bytes", seed=seed)
        ids = [v for (values,) in itertools.islice(first, stop_after) for v in values.tolist()]
        state = first.state_dict()
        self.assertIsInstance(state["position"], str, why)
        self.assertEqual(json.loads(json.dumps(state)), state, why)
        old_state = dict(state, position=base64.b64decode(state["position"]))
        second = granary.torch.GranaryIterableDataset(
            range_pipeline(), dispatcher=self.cluster.address, job_name="bytes", seed=seed,
            takeover=True)  # a restarted trainer while the first may still run
        second.load_state_dict(old_state)
        ids += [v for (values,) in second for v in values.tolist()]
        expected = [v for (values,) in granary.local(range_pipeline(), seed=seed)
                    for v in values.tolist()]
        self.assertEqual(sorted(ids), sorted(expected), why)

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
            checkpoint = os.path.join(tmp, "checkpoint.json")
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
