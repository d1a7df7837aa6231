"""Granary's Python UDF helper: one process running one Python function for a worker (or for
granary.local), started by pipeline/udfs/python_helper_process.cc as `python3 -c <this file>`.

The worker lays each element out in a shared segment (a memfd, descriptor 3 here) as an element
image (transport/FORMAT.md) and sends a request line on stdin; this process views the element's
numeric tensors in place as NumPy arrays (no copy), calls the function, writes the result's image
after the input in the segment, and answers one line on stdout. The protocol is in
python_helper_process.h. Only NumPy and the function's own imports are needed here (the
function's pickle, made by cloudpickle, loads with pickle).
"""

import inspect
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


def read_varint(data, at):
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def varint(value):
    out = bytearray()
    value &= (1 << 64) - 1
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_size(value):
    return max(1, (value.bit_length() + 6) // 7)


def parse_tensor(buffer, start, end):
    """A TensorProto at buffer[start:end] as a NumPy array viewing the buffer (numeric), or as
    bytes (a DT_STRING scalar) or an object array of bytes."""
    data = memoryview(buffer)
    dtype, shape, strings, content = 0, [], [], None
    at = start
    while at < end:
        key, at = read_varint(data, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, at = read_varint(data, at)
            if field == 1:
                dtype = value
            elif field == 2:
                shape.append(value)
            continue
        length, at = read_varint(data, at)
        if field == 2:  # a packed shape
            packed = at
            while packed < at + length:
                value, packed = read_varint(data, packed)
                shape.append(value)
        elif field == 3:
            content = (at, length)
        elif field == 4:
            strings.append(bytes(data[at:at + length]))
        at += length
    if dtype == DT_STRING:
        if not shape:
            return strings[0]
        array = np.empty(len(strings), dtype=object)
        array[:] = strings
        return array.reshape(shape)
    count = int(np.prod(shape)) if shape else 1
    offset = content[0] if content else 0
    return np.frombuffer(buffer, dtype=DTYPES[dtype], count=count if content else 0,
                         offset=offset).reshape(shape)


def parse_image(buffer, length):
    """The tensors of the element image at buffer[0:length]."""
    data = memoryview(buffer)
    tensors, at = [], 0
    while at < length:
        key, at = read_varint(data, at)
        if key & 7 == 0:
            _, at = read_varint(data, at)
            continue
        size, at = read_varint(data, at)
        if key >> 3 == 1:
            tensors.append(parse_tensor(buffer, at, at + size))
        at += size
    return tensors


def as_components(result):
    """What the function returned as a list of arrays (bytes and numbers as scalars)."""
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    components = []
    for item in items:
        if isinstance(item, (bytes, bytearray, str)):
            components.append(item.encode() if isinstance(item, str) else bytes(item))
            continue
        array = np.asarray(item)
        if array.dtype.kind in "SUO":
            components.append(array)
        elif array.dtype not in CODES:
            raise TypeError(
                f"component {len(components)} has dtype {array.dtype}, which Granary does not "
                f"carry (uint8, int32, int64, float32, float64, bool, bytes): cast it")
        else:
            # (np.ascontiguousarray would make a 0-d array 1-d.)
            components.append(array if array.flags.c_contiguous else array.copy(order="C"))
    return components


def tensor_body(component):
    """The TensorProto framing of a component: (bytes before its content, its content array or
    None). Numeric content is written separately, so that it is copied once."""
    if isinstance(component, bytes):
        return b"\x08" + varint(DT_STRING) + b"\x22" + varint(len(component)) + component, None
    array = component
    shape = b"".join(varint(d) for d in array.shape)
    head = b"\x08" + varint(DT_STRING if array.dtype.kind in "SUO" else CODES[array.dtype])
    if shape:
        head += b"\x12" + varint(len(shape)) + shape
    if array.dtype.kind in "SUO":
        for value in array.reshape(-1):
            value = value.encode() if isinstance(value, str) else bytes(value)
            head += b"\x22" + varint(len(value)) + value
        return head, None
    return head, array


def image_parts(components, base):
    """The element image of `components`, to be written at segment offset `base` (64-aligned):
    a list of bytes and arrays whose numeric contents start 64-byte aligned."""
    parts, at = [], 0
    for component in components:
        head, array = tensor_body(component)
        if array is None or array.nbytes == 0:
            body = head
            parts.append(b"\x0a" + varint(len(body)) + body)
            at += len(parts[-1])
            continue
        content_prefix = b"\x1a" + varint(array.nbytes)
        fixed = len(head) + 2 + len(content_prefix)  # 2: the padding's tag and length byte
        for pad in range(128):
            body_length = fixed + pad + array.nbytes
            prefix_length = 1 + varint_size(body_length) + fixed + pad
            if (base + at + prefix_length) % ALIGNMENT == 0:
                break
        prefix = (b"\x0a" + varint(body_length) + head + b"\x2a" + varint(pad) + b"\x00" * pad +
                  content_prefix)
        parts.append(prefix)
        parts.append(array)
        at += len(prefix) + array.nbytes
    return parts, at


def call_with_rng(function, wants_rng, arrays, key):
    if wants_rng:
        return function(*arrays, rng=np.random.Generator(np.random.Philox(key=key)))
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
    function, wants_rng = None, False
    pending = None  # an output waiting for the segment to grow: (parts, base, length)
    for line in sys.stdin.buffer:
        words = line.split()
        command = words[0].decode()
        try:
            if command == "resume":
                data = segment.ensure(int(words[1]))
                parts, base, length = pending
                pending = None
            else:
                size, length = int(words[1]), int(words[2])
                data = segment.ensure(size)
                if command == "load":
                    function = pickle.loads(data[:length])
                    try:
                        wants_rng = "rng" in inspect.signature(function).parameters
                    except (TypeError, ValueError):
                        wants_rng = False
                    reply("ok")
                    continue
                arrays = parse_image(data, length)
                result = call_with_rng(function, wants_rng, arrays, int(words[3]))
                if command == "keep":
                    reply("keep %d" % (1 if bool(result) else 0))
                    continue
                base = (length + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
                parts, length = image_parts(as_components(result), base)
                if base + length > segment.size:
                    pending = (parts, base, length)
                    reply("grow %d" % (base + length))
                    continue
            at = base
            for part in parts:
                if isinstance(part, bytes):
                    data[at:at + len(part)] = part
                    at += len(part)
                else:
                    np.frombuffer(data, dtype=part.dtype, count=part.size,
                                  offset=at).reshape(part.shape)[...] = part
                    at += part.nbytes
            reply("out %d %d" % (base, length))
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
