#!/usr/bin/python3
"""The PyTorch DataLoader peer of Granary's ResNet-style pipeline (examples/imagenet_resnet.json).

What ML engineers use today, written the way they write it: a map-style torch Dataset over the
records of the TFRecord files that `granary datagen imagenet` writes, read by a
torch.utils.data.DataLoader with worker processes, shuffle=True and the default collate.

    /usr/bin/python3 bench/pytorch_peer.py --data_dir D --num_workers N [--batch_size 128]
        [--crop_fraction 0.875] [--epochs 1] [--seed 1]

Input: every D/*.tfrecord, in sorted order. Each record is a serialized tf.train.Example with
the features "image/encoded" (a bytes_list holding one JPEG) and "image/class/label" (an
int64_list holding one value).

Work per image, the same as Granary's pipeline (the pipeline/udf_*.cc files named below):
  read the record (one pread at its indexed offset) -> parse the Example (a minimal protobuf
  wire-format parser) -> decode the JPEG to RGB uint8 HWC with PIL (decode_jpeg) ->
  random_crop: crop side = max(1, round-half-away-from-zero(side * crop_fraction)) for height
  and width; row offset uniform in [0, h - crop_h], then column offset uniform in
  [0, w - crop_w] -> random_flip: mirror left-right (the width axis) with probability 0.5 ->
  normalize: float32 (x * float32(1/255) - mean[c]) / std[c], mean [0.485, 0.456, 0.406],
  std [0.229, 0.224, 0.225] -> (torch float32 [crop_h, crop_w, 3] HWC, int label).
Augmentations use numpy only (no torchvision). The random draws come from a numpy Generator per
worker process, seeded by worker_init_fn from the worker's torch seed, which the DataLoader
derives from --seed, the worker id and the epoch: a run is reproducible, and an epoch's draws
differ from the previous epoch's. With --num_workers 0 everything runs in the main process from
a Generator seeded with --seed.

Choices, and whom they favour:
  * The record index (file, offset, length of every record) is built once, before the first
    timed epoch, in the main process: a one-time cost like Granary's split enumeration.
  * CRCs are not verified (a pure-Python crc32c would be unfairly slow); this favours PyTorch,
    since Granary verifies every record's CRCs.
  * Each epoch creates a new iterator (persistent_workers=False, the default), so the timed
    epoch includes starting and stopping the worker processes.

Output: one JSON line per epoch on stdout, nothing else (logs go to stderr):
  {"epoch": e, "images": n, "batches": b, "seconds": s, "cpu_seconds": c,
   "peak_rss_main_bytes": m, "peak_rss_workers_bytes": w}
seconds runs from iter(loader) to the arrival of the last batch. cpu_seconds is the user + sys
time of this process and its reaped children (the workers, joined when the epoch's iterator is
exhausted) spent during the epoch. peak_rss_main_bytes is this process's peak RSS so far;
peak_rss_workers_bytes the largest peak RSS of any worker so far (0 with --num_workers 0). RSS
counts the pages a worker shares with the main process after fork.

Exit status 2 on bad flags (argparse's usage error). Exit status 1, with a message on stderr
naming what is wrong (the file and 0-based record number for a bad record), on a missing data
directory, a data directory without .tfrecord files, a truncated record, a malformed Example, a
missing or mistyped feature, or an undecodable JPEG.
"""

import argparse
import functools
import glob
import io
import json
import math
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.utils.data
from PIL import Image, UnidentifiedImageError

IMAGE_KEY = "image/encoded"
LABEL_KEY = "image/class/label"
# Normalization of pipeline/udfs/udf_normalize.cc with the parameters of examples/imagenet_resnet.json.
SCALE = np.float32(1.0 / 255.0)
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
FLIP_PROBABILITY = 0.5

# TFRecord framing: uint64 length, uint32 masked crc of the length, data, uint32 masked crc of
# the data, all little-endian.
HEADER_BYTES = 12
FOOTER_BYTES = 4


class RecordError(Exception):
    """Bad input (the data directory, a file or a record); the message names it."""


