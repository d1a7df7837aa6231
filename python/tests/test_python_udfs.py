"""Python functions as UDFs (Dataset.map(fn), filter(fn)): granary.local runs them in helper
processes of its own interpreter and matches the built-in UDFs they imitate; a cluster of real
workers started with --allow_python_udfs delivers exactly what granary.local does; a worker
without the flag refuses them; the function's exceptions, timeouts, unpicklable closures and
size reach the user as errors naming the cause."""

import os
import subprocess
import threading
import time
import unittest

import numpy as np

import granary
from cluster import BINARY, ClusterCommand, ClusterTestCase


def plus_one(x):
    return x + 1


def is_one_modulo_3(x):
    return x % 3 == 1


def jitter(x, rng):
    """x plus a draw of the element's rng: the same for the element in every run of the seed."""
    return x + rng.integers(0, 1000)


def numbered_pipeline(size=2000):
    """Shuffled batches of int64 ids through a filter, a map and a parallel_map of Python
    functions (one drawing from rng): enough splits for two workers."""
    return (granary.Dataset.range(size, elements_per_split=100, shuffle_splits=True)
            .shuffle(32).filter(is_one_modulo_3).map(jitter)
            .map(plus_one, num_threads=2).batch(10))


def local_rows(dataset, seed):
    """granary.local's elements of epoch 0 as lists of (dtype, shape, bytes or value) per
    component: equal lists, identical bytes."""
    rows = []
    for arrays in granary.local(dataset, seed=seed):
        rows.append([(a.dtype.str, a.shape, a.tobytes() if a.dtype != object else a.tolist())
                     for a in arrays])
    return rows


class LocalTest(unittest.TestCase):
    """granary.local: the functions run in helpers of this interpreter."""

    def assert_same_digests(self, python, builtin, seed):
        self.assertEqual(granary.local_digests(python, 2, seed),
                         granary.local_digests(builtin, 2, seed), f"seed {seed}")

    def test_map_equals_the_builtin_add(self):
        base = granary.Dataset.range(300, elements_per_split=30, shuffle_splits=True).shuffle(16)
        self.assert_same_digests(base.map(lambda x: x + 1).batch(8),
                                 base.map("add", value=1).batch(8), seed=3)

    def test_parallel_map_equals_the_builtin_add(self):
        base = granary.Dataset.range(300, elements_per_split=30, shuffle_splits=True).shuffle(16)
        self.assert_same_digests(base.map(plus_one, num_threads=2).batch(8),
                                 base.map("add", value=1, num_threads=2).batch(8), seed=4)

    def test_filter_equals_the_builtin_modulo(self):
        base = granary.Dataset.range(300, elements_per_split=30, shuffle_splits=True).shuffle(16)
        self.assert_same_digests(base.filter(is_one_modulo_3).batch(8),
                                 base.filter("modulo", modulus=3, remainder=1).batch(8), seed=5)

    def test_rng_is_keyed_by_the_seed_and_the_element(self):
        ds = granary.Dataset.range(200, elements_per_split=20).map(jitter)
        first = local_rows(ds, seed=11)
        self.assertEqual(first, local_rows(ds, seed=11), "seed 11 twice")
        self.assertNotEqual(first, local_rows(ds, seed=12), "seeds 11 and 12")
        values = [int(np.frombuffer(row[0][2], "<i8")[0]) for row in first]
        offsets = [v - i for i, v in enumerate(values)]
        self.assertTrue(all(0 <= o < 1000 for o in offsets), f"seed 11: {offsets}")
        self.assertGreater(len(set(offsets)), 100, f"seed 11: the draws barely differ: {offsets}")

    def test_a_tuple_of_arrays_and_bytes(self):
        ds = granary.Dataset.range(5).map(
            lambda x: (x, np.full((2, 3), x, dtype=np.float32), b"id-%d" % x, "text"))
        elements = list(granary.local(ds, seed=1))
        self.assertEqual(len(elements), 5)
        for i, (x, matrix, name, text) in enumerate(elements):
            self.assertEqual((x.dtype, x.shape, int(x)), (np.dtype(np.int64), (), i))
            self.assertEqual(matrix.dtype, np.float32)
            np.testing.assert_array_equal(matrix, np.full((2, 3), i, dtype=np.float32))
            self.assertEqual(name.item(), b"id-%d" % i)
            self.assertEqual(text.item(), b"text")

    def test_a_filter_sees_bytes_as_bytes(self):
        ds = (granary.Dataset.range(6).map(lambda x: b"x" * int(x))
              .filter(lambda s: isinstance(s, bytes) and len(s) % 2 == 0))
        self.assertEqual([a[0].item() for a in granary.local(ds)], [b"", b"xx", b"xxxx"])


