"""granary.torch: Granary as a PyTorch dataset, resumable exactly once.

    ds = granary.torch.GranaryIterableDataset(pipeline, dispatcher="host:5000",
                                             job_name="resnet", seed=7)
    loader = granary.torch.DataLoader(ds)   # torch's, with batch_size=None, num_workers=0
    for step, (images, labels) in enumerate(loader):        # torch.Tensors, no copy
        ...
        if step % 500 == 0:
            torch.save({"model": model.state_dict(), "data": ds.state_dict()}, "ckpt.pt")
    # After a crash: ds.load_state_dict(torch.load("ckpt.pt")["data"]) and iterate again — the
    # epoch resumes right after the last element the saved state had delivered: none skipped,
    # none repeated.

state_dict() holds plain types only (the reader's position as a base64 string): JSON,
torch.save, torchdata's StatefulDataLoader or any checkpointing library stores it.
load_state_dict() also takes the states of the version before, whose position was bytes.

Each iteration of the dataset reads one epoch (the next one: 0, 1, 2, ...). Under
torch.distributed, each rank reads its share as consumer `rank` of `world_size` (the job is
shared by name), and every rank gets as many batches per epoch (sharding "equal", the default
for several consumers), so DistributedDataParallel's ranks take the same number of steps. What
happens to the difference between ranks is `remainder`: "pad" (the default, as
DistributedSampler) — a rank with fewer batches repeats its last one, and `last_was_padding` is
True for such a copy (mask it, or ignore it); "drop" — a rank with more drops the surplus
(drop_last); "uneven" — neither.
The pipeline batches: read the dataset with granary.torch.DataLoader, torch's DataLoader with
batch_size=None (and num_workers=0). torch's DataLoader batching again (its default batch_size=1
would stack each batch into a batch of one, adding a dimension) is refused with InvalidArgument
at the first batch. len() is a TypeError, as for any IterableDataset of unknown length: an
epoch's length is known only once it is read (a filter may drop any number of elements).
One process reads each rank's consumer: a second one is refused (FailedPrecondition naming the
first); a rank restarted while its predecessor may still run passes takeover=True, which fences
the predecessor (its next read raises Aborted).
num_workers must be 0: the Granary workers are the loader's workers, and the client's reader runs
on its own threads.

`stats` is the reader's stats of the epoch being read or read last ("padding",
"remainder_dropped", ...); with digest=True, `digest` fingerprints what this process delivered of
it and what the remainder rule dropped (e.g. to check that the ranks' shares add up to the epoch).

The tensors view the bytes the batch arrived in (a receive buffer, or a worker's shared-memory
segment mapped copy-on-write): they are valid for as long as they are referenced, and may be
written in place (`labels.add_(1)`, `images[:, 0] = 0`) — a write stays in this process and never
reaches the worker.
"""

import base64
import binascii
import sys

import torch
import torch.utils.data

import granary
from granary import _granary

__all__ = ["DataLoader", "GranaryIterableDataset", "as_tensors", "images_and_labels"]


def as_tensors(arrays):
    """A tuple of NumPy arrays as a tuple of torch.Tensors sharing their memory (no copy)."""
    return tuple(torch.from_numpy(array) for array in arrays)


def images_and_labels(batch, image_index=0, label_index=1, channels_first=True):
    """What a training step wants from a batch of an image pipeline: the images [B, H, W, C]
    as [B, C, H, W] (a view, no copy) unless channels_first is False, and the labels [B, 1] (or
    [B]) as a flat int64 vector [B]."""
    images = batch[image_index]
    if channels_first and images.dim() == 4:
        images = images.permute(0, 3, 1, 2)
    labels = batch[label_index].reshape(-1)
    if labels.dtype != torch.int64:
        labels = labels.to(torch.int64)
    return images, labels


def _batched_again_by_caller(dataset):
    """Whether what iterates `dataset` — found from the frame that called next() on the
    iterator __iter__ returned — is a torch DataLoader's fetcher with automatic batching on
    (torch's _IterableDatasetFetcher, whose `auto_collation` says so). False for any other
    caller, and if torch's internals change."""
    caller = sys._getframe(1).f_back  # frame 1: __iter__'s generator; its f_back: next()'s caller
    fetcher = caller.f_locals.get("self") if caller is not None else None
    return (getattr(fetcher, "dataset", None) is dataset
            and getattr(fetcher, "auto_collation", False) is True)


def _encode_position(position):
    """A reader's position() (bytes, or None at an epoch's start) as state_dict() holds it:
    JSON-serializable, the standard padded base64 of the bytes (as the reader line of `granary
    run`'s position file), or None."""
    return None if position is None else base64.b64encode(position).decode("ascii")


