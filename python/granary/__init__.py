"""Granary for Python: pipelines built in Python, run in-process or by a Granary service, read
exactly once — every element of every epoch, through worker failures and trainer restarts.

    import granary
    ds = granary.Dataset.range(1000).shuffle(64).batch(32)
    for (values,) in granary.local(ds, epochs=1, seed=7):      # in this process
        ...
    client = granary.connect("127.0.0.1:5000")                 # or through the service
    job = client.open_job(ds, name="resnet", seed=7)
    reader = job.epoch(0)
    for (values,) in reader:                                   # NumPy arrays, no copy
        ...
    saved = reader.position()          # beside the model checkpoint; job.epoch(0, position=saved)
                                       # resumes exactly there

PyTorch: granary.torch.GranaryIterableDataset. Errors are granary.Error subclasses named after
the C++ status (granary.InvalidArgument, granary.Unavailable, ...) carrying its message.
"""

import json

from granary import _granary
from granary._granary import (  # noqa: F401 (re-exported)
    Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded, Digest, Element, Error,
    FailedPrecondition, Internal, InvalidArgument, NotFound, OutOfRange, PermissionDenied,
    ResourceExhausted, Unauthenticated, Unavailable, Unimplemented, Unknown, load_plugin)
from granary.dataset import Dataset

__all__ = ["Dataset", "Digest", "Element", "Error", "Client", "Job", "connect", "local",
           "local_digests", "auto_ordered", "load_plugin"]

_CACHE_POLICIES = ("compute", "full", "at_mark", "auto")


def local(dataset, epochs=1, seed=0, cache_policy="compute", first_epoch=0, auto_order=False):
    """Runs `dataset` in this process and yields every element of epochs first_epoch, ...,
    first_epoch + epochs - 1 in order, each as a tuple of NumPy arrays — what a service job
    with this seed and cache policy delivers (for debugging, and as the reference). With
    auto_order=True the pipeline runs reordered by AutoOrder, as the workers of a job opened
    with auto_order=True run it (the same elements: see auto_ordered)."""
    definition = _local_def(dataset, auto_order)
    for epoch in range(first_epoch, first_epoch + epochs):
        yield from _granary.LocalEpoch(definition, seed, epoch, cache_policy)


def local_digests(dataset, epochs=1, seed=0, cache_policy="compute", auto_order=False):
    """The digest lines `granary local --digest_out` writes: one dict per epoch with its
    "epoch", "elements" (rows), "multiset_xxh64" and "ordered_xxh64" (hex strings)."""
    definition = _local_def(dataset, auto_order)
    return [json.loads(_granary.local_digest_line(definition, seed, epoch, cache_policy))
            for epoch in range(epochs)]


def auto_ordered(dataset):
    """The order AutoOrder runs `dataset`'s ops in (`granary local --auto_order` prints it):
    ops by UDF name, a moved one with its index as written, e.g. "parse_example decode_jpeg
    random_crop(op 4) normalize(op 3) batch". AutoOrder swaps map ops only where no output
    byte changes, putting those that shrink an element first (measured on its first split, in
    this process)."""
    return _granary.auto_order(dataset.pipeline_def())[1]


def _local_def(dataset, auto_order):
    if auto_order:
        return _granary.auto_order(dataset.pipeline_def())[0]
    return dataset.pipeline_def()


class Job:
    """A job of the service: read its epochs with epoch()."""

    def __init__(self, job, dataset):
        self._job = job
        self._dataset = dataset

    @property
    def job_id(self):
        return self._job.job_id

    @property
    def dataset(self):
        return self._dataset

    def scale(self, num_worker_slots, reason="", num_local_slots=None):
        """Sets the job's remote tasks per consumer (and, with num_local_slots, its local ones)
        — for its running epoch (tasks join on more workers, or the newest are shed) and the
        epochs after; every element still arrives exactly once. Returns the running epoch's
        tasks per consumer after the step."""
        return self._job.scale(num_worker_slots, reason,
                               -1 if num_local_slots is None else num_local_slots)

    def epoch(self, epoch, consumer=0, position=None, digest=False):
        """Starts epoch `epoch` (idempotently: every consumer may) and reads it as `consumer`:
        an EpochReader, iterating tuples of NumPy arrays that view the received bytes.
        `position` (an earlier reader's position()) resumes exactly where it stood. With
        digest=True the reader fingerprints what it delivers (reader.digest)."""
        return self._job.read_epoch(epoch, consumer, position or b"",
                                    self._dataset.batched if digest else None)


