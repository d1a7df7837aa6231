"""One rank of an elastic training over granary.torch.GranaryIterableDataset (explicit consumer
and num_consumers, no torch.distributed) — the process test_elastic.py starts at one world size,
stops mid-epoch, and restarts at another.

    elastic_rank.py ADDRESS JOB_NAME SEED REMAINDER RANK WORLD_SIZE STOP_AFTER STATE_OUT \
        [STATE_IN ...]

Reads pipelines.unequal_split_pipeline() as consumer RANK of WORLD_SIZE, having loaded the
list of every STATE_IN (the state_dict()s of the ranks of an earlier world size, as JSON) if
given. STOP_AFTER >= 0: reads that many batches of the first epoch, writes state_dict() to
STATE_OUT as JSON and exits. STOP_AFTER < 0: reads to the end of the epoch after the first.
After each (part of an) epoch it prints a JSON line: the rank, the epoch, the steps, the ids
read (padding left out), the padding steps, and the reader's stats and digest.
"""

import itertools
import json
import sys

import torch.utils.data

import granary
import granary.torch
from pipelines import unequal_split_pipeline


def main(address, job_name, seed, remainder, rank, world_size, stop_after, state_out, states_in):
    ds = granary.torch.GranaryIterableDataset(unequal_split_pipeline(), dispatcher=address,
                                              job_name=job_name, seed=seed, remainder=remainder,
                                              consumer=rank, num_consumers=world_size,
                                              digest=True)
    if states_in:
        states = []
        for path in states_in:
            with open(path) as f:
                states.append(json.load(f))
        ds.load_state_dict(states)
    first_epoch = ds.state_dict()["epoch"]
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    for epoch in range(first_epoch, first_epoch + (1 if stop_after >= 0 else 2)):
        batches = iter(loader)
        if stop_after >= 0:
            batches = itertools.islice(batches, stop_after)
        steps, padding_steps, ids = 0, 0, []
        for (values,) in batches:
            steps += 1
            if ds.last_was_padding:
                padding_steps += 1
            else:
                ids.extend(values.tolist())
        print(json.dumps({"rank": rank, "epoch": epoch, "steps": steps, "ids": ids,
                          "padding_steps": padding_steps, "stats": ds.stats,
                          "digest": ds.digest}), flush=True)
    if stop_after >= 0:
        with open(state_out, "w") as f:
            json.dump(ds.state_dict(), f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]),
         int(sys.argv[6]), int(sys.argv[7]), sys.argv[8], sys.argv[9:])
