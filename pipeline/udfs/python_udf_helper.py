"""Granary's Python UDF helper: one process running one Python function for a worker (or for
granary.local), started by pipeline/udfs/python_helper_process.cc as `python3 -c <this file>`.

The worker writes each element's tensors into a shared segment (a memfd, descriptor 3 here) and
describes them on a request line on stdin; this process views the numeric tensors in place as
NumPy arrays (no copy), calls the function, writes the result's tensors after the input in the
segment, describes them on one answer line on stdout. The protocol is in
python_helper_process.h. Only NumPy and the function's own imports are needed here (the
function's pickle, made by cloudpickle, loads with pickle). No per-element work is done in
Python beyond the call itself and one NumPy view or copy per tensor.
"""

import inspect
import math
import mmap
import os
import pickle
import sys
import threading
import time
import traceback

import numpy as np

SEGMENT_FD = 3
ALIGNMENT = 64
DTYPES = {1: np.dtype("<u1"), 2: np.dtype("<i4"), 3: np.dtype("<i8"), 4: np.dtype("<f4"),
          5: np.dtype("<f8"), 6: np.dtype("bool")}
DT_STRING = 7
CODES = {dtype: code for code, dtype in DTYPES.items()}
LENGTH = np.dtype("<i8")


class Segment:
    """The shared segment, mapped again whenever the worker has grown it."""

    def __init__(self):
        self.size = 0
        self.map = None

    def ensure(self, size):
        if size != self.size:
            # The old mapping is unmapped when the last array viewing it is gone.
            self.map = mmap.mmap(SEGMENT_FD, size)
            self.size = size
        return self.map