def _decode_position(state, consumer):
    """The reader position (bytes, or None at an epoch's start) of `state`, a state_dict() of
    `consumer` — its "position" a base64 string, or the bytes of the version before positions
    were strings. InvalidArgument naming the consumer for a position that is not base64, not a
    reader's position, or one of another epoch or consumer than the state says."""
    position = state.get("position")
    if position is None or position in ("", b""):
        return None
    where = f"the state of consumer {consumer} (epoch {state['epoch']})"
    if isinstance(position, (bytes, bytearray)):
        blob = bytes(position)
    elif isinstance(position, str):
        try:
            blob = base64.b64decode(position, validate=True)
        except (binascii.Error, ValueError) as error:
            raise granary.InvalidArgument(
                f"{where}: its position is not base64 (state_dict() saves the reader's "
                f"position so): {error}") from None
    else:
        raise granary.InvalidArgument(
            f"{where}: its position is of type {type(position).__name__}, not a base64 string")
    try:
        _granary.check_position(blob, state["epoch"], consumer)
    except granary.InvalidArgument as error:
        raise granary.InvalidArgument(f"{where}: {error}") from None
    return blob


class GranaryIterableDataset(torch.utils.data.IterableDataset):
    """A Granary job as a torch IterableDataset with state_dict()/load_state_dict() (the
    protocol of torchdata's StatefulDataLoader); see the module docstring."""

    def __init__(self, dataset, dispatcher, job_name, seed=0, num_epochs=0,
                 cache_policy="compute", num_worker_slots=0, consumer=None, num_consumers=None,
                 sharding="auto", remainder="pad", digest=False, takeover=False,
                 auto_order=False, tail="auto", **connect_options):
        super().__init__()
        if not job_name:
            raise granary.InvalidArgument(
                "job_name is required: every consumer and every restart opens the job by name")
        if (consumer is None) != (num_consumers is None):
            raise granary.InvalidArgument("give both consumer and num_consumers, or neither")
        if consumer is None:
            consumer, num_consumers = 0, 1
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                consumer = torch.distributed.get_rank()
                num_consumers = torch.distributed.get_world_size()
        self._dataset = dataset
        self._dispatcher = dispatcher
        self._job_options = dict(name=job_name, seed=seed, num_consumers=num_consumers,
                                 num_worker_slots=num_worker_slots, num_epochs=num_epochs,
                                 cache_policy=cache_policy, sharding=sharding,
                                 remainder=remainder, takeover=takeover, auto_order=auto_order,
                                 tail=tail)
        self._connect_options = connect_options
        self._digest = digest
        self._consumer = consumer
        self._job = None
        # Where the next iteration starts: an epoch and a position in it (None: its start).
        self._epoch = 0
        self._position = None
        # The epoch being read and its reader, while an iteration is under way.
        self._reader = None
        self._reading_epoch = None
        # Whether the batch yielded last is padding (equal shares, remainder "pad").
        self._last_was_padding = False
        # The reader of the epoch being read or read last (its stats and digest), or None.
        self._last_reader = None
        # Elastic resume (load_state_dict of every rank's state at another world size): what
        # open() passes to open_job.
        self._resume = {}

    @property
    def consumer(self):
        return self._consumer

    @property
    def last_was_padding(self):
        """Whether the batch this dataset yielded last is padding: a copy of one this rank
        already had, handed out so that every rank takes as many steps (remainder "pad"). A
        trainer may skip its loss or mask it."""
        return self._last_was_padding

    @property
    def stats(self):
        """The reader's stats (a dict: "elements", "padding", "remainder_dropped", ...) of the
        epoch being read or read last by this process, or None before the first iteration."""
        return None if self._last_reader is None else self._last_reader.stats

    @property
    def digest(self):
        """With digest=True, the fingerprint of what this process delivered of the epoch being
        read or read last ("rows", "multiset"; padding left out) and of what the remainder rule
        "drop" left out ("dropped_rows", "dropped_multiset"); else None."""
        return None if self._last_reader is None else self._last_reader.digest

    def open(self):
        """Connects and opens the job now (else the first iteration does): raises at once if
        the dispatcher cannot be reached or refuses the job. Returns the granary.Job."""
        if self._job is None:
            client = granary.connect(self._dispatcher, **self._connect_options)
            self._job = client.open_job(self._dataset, **self._job_options, **self._resume)
            self._resume = {}
        return self._job

    def set_epoch(self, epoch):
        """Makes the next iteration read `epoch` from its start."""
        self._epoch, self._position = epoch, None

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is not None:
            raise granary.FailedPrecondition(
                "GranaryIterableDataset runs in the trainer process: use "
                "DataLoader(num_workers=0) (Granary's workers do the loading)")
        if self._dataset.batched and _batched_again_by_caller(self):
            raise granary.InvalidArgument(
                "GranaryIterableDataset yields batches (the pipeline batches), and the DataLoader "
                "reading it batches them again — its batch_size (1 unless given) would stack "
                "that many into one, adding a dimension: use granary.torch.DataLoader(dataset), "
                "or torch's DataLoader with batch_size=None")
        epoch, position = self._epoch, self._position
        reader = self.open().epoch(epoch, consumer=self._consumer, position=position,
                                   digest=self._digest)
        self._reader, self._reading_epoch, self._last_reader = reader, epoch, reader
        self._position = None
        try:
            for arrays in reader:
                self._last_was_padding = reader.last_padding
                yield as_tensors(arrays)
        finally:
            # Ended, or abandoned: the next iteration reads the next epoch only if this one was
            # read to its end; an abandoned one resumes where state_dict() would say.
            if self._reader is reader:
                self._position = reader.position()
                self._reader, self._reading_epoch = None, None
        self._epoch, self._position = epoch + 1, None

    def state_dict(self):
        """Where the data stands: the epoch and, mid-epoch, the reader's position — exactly the
        elements this dataset has yielded so far — with this rank's consumer index and their
        number, as JSON-serializable plain types: {"epoch": int, "position": the base64 string of
        the reader's position() bytes, or None at the epoch's start, "consumer": int,
        "num_consumers": int}. Save it with the model's checkpoint; to resume at another world
        size, save every rank's (e.g. gathered with torch.distributed.all_gather_object)."""
        if self._reader is not None:
            epoch, position = self._reading_epoch, self._reader.position()
        else:
            epoch, position = self._epoch, self._position
        return {"epoch": epoch, "position": _encode_position(position),
                "consumer": self._consumer, "num_consumers": self._job_options["num_consumers"]}

    def load_state_dict(self, state):
        """Makes the next iteration resume where `state` stood: this rank's own state_dict(),
        or the list of every rank's state_dict() — needed when the world size changed since they
        were saved (elastic resume: the rest of the epoch is dealt to the new ranks in equal
        shares, exactly once; later epochs run at the new size)."""
        self._reader, self._reading_epoch = None, None
        states = list(state) if isinstance(state, (list, tuple)) else [state]
        here = self._job_options["num_consumers"]
        # A state saved before states carried num_consumers is of this number of consumers if
        # alone, else of as many as the list holds.
        saved = states[0].get("num_consumers", here if len(states) == 1 else len(states))
        if len(states) == 1 and saved == here:
            if states[0].get("consumer", self._consumer) != self._consumer:
                raise granary.InvalidArgument(
                    f"the state is consumer {states[0]['consumer']}'s; this dataset reads as "
                    f"consumer {self._consumer}")
            self._epoch = states[0]["epoch"]
            self._position = _decode_position(states[0], self._consumer)
            return
        if len(states) != saved:
            raise granary.InvalidArgument(
                f"the state was saved by consumer {states[0].get('consumer')} of {saved}; this "
                f"dataset reads as consumer {self._consumer} of {here}: to resume at another "
                f"number of ranks, load the states of all {saved} (a list, e.g. gathered with "
                f"torch.distributed.all_gather_object)")
        by_consumer = sorted(states, key=lambda s: s["consumer"])
        if [s["consumer"] for s in by_consumer] != list(range(saved)) or any(
                s.get("num_consumers", saved) != saved for s in by_consumer):
            raise granary.InvalidArgument(
                f"the states are not one per consumer 0 to {saved - 1} of {saved}: consumers "
                f"{[s['consumer'] for s in by_consumer]}")
        epochs = {s["epoch"] for s in by_consumer}
        if len(epochs) != 1:
            raise granary.InvalidArgument(
                f"the {saved} states stand in different epochs {sorted(epochs)}: save them at "
                f"the same step")
        epoch = epochs.pop()
        positions = [_decode_position(s, s["consumer"]) for s in by_consumer]
        if saved == here:
            self._epoch, self._position = epoch, positions[self._consumer]
            return
        self._epoch, self._position = epoch, None
        self._job = None
        self._resume = dict(resume_epoch=epoch, resume_positions=positions)


