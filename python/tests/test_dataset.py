"""granary.Dataset: the Python builder makes the PipelineDefs of the JSON pipeline files, is
immutable, round-trips through JSON, and refuses bad input with the C++ message."""

import os
import tempfile
import unittest

import granary

SOURCE_DIR = os.environ.get("GRANARY_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))


def example(name):
    return os.path.join(SOURCE_DIR, "examples", name)


class BuilderMatchesJsonTest(unittest.TestCase):
    def test_imagenet_example(self):
        os.environ["GRANARY_DATA"] = "/data/imagenet"
        built = (granary.Dataset.tfrecord(["/data/imagenet/*.tfrecord"], shuffle_splits=True)
                 .shuffle(256)
                 .map("parse_example", keys=["image/encoded", "image/class/label"],
                      dtypes=["bytes", "int64"], num_threads=2)
                 .map("decode_jpeg", num_threads=2)
                 .mark("decoded")
                 .map("random_crop", fraction=0.875, num_threads=2)
                 .map("random_flip")
                 .map("normalize", mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225],
                      num_threads=2)
                 .batch(32, drop_remainder=False)
                 .prefetch(2))
        from_file = granary.Dataset.from_json(example("imagenet_resnet.json"))
        self.assertEqual(built.pipeline_def(), from_file.pipeline_def(),
                         f"\nbuilt: {built.to_json()}\nfile: {from_file.to_json()}")
        self.assertTrue(built.batched)

    def test_text_lines_example(self):
        built = (granary.Dataset.text_lines(["examples/data/*.txt"], lines_per_split=4,
                                            shuffle_splits=True)
                 .filter("non_empty").shuffle(8).batch(4))
        self.assertEqual(built, granary.Dataset.from_json(example("text_lines.json")))


class DatasetTest(unittest.TestCase):
    def test_is_immutable_and_shares_prefixes(self):
        base = granary.Dataset.range(100)
        a = base.batch(10)
        b = base.shuffle(8)
        self.assertNotEqual(a, b)
        self.assertEqual(base, granary.Dataset.range(100))
        self.assertFalse(base.batched)
        self.assertTrue(a.batched)
        self.assertEqual(repr(b.batch(2)), "Dataset(range -> shuffle -> batch)")

    def test_json_round_trip(self):
        ds = granary.Dataset.range(50, elements_per_split=5).shuffle(4, seed=3).take(20).batch(5)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(ds.to_json())
        try:
            self.assertEqual(granary.Dataset.from_json(f.name), ds)
        finally:
            os.unlink(f.name)


class BadInputTest(unittest.TestCase):
    def test_unknown_udf_names_it(self):
        with self.assertRaises(granary.InvalidArgument) as raised:
            granary.Dataset.range(10).map("decode_jpge")
        self.assertIn("unknown UDF", str(raised.exception))
        self.assertIn("decode_jpge", str(raised.exception))
        self.assertIsInstance(raised.exception, ValueError)

    def test_wrong_types_name_the_param(self):
        with self.assertRaises(granary.InvalidArgument) as raised:
            granary.Dataset.range(10).batch("x")
        self.assertIn("batch_size", str(raised.exception))
        with self.assertRaises(granary.InvalidArgument):
            granary.Dataset.range(10).map(123)
        with self.assertRaises(granary.InvalidArgument):
            granary.Dataset.range(10).shuffle(-1)
        with self.assertRaises(granary.InvalidArgument):
            granary.Dataset.range(10).map("random_crop", height="tall")
        with self.assertRaises(TypeError):
            granary.Dataset.range(10).map("random_flip", bogus=object())

    def test_missing_pipeline_file_is_not_found(self):
        with self.assertRaises(granary.NotFound) as raised:
            granary.Dataset.from_json("/nonexistent/pipeline.json")
        self.assertIn("/nonexistent/pipeline.json", str(raised.exception))

    def test_errors_are_granary_errors(self):
        for cls in (granary.InvalidArgument, granary.NotFound, granary.Unavailable,
                    granary.DataLoss, granary.PermissionDenied):
            self.assertTrue(issubclass(cls, granary.Error), cls)


if __name__ == "__main__":
    unittest.main()
