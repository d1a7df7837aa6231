"""A PyTorch trainer over granary.torch.GranaryIterableDataset under DataLoader(num_workers=0),
checkpointing the dataset's state beside its progress as JSON (state_dict() is plain types) — the
process test_torch.py SIGKILLs and restarts.

    torch_trainer.py ADDRESS CHECKPOINT EPOCHS SEED SAVE_AT HANG_AT

Reads epochs 0..EPOCHS-1 (from the checkpoint's state if CHECKPOINT exists). Each step (batch)
is "trained" by adding it to the epoch's digest. After step SAVE_AT (counted over this
process's steps) it saves {dataset state, the digest so far} to CHECKPOINT (atomically); at step
HANG_AT it prints "hanging" and waits to be killed (HANG_AT < 0: never). At each epoch's end it
prints a JSON line: the epoch's rows and multiset digest, counting what earlier processes
trained before the checkpoint it resumed from.
"""

import json
import os
import sys
import time

import torch

import granary
import granary.torch
from pipelines import range_pipeline


def main(address, checkpoint, epochs, seed, save_at, hang_at):
    ds = granary.torch.GranaryIterableDataset(range_pipeline(), dispatcher=address,
                                              job_name="trainer", seed=seed)
    carried = {"rows": 0, "multiset": 0}
    if os.path.exists(checkpoint):
        with open(checkpoint) as f:
            saved = json.load(f)
        ds.load_state_dict(saved["data"])
        carried = saved["progress"]
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    step = 0
    while ds.state_dict()["epoch"] < epochs:
        epoch = ds.state_dict()["epoch"]
        digest = granary.Digest(True)
        for (values,) in loader:
            digest.add((values.numpy(),))
            step += 1
            if step == save_at:
                state = {"data": ds.state_dict(),
                         "progress": {"rows": carried["rows"] + digest.rows,
                                      "multiset": (carried["multiset"] + digest.multiset) % (1 << 64)}}
                with open(checkpoint + ".tmp", "w") as f:
                    json.dump(state, f)
                os.replace(checkpoint + ".tmp", checkpoint)
            if step == hang_at:
                print("hanging", flush=True)
                while True:
                    time.sleep(1)
        print(json.dumps({"epoch": epoch, "rows": carried["rows"] + digest.rows,
                          "multiset": (carried["multiset"] + digest.multiset) % (1 << 64)}),
              flush=True)
        carried = {"rows": 0, "multiset": 0}


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
         int(sys.argv[6]))