class ErrorTest(unittest.TestCase):
    """What goes wrong in a function reaches granary.local's caller, naming op, split, record."""

    @staticmethod
    def failing_at_7(x):
        if x == 7:
            raise ValueError(f"no sevens here (got {int(x)})")
        return x

    def test_an_exception_names_the_op_split_record_and_traceback(self):
        ds = granary.Dataset.range(20, elements_per_split=5).map(self.failing_at_7)
        with self.assertRaises(granary.InvalidArgument) as raised:
            list(granary.local(ds))
        message = str(raised.exception)
        self.assertIn("op 0 (map, udf 'python')", message)
        self.assertIn("at split 1 record 7:", message)  # range's records are its values
        self.assertIn("ValueError: no sevens here (got 7)", message)
        self.assertIn("Traceback", message)

    def test_ignore_errors_skips_the_failing_element(self):
        ds = granary.Dataset.range(20, elements_per_split=5).map(self.failing_at_7)
        values = [int(a[0]) for a in granary.local(ds.ignore_errors())]
        self.assertEqual(values, [v for v in range(20) if v != 7])

    def test_a_function_that_is_not_deterministic_is_caught_and_not_skipped(self):
        def unseeded(x):
            return x + np.random.default_rng().integers(1 << 40)

        ds = granary.Dataset.range(20, elements_per_split=5).map(unseeded)
        for pipeline in (ds, ds.ignore_errors()):
            with self.assertRaises(granary.FailedPrecondition) as raised:
                list(granary.local(pipeline))
            message = str(raised.exception)
            self.assertIn("op 0 (map, udf 'python')", message)
            self.assertIn("not deterministic", message)
        # The check off, it runs.
        unchecked = granary.Dataset.range(20, elements_per_split=5).map(
            unseeded, determinism_check_every=0)
        self.assertEqual(len(list(granary.local(unchecked))), 20)

    def test_a_call_longer_than_timeout_ms_is_deadline_exceeded(self):
        def slow(x):
            time.sleep(30)
            return x

        ds = granary.Dataset.range(3).map(slow, timeout_ms=300)
        started = time.monotonic()
        with self.assertRaises(granary.DeadlineExceeded) as raised:
            list(granary.local(ds))
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, 10, "the call was not cut off at its timeout")
        self.assertIn("op 0 (map, udf 'python')", str(raised.exception))