def log(message):
    print(f"pytorch_peer: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# TFRecord index


def index_tfrecord_file(path):
    """Returns [(data_offset, data_length)] of every record of `path`, reading only headers."""
    records = []
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        offset = 0
        while offset < size:
            record = len(records)
            if size - offset < HEADER_BYTES:
                raise RecordError(
                    f"{path}: record {record} is truncated: {size - offset} bytes left at offset "
                    f"{offset}, a record header needs {HEADER_BYTES}")
            f.seek(offset)
            (length,) = struct.unpack("<Q", f.read(8))
            end = offset + HEADER_BYTES + length + FOOTER_BYTES
            if end > size:
                raise RecordError(
                    f"{path}: record {record} is truncated: its header at offset {offset} "
                    f"announces {length} data bytes, but the file ends {end - size} bytes short "
                    f"of the record's end")
            records.append((offset + HEADER_BYTES, length))
            offset = end
    return records


# ----------------------------------------------------------------------------------------------
# Protobuf wire format, just enough for tf.train.Example (proto/example.proto):
#   Example{1: Features}  Features{1: map<string, Feature>}  (a map entry is {1: key, 2: value})
#   Feature{1: BytesList, 2: FloatList, 3: Int64List}  BytesList{1: repeated bytes}
#   Int64List{1: repeated int64, packed or not}

WIRE_VARINT, WIRE_FIXED64, WIRE_LEN, WIRE_FIXED32 = 0, 1, 2, 5


def read_varint(buf, pos, end):
    """Returns (value, next position) of the varint at buf[pos:end]."""
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def fields(buf, pos, end):
    """Yields (field number, wire type, value) of the message at buf[pos:end]. The value is an
    int for varints and (start, stop) positions for length-delimited fields; fixed-width fields
    are skipped. Groups (wire types 3 and 4) are an error: Example has none."""
    while pos < end:
        key, pos = read_varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == WIRE_VARINT:
            value, pos = read_varint(buf, pos, end)
            yield number, wire, value
        elif wire == WIRE_LEN:
            length, pos = read_varint(buf, pos, end)
            if pos + length > end:
                raise ValueError(f"field {number} runs past the end of its message")
            yield number, wire, (pos, pos + length)
            pos += length
        elif wire in (WIRE_FIXED64, WIRE_FIXED32):
            pos += 8 if wire == WIRE_FIXED64 else 4
            if pos > end:
                raise ValueError(f"field {number} runs past the end of its message")
        else:
            raise ValueError(f"field {number} has unsupported wire type {wire}")


def as_int64(value):
    """The two's-complement int64 of a decoded varint."""
    return value - (1 << 64) if value >= (1 << 63) else value


def parse_feature(buf, start, end):
    """Returns (kind, values) of the Feature at buf[start:end]: ("bytes_list", [bytes]),
    ("int64_list", [int]), ("float_list", None) (not read) or ("empty", []). Unknown fields are
    ignored, as protobuf does."""
    kind, values = "empty", []
    for number, wire, value in fields(buf, start, end):
        if wire != WIRE_LEN:
            continue
        if number == 1:
            kind, values = "bytes_list", []
            for n, w, v in fields(buf, *value):
                if n == 1 and w == WIRE_LEN:
                    values.append(buf[v[0]:v[1]])
        elif number == 2:
            kind, values = "float_list", None
        elif number == 3:
            kind, values = "int64_list", []
            for n, w, v in fields(buf, *value):
                if n == 1 and w == WIRE_VARINT:
                    values.append(as_int64(v))
                elif n == 1 and w == WIRE_LEN:  # Packed.
                    pos, stop = v
                    while pos < stop:
                        item, pos = read_varint(buf, pos, stop)
                        values.append(as_int64(item))
    return kind, values


def parse_example(buf, wanted):
    """Returns {key: (kind, values)} for the features of the serialized Example `buf` whose keys
    are in `wanted`; a later map entry for a key replaces an earlier one, as in protobuf."""
    found = {}
    for number, wire, features in fields(buf, 0, len(buf)):
        if number != 1 or wire != WIRE_LEN:
            continue
        for n, w, entry in fields(buf, *features):
            if n != 1 or w != WIRE_LEN:
                continue
            key, feature = None, (0, 0)
            for en, ew, ev in fields(buf, *entry):
                if en == 1 and ew == WIRE_LEN:
                    key = buf[ev[0]:ev[1]].decode("utf-8", errors="replace")
                elif en == 2 and ew == WIRE_LEN:
                    feature = ev
            if key in wanted:
                found[key] = parse_feature(buf, *feature)
    return found


def single_value(found, key, kind):
    """The one value of feature `key`, which must be of `kind` ("bytes_list" or "int64_list")."""
    if key not in found:
        raise ValueError(f"feature '{key}' is missing")
    got_kind, values = found[key]
    if got_kind != kind:
        raise ValueError(f"feature '{key}' is {got_kind}, not {kind}")
    if len(values) != 1:
        raise ValueError(f"feature '{key}' has {len(values)} values, need exactly 1")
    return values[0]


# ----------------------------------------------------------------------------------------------
# Dataset


def decode_jpeg(jpeg):
    """The RGB uint8 [h, w, 3] pixels of a JPEG, as decode_jpeg (pipeline/udfs/udf_decode_image.cc)
    with its default 3 channels; only JPEG is accepted."""
    try:
        return np.asarray(Image.open(io.BytesIO(jpeg), formats=["JPEG"]).convert("RGB"))
    except UnidentifiedImageError:
        raise ValueError(f"feature '{IMAGE_KEY}' ({len(jpeg)} bytes) is not a JPEG") from None
    except OSError as e:
        raise ValueError(
            f"feature '{IMAGE_KEY}' ({len(jpeg)} bytes) does not decode as a JPEG: {e}") from None


def crop_side(side, fraction):
    """max(1, llround(side * fraction)) as pipeline/udfs/udf_random_crop.cc computes it (llround rounds
    halves away from zero)."""
    x = side * fraction
    rounded = math.floor(x)
    if x - rounded >= 0.5:
        rounded += 1
    return max(1, rounded)


@functools.lru_cache(maxsize=None)
def normalize_rows(width):
    """MEAN and STD repeated for a row of `width` RGB pixels. Applied to [h, width * 3] rows they
    run in one numpy inner loop per row instead of one per pixel (broadcasting over a last axis
    of 3), several times faster; the float32 results are the same."""
    return np.tile(MEAN, width), np.tile(STD, width)


class TfRecordImageDataset(torch.utils.data.Dataset):
    """Map-style dataset of (normalized float32 HWC crop, label) over indexed TFRecord records.
    Files are opened lazily by each process that reads (a DataLoader worker, or the main process
    with num_workers 0) and kept open."""

    def __init__(self, paths, index, crop_fraction, seed):
        self.paths = paths
        self.index = index  # [(file number, record number in the file, data offset, length)]
        self.crop_fraction = crop_fraction
        self.rng = np.random.default_rng(seed)  # Replaced per worker by worker_init_fn.
        self._fds = {}
        self._fds_pid = None

    def __len__(self):
        return len(self.index)

    def _fd(self, file_number):
        if self._fds_pid != os.getpid():  # A forked worker must not use its parent's cache.
            self._fds, self._fds_pid = {}, os.getpid()
        if file_number not in self._fds:
            self._fds[file_number] = os.open(self.paths[file_number], os.O_RDONLY)
        return self._fds[file_number]

    def __getitem__(self, i):
        file_number, record, offset, length = self.index[i]
        path = self.paths[file_number]
        try:
            data = os.pread(self._fd(file_number), length, offset)
        except OSError as e:
            raise RecordError(f"{path}: record {record}: cannot read: {e.strerror}") from None
        if len(data) != length:
            raise RecordError(f"{path}: record {record}: read {len(data)} of its {length} bytes "
                              f"at offset {offset}; did the file shrink after indexing?")
        try:
            found = parse_example(data, (IMAGE_KEY, LABEL_KEY))
            jpeg = single_value(found, IMAGE_KEY, "bytes_list")
            label = single_value(found, LABEL_KEY, "int64_list")
            image = decode_jpeg(jpeg)
        except ValueError as e:
            raise RecordError(f"{path}: record {record}: {e}") from None
        return torch.from_numpy(augment(image, self.rng, self.crop_fraction)), label


def augment(image, rng, crop_fraction):
    """random_crop, random_flip and normalize of a uint8 [h, w, 3] image, drawing from `rng`
    (also what bench/python_udf_bench.py runs as a Granary Python UDF)."""
    h, w = image.shape[:2]
    crop_h = crop_side(h, crop_fraction)
    crop_w = crop_side(w, crop_fraction)
    y = rng.integers(0, h - crop_h + 1)
    x = rng.integers(0, w - crop_w + 1)
    crop = image[y:y + crop_h, x:x + crop_w]
    if rng.random() < FLIP_PROBABILITY:
        crop = crop[:, ::-1]
    out = crop.astype(np.float32).reshape(crop_h, crop_w * 3)  # A contiguous copy.
    mean_row, std_row = normalize_rows(crop_w)
    out *= SCALE
    out -= mean_row
    out /= std_row
    return out.reshape(crop_h, crop_w, 3)


def seed_worker(worker_id):
    """worker_init_fn: a numpy Generator per worker from the worker's torch seed (the DataLoader
    derives it from its generator, hence from --seed, plus worker_id; new each epoch)."""
    info = torch.utils.data.get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


# ----------------------------------------------------------------------------------------------
# Main


def cpu_seconds():
    """User + sys seconds of this process and its reaped children so far."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def parse_flags(argv):
    parser = argparse.ArgumentParser(
        description="PyTorch DataLoader peer of Granary's ResNet-style pipeline; prints one "
                    "JSON line per epoch.")
    parser.add_argument("--data_dir", required=True, help="directory of *.tfrecord files")
    parser.add_argument("--num_workers", type=int, required=True,
                        help="DataLoader worker processes (0: load in the main process)")
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--crop_fraction", type=float, default=0.875,
                        help="crop side as a fraction of the image side, in (0, 1]")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    flags = parser.parse_args(argv)
    if flags.num_workers < 0:
        parser.error(f"--num_workers must be >= 0, got {flags.num_workers}")
    if flags.batch_size < 1:
        parser.error(f"--batch_size must be >= 1, got {flags.batch_size}")
    if not 0 < flags.crop_fraction <= 1:
        parser.error(f"--crop_fraction must be in (0, 1], got {flags.crop_fraction}")
    if flags.epochs < 1:
        parser.error(f"--epochs must be >= 1, got {flags.epochs}")
    return flags


def build_index(data_dir):
    """Returns (paths, index) of every record of data_dir/*.tfrecord."""
    if not os.path.isdir(data_dir):
        raise RecordError(f"--data_dir {data_dir} is not a directory")
    paths = sorted(glob.glob(os.path.join(data_dir, "*.tfrecord")))
    if not paths:
        raise RecordError(f"--data_dir {data_dir} holds no *.tfrecord files")
    index = []
    for file_number, path in enumerate(paths):
        try:
            records = index_tfrecord_file(path)
        except OSError as e:
            raise RecordError(f"{path}: cannot read: {e.strerror}") from None
        for record, (offset, length) in enumerate(records):
            index.append((file_number, record, offset, length))
    if not index:
        raise RecordError(f"the {len(paths)} *.tfrecord files in {data_dir} hold no records")
    return paths, index


def run_epoch(loader, epoch):
    """Runs one epoch and returns its JSON report."""
    cpu_before = cpu_seconds()
    start = last_batch = time.perf_counter()
    images = batches = 0
    iterator = iter(loader)
    for batch_images, _ in iterator:
        images += batch_images.shape[0]
        batches += 1
        last_batch = time.perf_counter()
    # The exhausted iterator has joined its workers; dropping it makes sure of it before the
    # children's rusage is read.
    del iterator
    return {
        "epoch": epoch,
        "images": images,
        "batches": batches,
        "seconds": last_batch - start,
        "cpu_seconds": cpu_seconds() - cpu_before,
        "peak_rss_main_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "peak_rss_workers_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
    }


def main(argv):
    flags = parse_flags(argv)
    try:
        started = time.perf_counter()
        paths, index = build_index(flags.data_dir)
        log(f"indexed {len(index)} records in {len(paths)} files under {flags.data_dir} in "
            f"{time.perf_counter() - started:.3f} s")
        dataset = TfRecordImageDataset(paths, index, flags.crop_fraction, flags.seed)
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=flags.batch_size, shuffle=True, num_workers=flags.num_workers,
            generator=torch.Generator().manual_seed(flags.seed), drop_last=False,
            worker_init_fn=seed_worker)
        for epoch in range(flags.epochs):
            print(json.dumps(run_epoch(loader, epoch)), flush=True)
    except RecordError as e:
        # Raised in a worker, the error arrives with the worker's traceback before its message;
        # the last line is "RecordError: <message>".
        message = str(e).strip().splitlines()[-1].split("RecordError: ", 1)[-1]
        log(f"error: {message}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
