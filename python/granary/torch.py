"""granary.torch: Granary as a PyTorch dataset, resumable exactly once.

    ds = granary.torch.GranaryIterableDataset(pipeline, dispatcher="host:5000",
                                             job_name="resnet", seed=7)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    for step, (images, labels) in enumerate(loader):        # torch.Tensors, no copy
        ...
        if step % 500 == 0:
            torch.save({"model": model.state_dict(), "data": ds.state_dict()}, "ckpt.pt")
    # After a crash: ds.load_state_dict(torch.load("ckpt.pt")["data"]) and iterate again — the
    # epoch resumes right after the last element the saved state had delivered: none skipped,
    # none repeated.

Each iteration of the dataset reads one epoch (the next one: 0, 1, 2, ...). Under
torch.distributed, each rank reads its share as consumer `rank` of `world_size` (the job is
shared by name). The pipeline batches; use DataLoader(batch_size=None). num_workers must be 0:
the Granary workers are the loader's workers, and the client's reader runs on its own threads.

The tensors view the bytes the batch arrived in (a receive buffer, or a worker's shared-memory
segment mapped copy-on-write): they are valid for as long as they are referenced, and may be
written in place (`labels.add_(1)`, `images[:, 0] = 0`) — a write stays in this process and never
reaches the worker.
"""

import torch
import torch.utils.data

import granary

__all__ = ["GranaryIterableDataset", "as_tensors", "images_and_labels"]


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


class GranaryIterableDataset(torch.utils.data.IterableDataset):
    """A Granary job as a torch IterableDataset with state_dict()/load_state_dict() (the
    protocol of torchdata's StatefulDataLoader); see the module docstring."""

    def __init__(self, dataset, dispatcher, job_name, seed=0, num_epochs=0,
                 cache_policy="compute", num_worker_slots=0, consumer=None, num_consumers=None,
                 **connect_options):
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
                                 cache_policy=cache_policy)
        self._connect_options = connect_options
        self._consumer = consumer
        self._job = None
        # Where the next iteration starts: an epoch and a position in it (None: its start).
        self._epoch = 0
        self._position = None
        # The epoch being read and its reader, while an iteration is under way.
        self._reader = None
        self._reading_epoch = None

    @property
    def consumer(self):
        return self._consumer

    def open(self):
        """Connects and opens the job now (else the first iteration does): raises at once if
        the dispatcher cannot be reached or refuses the job. Returns the granary.Job."""
        if self._job is None:
            client = granary.connect(self._dispatcher, **self._connect_options)
            self._job = client.open_job(self._dataset, **self._job_options)
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
        epoch, position = self._epoch, self._position
        reader = self.open().epoch(epoch, consumer=self._consumer, position=position)
        self._reader, self._reading_epoch = reader, epoch
        self._position = None
        try:
            for arrays in reader:
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
        elements this dataset has yielded so far. Save it with the model's checkpoint."""
        if self._reader is not None:
            return {"epoch": self._reading_epoch, "position": self._reader.position(),
                    "consumer": self._consumer}
        return {"epoch": self._epoch, "position": self._position, "consumer": self._consumer}

    def load_state_dict(self, state):
        """Makes the next iteration resume where `state` (a state_dict()) stood."""
        if state.get("consumer", self._consumer) != self._consumer:
            raise granary.InvalidArgument(
                f"the state is consumer {state['consumer']}'s; this dataset reads as consumer "
                f"{self._consumer}")
        self._epoch, self._position = state["epoch"], state["position"]
        self._reader, self._reading_epoch = None, None