class BadInputTest(unittest.TestCase):
    """Mistakes in map(fn)/filter(fn) are refused when the Dataset is built, naming them."""

    def test_udf_params_with_a_function(self):
        with self.assertRaises(granary.InvalidArgument) as raised:
            granary.Dataset.range(10).map(plus_one, some_param=1)
        self.assertIn("a Python function takes no UDF params (some_param)", str(raised.exception))
        with self.assertRaises(granary.InvalidArgument):
            granary.Dataset.range(10).filter(is_one_modulo_3, modulus=3)

    def test_timeout_ms_with_a_udf_name(self):
        for build in (lambda ds: ds.map("add", value=1, timeout_ms=5),
                      lambda ds: ds.filter("modulo", modulus=3, remainder=1, timeout_ms=5)):
            with self.assertRaises(granary.InvalidArgument) as raised:
                build(granary.Dataset.range(10))
            self.assertIn("timeout_ms is for Python functions", str(raised.exception))

    def test_timeout_ms_out_of_range(self):
        for timeout_ms in (0, -5, 3_600_001):
            with self.assertRaises(granary.InvalidArgument) as raised:
                granary.Dataset.range(10).map(plus_one, timeout_ms=timeout_ms)
            self.assertIn("timeout_ms", str(raised.exception), f"timeout_ms={timeout_ms}")

    def test_a_function_closing_over_a_lock_does_not_pickle(self):
        lock = threading.Lock()

        def locked_plus_one(x):
            with lock:
                return x + 1

        with self.assertRaises(granary.InvalidArgument) as raised:
            granary.Dataset.range(10).map(locked_plus_one)
        message = str(raised.exception)
        self.assertIn("locked_plus_one could not be pickled", message)
        self.assertIn("lock", message.split("(cloudpickle): ", 1)[1])  # why: the lock


class ServiceTest(ClusterTestCase):
    """Through a dispatcher and two workers that allow Python UDFs."""

    cluster_options = {"worker_flags": ["--allow_python_udfs"]}

    def read_digest(self, dataset, seed, name):
        job = granary.connect(self.cluster.address).open_job(dataset, name=name, seed=seed)
        reader = job.epoch(0, digest=True)
        for _ in reader:
            pass
        return reader.digest

    def test_the_service_delivers_what_granary_local_does(self):
        seed = 7
        digest = self.read_digest(numbered_pipeline(), seed, "python-udfs")
        expected = granary.local_digests(numbered_pipeline(), 1, seed)[0]
        self.assertEqual(digest["rows"], expected["elements"], f"seed {seed}")
        self.assertEqual(f"{digest['multiset']:016x}", expected["multiset_xxh64"], f"seed {seed}")

    def test_what_a_function_prints_goes_to_the_worker_log(self):
        def shout(x):
            print(f"python udf saw {int(x)}")
            return x

        dataset = granary.Dataset.range(40, elements_per_split=10).map(shout).batch(10)
        self.assertEqual(self.read_digest(dataset, 1, "printing")["rows"], 40)
        logs = ""
        for i in range(len(self.cluster.worker_processes)):
            with open(f"{self.cluster.dir}/worker-{i}.log") as f:
                logs += f.read()
        for value in range(40):
            self.assertIn(f"python udf saw {value}\n", logs)

    def test_the_helpers_stay_warm_from_one_epoch_to_the_next(self):
        # Each element becomes the pid of the helper process that computed it. A worker keeps
        # a pipeline no task runs for --idle_pipeline_ms (60 s), and with it its helpers: the
        # next epoch's tasks use them instead of starting (and importing) afresh. Of 3 epochs
        # on 2 workers, some worker computes in two: one of its helpers then serves both.
        def helper_pid(x):
            return np.int64(os.getpid())

        dataset = (granary.Dataset.range(40, elements_per_split=10)
                   .map(helper_pid, determinism_check_every=0).batch(10))
        job = granary.connect(self.cluster.address).open_job(dataset, name="helper-pids", seed=1)
        epochs = []
        for epoch in range(3):
            if epoch > 0:
                time.sleep(1)  # heartbeats (every 200 ms) drop the epoch's finished tasks
            epochs.append({int(pid) for (batch,) in job.epoch(epoch) for pid in batch})
        reused = set.union(*[a & b for i, a in enumerate(epochs) for b in epochs[i + 1:]])
        self.assertTrue(reused, f"helpers by epoch: {[sorted(e) for e in epochs]}")

