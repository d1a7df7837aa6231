"""One rank of a DistributedDataParallel training (CPU, gloo, file rendezvous) of a small model
over granary.torch.GranaryIterableDataset — the process test_ddp.py starts 2 or 4 of.

    ddp_trainer.py ADDRESS RENDEZVOUS_FILE RANK WORLD_SIZE SEED EPOCHS REMAINDER JOB_NAME

Trains EPOCHS epochs of pipelines.unequal_split_pipeline() as consumer RANK of WORLD_SIZE (equal
shares, remainder REMAINDER). A padding batch takes its step with its loss masked to zero (every
rank must take every step: DDP all-reduces the gradients in each backward). Before each step it
writes "epoch E step S" to stderr (where a hung rank stood); after each epoch it prints a JSON
line: the rank, the epoch, the steps taken, the element ids trained on (padding left out), the
padding steps, and the reader's stats and digest (what the remainder rule dropped).
"""

import json
import sys

import torch
import torch.distributed
import torch.nn.functional
from torch.nn.parallel import DistributedDataParallel

import granary
import granary.torch
from pipelines import unequal_split_pipeline


def small_model():
    return torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16),
                               torch.nn.ReLU(), torch.nn.Linear(16, 1))


def main(address, rendezvous, rank, world_size, seed, epochs, remainder, job_name):
    torch.distributed.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                                         world_size=world_size)
    torch.manual_seed(seed)
    model = DistributedDataParallel(small_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    ds = granary.torch.GranaryIterableDataset(unequal_split_pipeline(), dispatcher=address,
                                              job_name=job_name, seed=seed, remainder=remainder,
                                              digest=True)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    for epoch in range(epochs):
        steps, padding_steps, ids = 0, 0, []
        for (values,) in loader:
            print(f"epoch {epoch} step {steps}", file=sys.stderr, flush=True)
            x = (values.to(torch.float32) / 1000.0).reshape(-1, 1)
            loss = torch.nn.functional.mse_loss(model(x), torch.sin(x))
            if ds.last_was_padding:
                loss = loss * 0.0  # masked: a copy of a batch this rank already trained on
                padding_steps += 1
            else:
                ids.extend(values.tolist())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            steps += 1
        print(json.dumps({"rank": rank, "epoch": epoch, "steps": steps, "ids": ids,
                          "padding_steps": padding_steps, "stats": ds.stats,
                          "digest": ds.digest}), flush=True)
    print(f"finished {epochs} epochs", file=sys.stderr, flush=True)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
         int(sys.argv[6]), sys.argv[7], sys.argv[8])
