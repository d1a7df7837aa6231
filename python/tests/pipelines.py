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


def unequal_split_pipeline(size=3900):
    """Batches of int64 ids (the values 0..size-1 that leave remainder 1 modulo 3) from 39
    splits of 33 or 34 ids: at 2 or 4 consumers the equal shares get unequal numbers of splits
    and of ids, which the remainder rule evens out."""
    return (granary.Dataset.range(size, elements_per_split=100, shuffle_splits=True)
            .filter("modulo", modulus=3, remainder=1).shuffle(16).batch(8))
