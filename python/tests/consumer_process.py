"""One consumer of a shared job, as a separate trainer process would be: reads `epochs` epochs
as consumer `consumer` of `num_consumers` and prints one JSON line per epoch with the digest of
what it delivered. Used by test_cluster.py.

    consumer_process.py ADDRESS CONSUMER NUM_CONSUMERS EPOCHS SEED
"""

import json
import sys

import granary
from pipelines import range_pipeline


def main(address, consumer, num_consumers, epochs, seed):
    job = granary.connect(address).open_job(range_pipeline(), name="shared", seed=seed,
                                            num_consumers=num_consumers)
    for epoch in range(epochs):
        reader = job.epoch(epoch, consumer=consumer, digest=True)
        for _ in reader:
            pass
        print(json.dumps({"epoch": epoch, **reader.digest, "stats": reader.stats}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
