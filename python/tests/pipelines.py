"""The pipelines the Python tests run through the service."""

import granary


def range_pipeline(size=4000):
    """Shuffled int64 batches: cheap to compute, enough splits for every worker to serve."""
    return (granary.Dataset.range(size, elements_per_split=100, shuffle_splits=True)
            .shuffle(64).map("add", value=1).batch(20))


def assert_local_digest(test, multiset, seed, epoch=0):
    """Asserts that `multiset` (a reader's digest["multiset"], or a granary.Digest's) is that of
    range_pipeline()'s epoch `epoch` under granary.local with `seed`."""
    expected = granary.local_digests(range_pipeline(), epoch + 1, seed)[epoch]
    test.assertEqual(f"{multiset:016x}", expected["multiset_xxh64"], f"epoch {epoch}, seed {seed}")
