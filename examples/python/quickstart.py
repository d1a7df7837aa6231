"""Granary from Python in a minute.

    venv/bin/python examples/python/quickstart.py        # after scripts/pip_install.sh; or
                                                         # PYTHONPATH=build/python python3 ...
    venv/bin/python examples/python/quickstart.py --config /tmp/g/client.json
                                                         # the service too: the file
                                                         # `granary cluster --dir /tmp/g` wrote
    venv/bin/python examples/python/quickstart.py --dispatcher HOST:PORT \\
        --tls_ca CA --tls_cert CERT --tls_key KEY        # or --insecure

A pipeline built in Python runs in this process (granary.local), then — given a dispatcher, e.g.
the one `granary cluster` prints — as a job of the service, read exactly once, with its position
saved halfway and resumed from.
"""

import argparse

import granary


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="a client configuration file (granary cluster's)")
    parser.add_argument("--dispatcher", help="HOST:PORT of a Granary dispatcher")
    parser.add_argument("--tls_ca")
    parser.add_argument("--tls_cert")
    parser.add_argument("--tls_key")
    parser.add_argument("--insecure", action="store_true")
    args = parser.parse_args()

    # A pipeline: tf.data's idiom, checked by Granary's C++ pipeline builder as it is built.
    ds = (granary.Dataset.range(1000, elements_per_split=100, shuffle_splits=True)
          .shuffle(64)
          .map("add", value=1)
          .batch(32))
    print("pipeline:", ds)

    # In this process: the reference the service's epochs are compared with.
    rows = sum(len(values) for (values,) in granary.local(ds, epochs=1, seed=7))
    reference = granary.local_digests(ds, epochs=1, seed=7)[0]
    print(f"local: {rows} rows, multiset digest {reference['multiset_xxh64']}")

    if not args.dispatcher and not args.config:
        return
    client = granary.connect(args.dispatcher, config=args.config, tls_ca=args.tls_ca,
                             tls_cert=args.tls_cert, tls_key=args.tls_key,
                             insecure=args.insecure or None)
    job = client.open_job(ds, name="quickstart", seed=7)
    reader = job.epoch(0, digest=True)
    for step, (values,) in enumerate(reader):  # NumPy arrays viewing the received bytes
        if step == 10:
            saved = reader.position()  # e.g. beside a model checkpoint
            first_half = reader.digest
            break
    # A restarted trainer resumes exactly after the 11th batch: nothing skipped or repeated.
    rest = job.epoch(0, position=saved, digest=True)
    for _ in rest:
        pass
    rows = first_half["rows"] + rest.digest["rows"]
    multiset = (first_half["multiset"] + rest.digest["multiset"]) % (1 << 64)
    verdict = "exactly once" if f"{multiset:016x}" == reference["multiset_xxh64"] else "MISMATCH"
    print(f"service: {rows} rows over a resume, multiset digest {multiset:016x}: {verdict}")
    if verdict != "exactly once":
        raise SystemExit(1)


if __name__ == "__main__":
    main()
