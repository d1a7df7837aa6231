"""The Python examples run as docs/python.md says: quickstart.py in-process, against a cluster and
against `granary cluster` by its client configuration file (the README's Python quick start),
and train_resnet.py stopped after a checkpoint and resumed — every step of every epoch trained
once in all (12 batches an epoch, 2 epochs: 24 steps over both runs)."""

import os
import subprocess
import sys
import tempfile
import unittest

from cluster import BINARY, Cluster, ClusterCommand

SOURCE_DIR = os.environ.get("GRANARY_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
EXAMPLES = os.path.join(SOURCE_DIR, "examples", "python")


def run(argv):
    done = subprocess.run([sys.executable] + argv, capture_output=True, timeout=300)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


class ExamplesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data_root = tempfile.mkdtemp(prefix="granary-examples-")
        cls.data = os.path.join(cls.data_root, "imagenet")
        subprocess.run([BINARY, "datagen", "imagenet", f"--out={cls.data}", "--images=192",
                        "--files=4", "--size=16"], check=True, capture_output=True)
        cls.cluster = Cluster(workers=2, data_roots=cls.data_root).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
        subprocess.run(["rm", "-rf", cls.data_root], check=True)

    def test_quickstart(self):
        code, out, err = run([os.path.join(EXAMPLES, "quickstart.py")])
        self.assertEqual(code, 0, err)
        self.assertIn("local: 1000 rows", out)
        code, out, err = run([os.path.join(EXAMPLES, "quickstart.py"),
                              f"--dispatcher={self.cluster.address}", "--insecure"])
        self.assertEqual(code, 0, err)
        self.assertIn("service: 1000 rows over a resume", out)
        self.assertIn("exactly once", out)

    def test_quickstart_against_granary_cluster_by_its_config_file(self):
        # The README's Python quick start: `granary cluster` (the installed command), then the
        # example given the client configuration file the cluster wrote.
        with ClusterCommand(workers=2) as cluster:
            code, out, err = run([os.path.join(EXAMPLES, "quickstart.py"),
                                  f"--config={cluster.config}"])
        self.assertEqual(code, 0, err)
        self.assertIn("service: 1000 rows over a resume", out)
        self.assertIn("exactly once", out)

    def test_train_resnet_resumes_from_its_checkpoint(self):
        with tempfile.TemporaryDirectory() as tmp:
            argv = [os.path.join(EXAMPLES, "train_resnet.py"),
                    f"--dispatcher={self.cluster.address}", "--insecure", f"--data={self.data}",
                    f"--checkpoint={tmp}/ckpt.pt", "--batch_size=16", "--classes=10",
                    "--checkpoint_every=5", "--epochs=2"]
            code, out, err = run(argv + ["--max_steps=7"])
            self.assertEqual(code, 0, err)
            self.assertIn("step 5: loss", out)
            self.assertIn("stopping after 7 steps", out)
            code, out, err = run(argv)
            self.assertEqual(code, 0, err)
        self.assertIn("resumed at step 5: epoch 0", out)
        self.assertIn("done: 2 epochs, 24 steps", out)


if __name__ == "__main__":
    unittest.main()
