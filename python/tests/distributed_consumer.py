"""One rank of a torch.distributed job (gloo, file rendezvous) reading epoch 0 through
granary.torch.GranaryIterableDataset: the dataset reads as consumer `rank` of `world_size`.
Prints {"rank", "consumer", "rows", "multiset"}. Used by test_torch.py.

    distributed_consumer.py ADDRESS RENDEZVOUS_FILE RANK WORLD_SIZE SEED
"""

import json
import sys

import torch
import torch.distributed

import granary
import granary.torch
from pipelines import range_pipeline


def main(address, rendezvous, rank, world_size, seed):
    torch.distributed.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                                         world_size=world_size)
    ds = granary.torch.GranaryIterableDataset(range_pipeline(), dispatcher=address,
                                              job_name="distributed", seed=seed)
    digest = granary.Digest(True)
    for (values,) in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0):
        digest.add((values.numpy(),))
    torch.distributed.barrier()
    print(json.dumps({"rank": rank, "consumer": ds.consumer, "rows": digest.rows,
                      "multiset": digest.multiset}), flush=True)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