def aligned(at):
    return (at + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def read_tensors(data, words):
    """The tensors that words (count, then per tensor: dtype offset rank dims...) describe in
    data: numeric ones as NumPy arrays viewing it, a DT_STRING scalar as bytes, other DT_STRING
    tensors as object arrays of bytes."""
    tensors, at = [], 1
    for _ in range(words[0]):
        dtype, offset, rank = words[at], words[at + 1], words[at + 2]
        shape = words[at + 3:at + 3 + rank]
        at += 3 + rank
        count = math.prod(shape)
        if dtype != DT_STRING:
            tensors.append(np.frombuffer(data, dtype=DTYPES[dtype], count=count,
                                         offset=offset).reshape(shape))
            continue
        values, start = [], offset + count * LENGTH.itemsize
        for length in np.frombuffer(data, dtype=LENGTH, count=count, offset=offset).tolist():
            values.append(data[start:start + length])
            start += length
        if not shape:
            tensors.append(values[0])
        else:
            array = np.empty(count, dtype=object)
            array[:] = values
            tensors.append(array.reshape(shape))
    return tensors


def as_components(result):
    """What the function returned as a list of (dtype code, shape, content): content is a
    C-contiguous array, or a list of bytes for DT_STRING."""
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    components = []
    for item in items:
        if isinstance(item, (bytes, bytearray, str)):
            components.append((DT_STRING, (), [item.encode() if isinstance(item, str)
                                               else bytes(item)]))
            continue
        array = np.asarray(item)
        if array.dtype.kind in "SUO":
            components.append((DT_STRING, array.shape,
                               [v.encode() if isinstance(v, str) else bytes(v)
                                for v in array.reshape(-1)]))
        elif array.dtype not in CODES:
            raise TypeError(
                f"component {len(components)} has dtype {array.dtype}, which Granary does not "
                f"carry (uint8, int32, int64, float32, float64, bool, bytes): cast it")
        else:
            # (np.ascontiguousarray would make a 0-d array 1-d.)
            components.append((CODES[array.dtype], array.shape,
                               array if array.flags.c_contiguous else array.copy(order="C")))
    return components


def layout(components, base):
    """Where each component goes from segment offset `base` on: ([offset], end)."""
    offsets, at = [], aligned(base)
    for dtype, _, content in components:
        offsets.append(at)
        if dtype == DT_STRING:
            at += len(content) * LENGTH.itemsize + sum(len(value) for value in content)
        else:
            at += content.nbytes
        at = aligned(at)
    return offsets, at


def write(data, components, offsets):
    """Writes the components at their offsets; the answer's words describing them."""
    words = [str(len(components))]
    for (dtype, shape, content), offset in zip(components, offsets):
        words += [str(dtype), str(offset), str(len(shape))]
        words += [str(d) for d in shape]
        if dtype == DT_STRING:
            lengths = [len(value) for value in content]
            np.frombuffer(data, dtype=LENGTH, count=len(lengths), offset=offset)[:] = lengths
            at = offset + len(lengths) * LENGTH.itemsize
            for value in content:
                data[at:at + len(value)] = value
                at += len(value)
        elif content.size:
            np.frombuffer(data, dtype=content.dtype, count=content.size,
                          offset=offset).reshape(content.shape)[...] = content
    return " ".join(words)


class KeyedRng:
    """The `rng` of each call: a numpy.random.Generator over Philox keyed by the element's random
    key, drawing exactly what np.random.Generator(np.random.Philox(key=key)) draws. One
    generator is reset to each key (the state of a fresh Philox: counter 0, empty buffer), which
    costs a fifth of making one (27 -> 5 us); a function must not keep `rng` past its call."""

    def __init__(self):
        self.bit_generator = np.random.Philox(key=0)
        self.generator = np.random.Generator(self.bit_generator)

    def keyed(self, key):
        self.bit_generator.state = {
            "bit_generator": "Philox",
            "state": {"counter": np.zeros(4, dtype=np.uint64),
                      "key": np.array([key, 0], dtype=np.uint64)},
            "buffer": np.zeros(4, dtype=np.uint64), "buffer_pos": 4, "has_uint32": 0,
            "uinteger": 0}
        return self.generator


def call_with_rng(function, rng, arrays, key):
    """Calls function(*arrays), with rng=rng.keyed(key) when rng is not None."""
    if rng is not None:
        return function(*arrays, rng=rng.keyed(key))
    return function(*arrays)


# The answers' channel: the stdout this process started with. Descriptor 1 and sys.stdout are
# then pointed at stderr, so that what a function prints reaches the worker's log, never the
# protocol.
ANSWERS = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
sys.stdout = sys.stderr


def reply(line):
    ANSWERS.write(line.encode() + b"\n")
    ANSWERS.flush()


def reply_error(text):
    data = text.encode("utf-8", "replace")
    ANSWERS.write(b"error %d\n" % len(data) + data)
    ANSWERS.flush()


def main():
    segment = Segment()
    function, rng = None, None
    pending = None  # a result waiting for the segment to grow: (components, offsets)
    for line in sys.stdin.buffer:
        command, _, rest = line.partition(b" ")
        try:
            words = [int(word) for word in rest.split()]
            data = segment.ensure(words[0])
            if command == b"load":
                function = pickle.loads(data[:words[1]])
                try:
                    wants_rng = "rng" in inspect.signature(function).parameters
                except (TypeError, ValueError):
                    wants_rng = False
                rng = KeyedRng() if wants_rng else None
                reply("ok")
                continue
            if command == b"resume":
                components, offsets = pending
                pending = None
            else:
                # map|keep SIZE END KEY tensors...
                result = call_with_rng(function, rng, read_tensors(data, words[3:]), words[2])
                if command == b"keep":
                    reply("keep %d" % (1 if bool(result) else 0))
                    continue
                components = as_components(result)
                offsets, end = layout(components, words[1])
                if end > segment.size:
                    pending = (components, offsets)
                    reply("grow %d" % end)
                    continue
            reply("out " + write(data, components, offsets))
        except Exception:  # noqa: BLE001 (any error of the function is the element's error)
            reply_error(traceback.format_exc())


def exit_with_parent():
    """Ends this process once its parent (the worker) is gone, even while a function runs."""
    parent = os.getppid()
    while True:
        time.sleep(1)
        if os.getppid() != parent:
            os._exit(1)


if __name__ == "__main__":
    threading.Thread(target=exit_with_parent, daemon=True).start()
    main()
