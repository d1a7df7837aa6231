"""The pipelines the Python tests run through the service."""

import granary


def range_pipeline(size=4000):
    """Shuffled int64 batches: cheap to compute, enough splits for every worker to serve."""
    return (granary.Dataset.range(size, elements_per_split=100, shuffle_splits=True)
            .shuffle(64).map("add", value=1).batch(20))