class ClusterCommandTest(unittest.TestCase):
    """`granary cluster --allow_python_udfs`: mutual TLS, so the dispatcher registers Python
    functions only for granted clients — and the cluster grants its own client."""

    def test_the_clusters_own_client_runs_python_functions(self):
        with ClusterCommand(workers=1, cluster_flags=["--allow_python_udfs"]) as cluster:
            client = granary.connect(config=cluster.config)
            seed = 3
            dataset = numbered_pipeline(200)
            reader = client.open_job(dataset, name="granted", seed=seed).epoch(0, digest=True)
            for _ in reader:
                pass
            expected = granary.local_digests(numbered_pipeline(200), 1, seed)[0]
            self.assertEqual(reader.digest["rows"], expected["elements"], f"seed {seed}")
            self.assertEqual(f"{reader.digest['multiset']:016x}", expected["multiset_xxh64"],
                             f"seed {seed}")

    def test_allow_python_udfs_after_the_double_dash_is_refused_naming_the_way(self):
        # As a worker flag the workers would run Python functions the dispatcher grants nobody.
        for spelling in ("--allow_python_udfs", "--allow_python_udfs=1", "-allow_python_udfs"):
            done = subprocess.run([BINARY, "cluster", "--workers=1", "--dir=/nonexistent/x",
                                   "--", spelling], capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 2, spelling + done.stderr)
            self.assertIn(f"'{spelling}' after --: give --allow_python_udfs to granary cluster "
                          "itself", done.stderr)


class RefusalTest(ClusterTestCase):
    """A dispatcher bounding pipelines to 1 MiB, and a worker without --allow_python_udfs."""

    MAX_PIPELINE_BYTES = 1 << 20
    cluster_options = {"workers": 1,
                       "dispatcher_flags": [f"--max_pipeline_bytes={MAX_PIPELINE_BYTES}"]}

    def test_a_worker_without_the_flag_refuses_python_functions_and_runs_other_jobs(self):
        # The worker cannot build the task's pipeline (PermissionDenied naming the flag): the
        # task does not run there, and its reader — which waits, as another worker may take the
        # task — is told why once its stall timeout passes. The worker's other jobs run.
        dataset = granary.Dataset.range(100, elements_per_split=50).map(plus_one).batch(10)
        client = granary.connect(self.cluster.address, stall_timeout_ms=2000)
        reader = client.open_job(dataset, name="refused", seed=1).epoch(0)
        started = time.monotonic()
        with self.assertRaises(granary.Unavailable) as raised:
            next(reader)
        self.assertLess(time.monotonic() - started, 30)
        self.assertIn("no worker answered for 2000 ms", str(raised.exception))
        self.assertIn("cannot run on worker worker-0", str(raised.exception))
        self.assertIn("start the worker with --allow_python_udfs", str(raised.exception))
        with open(f"{self.cluster.dir}/worker-0.log") as f:
            log = f.read()
        self.assertIn("start the worker with --allow_python_udfs", log)
        # The refused job's task stays assigned to the worker; a job it can run runs beside it
        # (a refused pipeline once ended the worker's heartbeat before the tasks after it).
        plain = granary.Dataset.range(100, elements_per_split=50).batch(10)
        rows = sum(len(values) for (values,) in
                   client.open_job(plain, name="plain", seed=1).epoch(0))
        self.assertEqual(rows, 100)

    def test_the_function_counts_in_the_pipeline_size(self):
        table = np.random.default_rng(35).integers(0, 255, size=2 << 20, dtype=np.uint8)

        def look_up(x):
            return table[int(x) % len(table)]

        client = granary.connect(self.cluster.address)
        with self.assertRaises(granary.ResourceExhausted) as raised:
            client.open_job(granary.Dataset.range(10).map(look_up), name="big")
        self.assertRegex(str(raised.exception),
                         rf"the pipeline has \d+ bytes; the limit is {self.MAX_PIPELINE_BYTES} "
                         r"\(--max_pipeline_bytes\)")
        # The same pipeline with a small function is within the limit.
        client.open_job(granary.Dataset.range(10).map(plus_one), name="small")


if __name__ == "__main__":
    unittest.main()