class Client:
    """A connection to a Granary dispatcher (see connect())."""

    def __init__(self, client):
        self._client = client

    def open_job(self, dataset, name="", seed=0, num_consumers=1, num_worker_slots=0,
                 num_epochs=0, cache_policy="compute", compression="none", readers=(),
                 autoscale="none", local_workers=0, placement="static", owner="",
                 sharding="auto", remainder="pad", resume_epoch=0, resume_positions=(),
                 takeover=False, auto_order=False, tail="auto"):
        """Registers `dataset` and opens a job of it. Jobs with the same non-empty `name` are
        shared: every consumer (trainer process) of a job opens it by name. Names are per owner
        when the cluster authenticates clients: `name` opens (or creates) this client's own job;
        with `owner`, another client's id, it opens the job of that name that client shared with
        this one (its `readers` name this client). Opening an existing job, every option but
        `compression` (and `local_workers` with a placement policy) must be what it was created
        with, or InvalidArgument names the option and both values.

        num_consumers: trainer processes the epochs are divided among. num_worker_slots: tasks
        per consumer (0: one per live worker). cache_policy: "compute", "full", "at_mark" or "auto".
        compression: "none", "lz4" or "zstd" for workers on other hosts. readers: other clients
        that may read the job (when the cluster authenticates clients). autoscale: "none",
        "cachew" or "model" — the dispatcher sets the job's workers from the measured rates.
        local_workers: worker processes this client starts on its host for each consumer it
        reads (the `granary` binary: $GRANARY_BINARY or on $PATH), serving only it through shared
        memory; they stop with the job. placement: "static" (each local worker runs a task),
        "pecan" or "auto" — the dispatcher places the job's local and remote workers.
        sharding: "equal" (the default for several consumers) — each consumer reads its own
        share of every epoch and all deliver as many elements (as DistributedDataParallel
        needs), "dynamic" (the default for one) — the fastest reader takes the most, or "auto".
        remainder (equal shares): "pad" — consumers with fewer elements deliver copies of their
        last, marked padding (reader.last_padding), up to the most any has; "drop" — consumers
        with more drop the surplus (reader.stats["remainder_dropped"]); "uneven" — neither.
        resume_epoch, resume_positions (elastic resume): to open an existing job at another
        num_consumers than it has, the position() every one of its consumers saved in epoch
        resume_epoch, by consumer (None or b"" for one that had delivered nothing of it): the
        rest of that epoch is dealt to the num_consumers new consumers, and later epochs run at
        num_consumers.
        takeover: one reader per consumer — reading a consumer another live reader holds raises
        FailedPrecondition naming it (one that looks gone, e.g. this trainer's crashed
        predecessor, is waited for until its lease expires); with takeover=True this job's first
        read of each consumer takes it even from a live reader, whose next read then raises
        Aborted (it is fenced) — for a trainer restarted elsewhere while the old one may run.
        auto_order: the workers run the pipeline reordered by AutoOrder
        (pipeline/optimizer/auto_order.h; `granary run --auto_order`) — map ops swapped where
        that changes no output byte, shrinking ones first; the elements are those of the
        pipeline as written.
        tail: where the pipeline's last normalize ops run when only batch and prefetch follow
        them (its trainer-side tail) — "auto": in this client for tasks it reads over TCP, so
        workers send uint8 images (a quarter of the bytes), on the workers for shared memory;
        "worker" or "client": always there. The elements are byte-identical either way
        (reader.stats["trainer_tail_elements"] counts those normalized here)."""
        if cache_policy not in _CACHE_POLICIES:
            raise InvalidArgument(
                f"cache_policy {cache_policy!r} is none of {', '.join(_CACHE_POLICIES)}")
        dataset_id = self._client.register_pipeline(dataset.pipeline_def())
        return Job(self._client.open_job(dataset_id, name, seed, num_consumers,
                                         num_worker_slots, num_epochs, cache_policy,
                                         compression, list(readers), autoscale,
                                         local_workers, placement, owner, sharding,
                                         remainder, resume_epoch,
                                         [p or b"" for p in resume_positions], takeover,
                                         auto_order, tail),
                   dataset)


def connect(address=None, tls_ca=None, tls_cert=None, tls_key=None, token=None, insecure=None,
            shared_memory=True, stall_timeout_ms=60000, rpc_timeout_ms=10000,
            local_worker_flags=(), config=None):
    """Connects to the dispatcher at `address` ("host:port").

    TLS (SECURITY.md): tls_ca (the cluster CA's PEM file) with tls_cert and tls_key (this
    client's certificate, naming it granary://client/<name>), or with a bearer `token`. Without
    any of them the connection is plain text (insecure=True), which a TLS cluster refuses.
    config: a client configuration file (`granary cluster` writes <dir>/client.json; JSON with
    "dispatcher", "tls_ca", "tls_cert", "tls_key", "token_file", "insecure") giving what the
    keywords leave unset — then `address` may be omitted, and the keywords given override it.
    shared_memory: read elements of workers on this host through shared memory (mapped, not
    copied). local_worker_flags: more flags for the local workers of open_job(local_workers=)
    (in a TLS cluster a worker certificate; --data_roots for file sources). Raises
    granary.Unavailable if the dispatcher does not answer, granary.FailedPrecondition or
    granary.Unauthenticated (within a second) if its transport security does not match."""
    if insecure is None:
        # With a config file, the file says (unless TLS keywords are given).
        insecure = config is None and not (tls_ca or tls_cert or tls_key or token)
    return Client(_granary.Client(address or "", tls_ca or "", tls_cert or "", tls_key or "",
                                  token or "", insecure, shared_memory, stall_timeout_ms,
                                  rpc_timeout_ms, list(local_worker_flags), config or ""))
