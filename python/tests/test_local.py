"""granary.local: the in-process run equals `granary local` — its digests, and the elements it
yields digested in Python."""

import json
import os
import subprocess
import tempfile
import unittest

import numpy as np

import granary

BINARY = os.environ.get("GRANARY_BINARY", "granary")
BINARY_DIR = os.environ.get("GRANARY_BINARY_DIR", os.path.join(os.path.dirname(__file__), "../../build"))
SOURCE_DIR = os.environ.get("GRANARY_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))


def cli_digests(dataset, epochs, seed, cache_policy="compute"):
    """`granary local --digest_out` of `dataset`'s JSON: its digest lines."""
    with tempfile.TemporaryDirectory() as tmp:
        pipeline = os.path.join(tmp, "pipeline.json")
        with open(pipeline, "w") as f:
            f.write(dataset.to_json())
        out = os.path.join(tmp, "digest")
        subprocess.run([BINARY, "local", f"--pipeline={pipeline}", f"--epochs={epochs}",
                        f"--seed={seed}", f"--cache_policy={cache_policy}",
                        f"--digest_out={out}"], check=True, capture_output=True,
                       cwd=SOURCE_DIR)
        with open(out) as f:
            return [json.loads(line) for line in f if line.strip()]


class LocalTest(unittest.TestCase):
    def check(self, dataset, epochs, seed, cache_policy="compute"):
        expected = cli_digests(dataset, epochs, seed, cache_policy)
        got = granary.local_digests(dataset, epochs, seed, cache_policy)
        keys = ("epoch", "elements", "multiset_xxh64", "ordered_xxh64")
        self.assertEqual([{k: d[k] for k in keys} for d in got],
                         [{k: d[k] for k in keys} for d in expected], f"seed {seed}")
        # The elements granary.local yields, digested in Python, give the same lines.
        for epoch in range(epochs):
            digest = granary.Digest(dataset.batched)
            for arrays in granary.local(dataset, epochs=1, seed=seed, cache_policy=cache_policy,
                                        first_epoch=epoch):
                digest.add(arrays)
            self.assertEqual(digest.rows, expected[epoch]["elements"], f"epoch {epoch}")
            self.assertEqual(f"{digest.multiset:016x}", expected[epoch]["multiset_xxh64"])
            self.assertEqual(f"{digest.ordered:016x}", expected[epoch]["ordered_xxh64"])

    def test_range_pipeline(self):
        ds = granary.Dataset.range(500, elements_per_split=50, shuffle_splits=True) \
            .shuffle(32).filter("modulo", modulus=3, remainder=1).map("add", value=5).batch(16)
        self.check(ds, epochs=2, seed=5)

    def test_text_lines_example(self):
        old = os.getcwd()
        os.chdir(SOURCE_DIR)  # its files pattern is relative to the repository
        try:
            self.check(granary.Dataset.from_json("examples/text_lines.json"), epochs=2, seed=9)
        finally:
            os.chdir(old)

    def test_at_mark_cache_policy(self):
        ds = granary.Dataset.range(300, elements_per_split=30, shuffle_splits=True) \
            .shuffle(16).mark("m").take(100).batch(10)
        self.check(ds, epochs=2, seed=3, cache_policy="at_mark")

    def test_auto_cache_policy_pins_up_to_the_last_mark(self):
        ds = granary.Dataset.range(300, elements_per_split=30, shuffle_splits=True) \
            .shuffle(16).mark("a").shuffle(8).mark("b").batch(10)
        self.check(ds, epochs=2, seed=3, cache_policy="auto")
        # Both shuffles run as epoch 0 in every epoch: the epochs are equal, batch for batch.
        first, second = (list(granary.local(ds, epochs=1, seed=3, cache_policy="auto",
                                            first_epoch=e)) for e in (0, 1))
        self.assertEqual([b[0].tolist() for b in first], [b[0].tolist() for b in second])

    def test_auto_order_runs_the_reordered_pipeline_and_yields_the_same_elements(self):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([BINARY, "datagen", "imagenet", f"--out={tmp}/data", "--images=48",
                            "--files=2", "--size=32"], check=True, capture_output=True)
            os.environ["GRANARY_DATA"] = f"{tmp}/data"
            try:
                # Normalize (4x the bytes) written before the crop and flip.
                ds = granary.Dataset.from_json(
                    os.path.join(SOURCE_DIR, "examples/imagenet_resnet_normalize_first.json"))
            finally:
                del os.environ["GRANARY_DATA"]
            self.assertEqual(granary.auto_ordered(ds),
                             "shuffle parse_example decode_jpeg random_crop(op 4) "
                             "random_flip(op 5) normalize(op 3) batch prefetch")
            seed = 11
            as_written = list(granary.local(ds, epochs=2, seed=seed))
            reordered = list(granary.local(ds, epochs=2, seed=seed, auto_order=True))
            self.assertEqual(len(reordered), len(as_written), f"seed {seed}")
            for a, b in zip(as_written, reordered):
                for x, y in zip(a, b):
                    np.testing.assert_array_equal(x, y, err_msg=f"seed {seed}")
            self.assertEqual(granary.local_digests(ds, 2, seed, auto_order=True),
                             granary.local_digests(ds, 2, seed))

    def test_elements_are_numpy_arrays(self):
        ds = granary.Dataset.range(10).batch(4)
        batches = list(granary.local(ds, seed=1))
        self.assertEqual([len(b) for b in batches], [1, 1, 1])
        values = np.concatenate([b[0] for b in batches])
        self.assertEqual(values.dtype, np.int64)
        self.assertEqual(sorted(values.tolist()), list(range(10)))
        self.assertTrue(batches[0][0].flags.writeable)

    def test_string_tensors_are_bytes(self):
        old = os.getcwd()
        os.chdir(SOURCE_DIR)
        try:
            ds = granary.Dataset.text_lines(["examples/data/*.txt"]).take(2)
            lines = [arrays[0] for arrays in granary.local(ds)]
        finally:
            os.chdir(old)
        self.assertEqual(len(lines), 2)
        self.assertEqual(lines[0].dtype, object)
        self.assertIsInstance(lines[0].item(), bytes)

    def test_pipeline_errors_raise_with_the_cpp_message(self):
        ds = granary.Dataset.tfrecord(["/nonexistent/*.tfrecord"])
        with self.assertRaises(granary.NotFound) as raised:
            list(granary.local(ds))
        self.assertIn("/nonexistent/*.tfrecord", str(raised.exception))
        with self.assertRaises(granary.InvalidArgument):
            list(granary.local(granary.Dataset.range(10), cache_policy="sometimes"))


class PluginTest(unittest.TestCase):
    def test_a_loaded_plugin_udf_builds_and_runs(self):
        with self.assertRaises(granary.InvalidArgument):
            granary.Dataset.range(10).map("random_jitter", amplitude=3)
        granary.load_plugin(os.path.join(BINARY_DIR, "examples", "libgranary_example_plugin.so"))
        ds = granary.Dataset.range(100).map("random_jitter", amplitude=3).batch(10)
        values = np.concatenate([v for (v,) in granary.local(ds, seed=2)])
        self.assertEqual(len(values), 100)
        self.assertLessEqual(int(np.abs(values - np.arange(100)).max()), 3)
        self.assertTrue((values != np.arange(100)).any(), "the jitter changed nothing")


class BadInputTest(unittest.TestCase):
    """Whatever Python passes, the interpreter survives: an exception naming the problem."""

    def test_digest_refuses_what_granary_has_no_dtype_for(self):
        digest = granary.Digest(False)
        with self.assertRaises(granary.InvalidArgument) as raised:
            digest.add([np.array([1j])])
        self.assertIn("complex", str(raised.exception))
        with self.assertRaises(granary.InvalidArgument) as raised:
            digest.add([np.array([1, "two"], dtype=object)])
        self.assertIn("must hold bytes", str(raised.exception))
        with self.assertRaises(TypeError):
            digest.add(5)
        self.assertEqual(digest.rows, 0)

    def test_garbage_pipeline_bytes(self):
        with self.assertRaises(granary.InvalidArgument):
            granary._granary.LocalEpoch(b"\xff\xff not a pipeline", 0, 0)
        with self.assertRaises(granary.InvalidArgument):
            granary._granary.parse_pipeline_json("{not json")
        with self.assertRaises(TypeError):
            granary._granary.LocalEpoch(None, 0, 0)

    def test_wrong_argument_types(self):
        with self.assertRaises(TypeError):
            list(granary.local(granary.Dataset.range(10), seed="seven"))
        with self.assertRaises(TypeError):
            granary.local_digests(granary.Dataset.range(10), epochs=1, seed=-1)
        with self.assertRaises(granary.InvalidArgument) as raised:
            granary.load_plugin("/nonexistent/plugin.so")
        self.assertIn("/nonexistent/plugin.so", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
