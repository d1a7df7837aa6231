"""Granary clusters of real processes on loopback for the Python tests, started from the
`granary` binary (GRANARY_BINARY) and stopped (by pid) when the `with` block ends: Cluster, a
dispatcher and workers in plain text; ClusterCommand, `granary cluster` (mutual TLS, a throwaway
CA), as a user starts one."""

import os
import shutil
import signal
import subprocess
import tempfile
import unittest

BINARY = os.environ.get("GRANARY_BINARY", "granary")
LISTENING_ON = " listening on "


def _start(argv, log_path):
    with open(log_path, "wb") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log)
    line = process.stdout.readline().decode()
    if LISTENING_ON not in line:
        process.kill()
        process.wait()
        with open(log_path, "rb") as f:
            raise RuntimeError(f"{' '.join(argv)} did not start: {line!r}\n{f.read().decode()[-2000:]}")
    return process, line.strip().rsplit(LISTENING_ON, 1)[1]


class Cluster:
    def __init__(self, workers=2, data_roots=None, worker_flags=(), dispatcher_flags=()):
        self.dir = tempfile.mkdtemp(prefix="granary-python-test-")
        self._workers = workers
        self._data_roots = data_roots
        self._worker_flags = list(worker_flags)
        self._dispatcher_flags = list(dispatcher_flags)
        self._processes = []
        self.worker_processes = []

    def __enter__(self):
        try:
            roots = [f"--data_roots={self._data_roots}"] if self._data_roots else []
            dispatcher, self.address = _start(
                [BINARY, "dispatcher", f"--journal_dir={self.dir}/journal",
                 f"--cache_root={self.dir}/cache", "--port=0", "--insecure",
                 "--worker_timeout_ms=2000"] + roots + self._dispatcher_flags,
                f"{self.dir}/dispatcher.log")
            self._processes.append(dispatcher)
            for i in range(self._workers):
                worker, _ = _start(
                    [BINARY, "worker", f"--dispatcher={self.address}", f"--worker_id=worker-{i}",
                     "--port=0", "--insecure"] + roots + self._worker_flags,
                    f"{self.dir}/worker-{i}.log")
                self._processes.append(worker)
                self.worker_processes.append(worker)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for process in reversed(self._processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self._processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            process.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return False


class ClusterCommand:
    """`granary cluster --workers N --dir D [CLUSTER_FLAGS]`, waited for until it is ready;
    self.config is the client configuration file it wrote (what granary.connect(config=...)
    takes)."""

    CONFIG_LINE = "client config: "

    def __init__(self, workers=1, cluster_flags=()):
        self.dir = tempfile.mkdtemp(prefix="granary-python-cluster-")
        self._workers = workers
        self._cluster_flags = list(cluster_flags)
        self._log = None
        self._process = None
        self.config = None

    def __enter__(self):
        self._log = open(os.path.join(self.dir, "cluster.log"), "wb")
        self._process = subprocess.Popen(
            [BINARY, "cluster", f"--workers={self._workers}", f"--dir={self.dir}/cluster"] +
            self._cluster_flags,
            stdout=subprocess.PIPE, stderr=self._log)
        output = []
        for line in self._process.stdout:
            line = line.decode().rstrip("\n")
            output.append(line)
            if line.startswith(self.CONFIG_LINE):
                self.config = line[len(self.CONFIG_LINE):].split(" ", 1)[0]
            if line.startswith("cluster ready"):
                break
        if self.config is None:
            self.__exit__(None, None, None)
            raise RuntimeError("granary cluster printed no client config:\n" + "\n".join(output))
        return self

    def __exit__(self, *exc):
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process.stdout.close()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return False


class ClusterTestCase(unittest.TestCase):
    """A TestCase whose tests share one Cluster, self.cluster, started before the first and
    stopped after the last: of two workers, or as cluster_options (Cluster's keywords) say."""

    cluster_options = {}

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(**{"workers": 2, **cls.cluster_options}).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
