"""Issue 30, connecting from Python to a TLS `granary cluster` (real processes): the client
configuration file the cluster writes is all granary.connect needs; keywords given override it;
a bad file is an error naming the file and the field; a transport-security mismatch is told at
once naming the keyword to pass; and errors name Python's keywords, not the command line's
flags."""

import json
import os
import time
import unittest

import granary
from cluster import ClusterCommand
from pipelines import assert_local_digest, range_pipeline


class ConnectTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = ClusterCommand(workers=1).__enter__()
        cls.dir = cls.cluster.dir
        cls.config = cls.cluster.config

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)

    def write(self, name, content):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(content)
        return path

    def test_the_config_file_alone_reaches_the_tls_cluster(self):
        with open(self.config) as f:
            config = json.load(f)
        self.assertEqual(sorted(config), ["dispatcher", "tls_ca", "tls_cert", "tls_key"])
        seed = 3
        job = granary.connect(config=self.config).open_job(range_pipeline(), seed=seed)
        reader = job.epoch(0, digest=True)
        for _ in reader:
            pass
        assert_local_digest(self, reader.digest["multiset"], seed)

    def test_keywords_override_the_file(self):
        with open(self.config) as f:
            address = json.load(f)["dispatcher"]
        # An explicit address wins over the file's: nothing listens at port 1.
        with self.assertRaisesRegex(granary.Unavailable, "dispatcher 127.0.0.1:1 is not reachable"):
            granary.connect("127.0.0.1:1", config=self.config, rpc_timeout_ms=300)
        # insecure=True wins over the file's TLS files: and the dispatcher speaks TLS, which the
        # client is told at once, naming the keyword to pass.
        start = time.monotonic()
        with self.assertRaises(granary.FailedPrecondition) as caught:
            granary.connect(config=self.config, insecure=True)
        self.assertLess(time.monotonic() - start, 2.0)
        message = str(caught.exception)
        self.assertIn(f"the dispatcher at {address} speaks TLS and this client plain text", message)
        self.assertIn("pass tls_ca ", message)

    def test_a_bad_config_file_names_the_file_and_the_field(self):
        unknown = self.write("unknown.json", '{"dispatcher": "127.0.0.1:1", "tls_cs": "ca.crt"}')
        with self.assertRaises(granary.InvalidArgument) as caught:
            granary.connect(config=unknown)
        self.assertIn(f"client config {unknown}", str(caught.exception))
        self.assertIn("tls_cs", str(caught.exception))
        missing = self.write("missing.json", '{"dispatcher": "127.0.0.1:1", "tls_ca": "no.crt"}')
        with self.assertRaises(granary.NotFound) as caught:
            granary.connect(config=missing)
        self.assertIn(f"client config {missing}: field tls_ca", str(caught.exception))
        both = self.write("both.json", '{"dispatcher": "127.0.0.1:1", "insecure": true, '
                                       '"tls_ca": "ca.crt"}')
        with self.assertRaisesRegex(granary.InvalidArgument,
                                    f"client config {both}: field insecure is set with TLS"):
            granary.connect(config=both)

    def test_errors_name_the_python_keywords(self):
        with self.assertRaises(granary.InvalidArgument) as caught:
            granary.connect("127.0.0.1:1", tls_ca="ca.crt", tls_cert="client.crt")
        self.assertEqual(str(caught.exception), "tls_cert and tls_key go together: give both")
        with self.assertRaises(granary.InvalidArgument) as caught:
            granary.connect("127.0.0.1:1", token="t" * 20, insecure=True)
        self.assertEqual(str(caught.exception), "token is never sent in plain text (insecure=True)")
        with self.assertRaises(granary.InvalidArgument) as caught:
            granary.connect()
        self.assertEqual(str(caught.exception), "address is empty")


if __name__ == "__main__":
    unittest.main()