class DataLoader(torch.utils.data.DataLoader):
    """torch.utils.data.DataLoader as a GranaryIterableDataset of a batched pipeline needs it:
    batch_size=None — the pipeline batches, and DataLoader's default batch_size=1 would add a
    dimension (stacking each batch into a batch of one) — and num_workers=0 — Granary's workers
    do the loading, and the dataset's reader runs on threads of this process. Other keywords
    (collate_fn, pin_memory, ...) go to torch's DataLoader. Another batch_size or num_workers is
    refused with InvalidArgument saying why."""

    def __init__(self, dataset, batch_size=None, num_workers=0, **kwargs):
        if batch_size is not None:
            raise granary.InvalidArgument(
                f"granary.torch.DataLoader: batch_size must be None, not {batch_size!r}: the "
                f"pipeline batches, and the DataLoader would stack {batch_size!r} of its batches "
                f"into one, adding a dimension (batch in the pipeline: Dataset.batch)")
        if num_workers != 0:
            raise granary.InvalidArgument(
                f"granary.torch.DataLoader: num_workers must be 0, not {num_workers!r}: "
                f"Granary's workers do the loading, and the dataset's reader runs on threads of "
                f"this process (a loader worker process cannot read this rank's consumer)")
        super().__init__(dataset, batch_size=None, num_workers=0, **kwargs)
