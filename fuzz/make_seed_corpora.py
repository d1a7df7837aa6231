#!/usr/bin/env python3
"""Regenerates the seed corpora fuzz/corpus/<target>/seed-* (docs/verification.md, "Safety nets").

Seeds are made from the real TFRecord fixtures (tests/testdata/tfrecord, written by TensorFlow), cut
into small pieces, plus hand-made edge cases (truncations, bad CRCs, wrong formats). Protobuf
seeds are encoded from text format with `protoc --encode`. Inputs of fuzzer findings are kept
beside the seeds as corpus/<target>/finding-*, and are never touched by this script.

Usage: fuzz/make_seed_corpora.py [--testdata DIR]   (default: tests/testdata/tfrecord)
"""
import argparse
import gzip
import os
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "corpus")


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(record):
    """One TFRecord: length, masked CRC of the length, data, masked CRC of the data."""
    length = struct.pack("<Q", len(record))
    return (length + struct.pack("<I", masked(crc32c(length))) + record +
            struct.pack("<I", masked(crc32c(record))))


def records(data):
    """The records of TFRecord bytes (framing trusted: the fixtures are valid)."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        out.append(data[pos + 12:pos + 12 + n])
        pos += 16 + n
    return out


def encode(message, text):
    """`text` (protobuf text format) encoded as `message` of the repository's protos."""
    return subprocess.run(
        ["protoc", "-I", os.path.join(ROOT, "proto"), "-I", "/usr/include",
         "--encode=granary." + message, "journal.proto", "client.proto", "cache.proto",
         "worker.proto"],
        input=text.encode(), stdout=subprocess.PIPE, check=True).stdout


def features(example):
    """name -> bytes of each bytes_list value of a serialized tf.train.Example (a tiny decoder)."""
    def fields(buf):
        pos = 0
        while pos < len(buf):
            key, pos = varint(buf, pos)
            wire = key & 7
            if wire == 2:
                n, pos = varint(buf, pos)
                yield key >> 3, buf[pos:pos + n]
                pos += n
            elif wire == 0:
                _, pos = varint(buf, pos)
            elif wire == 5:
                pos += 4
            elif wire == 1:
                pos += 8
            else:
                return

    def varint(buf, pos):
        result = shift = 0
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result, pos

    out = {}
    for _, features_msg in fields(example):  # Example.features
        for _, entry in fields(features_msg):  # map entries
            name, value = None, None
            for num, v in fields(entry):
                if num == 1:
                    name = v.decode()
                elif num == 2:
                    for kind, lst in fields(v):
                        if kind == 1:  # bytes_list
                            value = [x for _, x in fields(lst)]
            if name is not None and value:
                out[name] = value[0]
    return out


class Writer:
    def __init__(self):
        self.total = 0

    def target(self, name):
        d = os.path.join(CORPUS, name)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            if f.startswith("seed-"):
                os.remove(os.path.join(d, f))
        return lambda seed, data: self.write(d, seed, data)

    def write(self, d, seed, data):
        with open(os.path.join(d, "seed-" + seed), "wb") as f:
            f.write(data)
        self.total += len(data)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--testdata",
                        default=os.path.join(ROOT, "tests", "testdata", "tfrecord"))
    args = parser.parse_args()

    def fixture(name):
        with open(os.path.join(args.testdata, name), "rb") as f:
            return f.read()

    imagenet = fixture("imagenet_inception_train-00000-of-00001.tfrecord")
    cifar = fixture("cifar10_png.tfrecord")
    tut_images = fixture("tutorial_images.tfrecord")
    tut_features = fixture("tutorial_features.tfrecord")
    penguin_gz = fixture("penguin_eval_gzip.tfrecord.gz")
    penguin = gzip.decompress(penguin_gz)
    jpeg = features(records(imagenet)[0])["image/encoded"]
    small_jpeg = features(records(tut_images)[0])["image_raw"]
    pngs = [features(r)["image/encoded"] for r in records(cifar)]
    w = Writer()

    # TFRecord, uncompressed.
    put = w.target("tfrecord_fuzzer")
    put("tutorial_features", tut_features)
    put("cifar10_png", cifar)
    put("penguin_first3", b"".join(frame(r) for r in records(penguin)[:3]))
    put("empty", b"")
    put("truncated_header", tut_features[:10])
    put("truncated_data", tut_features[:60])
    bad = bytearray(frame(records(tut_features)[0]))
    bad[-1] ^= 1
    put("bad_data_crc", bytes(bad))
    bad = bytearray(tut_features[:200])
    bad[0] ^= 0x40
    put("bad_length_crc", bytes(bad))
    put("huge_length", frame(b"x")[:0] + struct.pack("<Q", 1 << 62) +
        struct.pack("<I", masked(crc32c(struct.pack("<Q", 1 << 62)))) + b"abc")
    put("gzip_magic", penguin_gz[:300])
    put("png_magic", pngs[0][:100])
    put("text", b"hello, world\nnot a tfrecord\n")

    # TFRecord, GZIP.
    put = w.target("tfrecord_gzip_fuzzer")
    put("penguin_eval", penguin_gz)
    put("tutorial_features", gzip.compress(tut_features, mtime=0))
    put("two_members", gzip.compress(frame(b"a"), mtime=0) + gzip.compress(frame(b"bc"), mtime=0))
    put("truncated", penguin_gz[:len(penguin_gz) // 2])
    bad = bytearray(penguin_gz)
    bad[-6] ^= 1  # the CRC-32 in the trailer
    put("bad_trailer_crc", bytes(bad))
    put("empty", b"")
    put("not_gzip", tut_features[:100])
    put("gzip_of_garbage", gzip.compress(b"\x07" * 40, mtime=0))

    # parse_example: serialized tf.train.Example records.
    put = w.target("parse_example_fuzzer")
    for i, r in enumerate(records(tut_features)[:4]):
        put("tutorial_features_%d" % i, r)
    put("tutorial_images_0", records(tut_images)[0])
    put("cifar10_0", records(cifar)[0])
    put("imagenet_0", records(imagenet)[0])
    for i, r in enumerate(records(penguin)[:2]):
        put("penguin_%d" % i, r)
    put("empty", b"")
    put("truncated", records(tut_features)[0][:20])

    # JPEG: three sizes of each image, so that size % 3 picks channels 0, 1 and 3.
    put = w.target("jpeg_fuzzer")
    for extra in range(3):
        put("tutorial_images_c%d" % extra, small_jpeg + b"\0" * extra)
    put("imagenet", jpeg)
    put("truncated_half", small_jpeg[:len(small_jpeg) // 2])
    bad = bytearray(small_jpeg)
    for i in range(len(bad) * 2 // 3, len(bad) * 2 // 3 + 16):
        bad[i] = 0x5A
    put("garbage_in_entropy", bytes(bad))
    put("header_only", small_jpeg[:2])
    put("png", pngs[0])
    put("gif", b"GIF89a\x01\x00\x01\x00\x00\x00\x00")
    put("empty", b"")

    # PNG: cifar's 32x32 PNGs; sizes spread over size % 5 (channels 0..4).
    put = w.target("png_fuzzer")
    for i, png in enumerate(pngs):
        put("cifar10_%d" % i, png)
    for extra in range(1, 5):
        put("cifar10_0_c%d" % extra, pngs[0] + b"\0" * extra)
    put("truncated_half", pngs[1][:len(pngs[1]) // 2])
    bad = bytearray(pngs[2])
    bad[len(bad) // 2] ^= 0xFF
    put("corrupt_idat", bytes(bad))
    put("signature_only", pngs[0][:8])
    put("jpeg", small_jpeg[:200])

    # Pipeline JSON.
    put = w.target("pipeline_json_fuzzer")
    for name in ("imagenet_resnet.json", "text_lines.json"):
        with open(os.path.join(ROOT, "examples", name), "rb") as f:
            put(name, f.read().replace(b"${GRANARY_DATA}", b"${GRANARY_FUZZ_DIR}"))
    put("range_batch", b'{"source": {"type": "range", "params": {"start": 0, "stop": 100}},'
        b' "ops": [{"op": "shuffle", "params": {"buffer_size": 8}},'
        b' {"op": "batch", "params": {"batch_size": 4}}]}')
    put("huge_batch", b'{"source": {"type": "range", "params": {"stop": 10}},'
        b' "ops": [{"op": "batch", "params": {"batch_size": 1e11}}]}')
    put("huge_resize", b'{"source": {"type": "range", "params": {"stop": 10}},'
        b' "ops": [{"op": "map", "udf": "resize", "udfParams": {"height": 1000000,'
        b' "width": 1000000}}]}')
    put("unterminated", b'{"source": {"type": "${GRANARY_FUZZ_DIR"}}')
    put("empty_placeholder", b'{"source": {"type": "${}"}}')
    put("unset", b'{"source": {"type": "${NO_SUCH_GRANARY_VAR}"}}')
    put("empty_var", b'{"source": {"type": "range${GRANARY_FUZZ_EMPTY}"}}')
    put("unknown_field", b'{"source": {"type": "range"}, "opz": []}')
    put("not_json", b"source: range\n")

    # Cache chunks: TFRecord-framed CachedElement records.
    put = w.target("cache_chunk_fuzzer")
    elements = [
        'index: 0 element { tensors { dtype: DT_INT64 content: "\\001\\000\\000\\000\\000\\000'
        '\\000\\000" } split_id: 3 record: 0 }',
        'index: 1 element { tensors { dtype: DT_UINT8 shape: 2 shape: 2 shape: 1 content: '
        '"abcd" } tensors { dtype: DT_STRING shape: 2 string_values: "x" string_values: "yz" }'
        ' split_id: 3 record: 1 }',
        'index: 2 element { tensors { dtype: DT_FLOAT shape: 1 content: "\\000\\000\\200?" } '
        'split_id: 3 record: 2 }',
    ]
    encoded = [encode("CachedElement", e) for e in elements]
    put("three_elements", b"".join(frame(e) for e in encoded))
    put("shape_mismatch", frame(encode("CachedElement",
        'index: 0 element { tensors { dtype: DT_INT64 shape: 1000000 shape: 1000000 content: '
        '"\\001" } }')))
    put("string_count_mismatch", frame(encode("CachedElement",
        'index: 0 element { tensors { dtype: DT_STRING shape: 3 string_values: "a" } }')))
    put("negative_shape", frame(encode("CachedElement",
        'index: 0 element { tensors { dtype: DT_UINT8 shape: -1 shape: -1 } }')))
    put("not_an_element", frame(b"\xff\xff\xff"))
    put("truncated", b"".join(frame(e) for e in encoded)[:-5])

    # Checkpoint files: magic, task, generation, index, owner length, state length, owner,
    # state, masked CRC (checkpoint/FORMAT.md).
    put = w.target("checkpoint_fuzzer")

    def checkpoint(task, gen, index, state, length=None, owner=b""):
        body = (b"GRNCKPT2" + struct.pack("<QQQQQ", task, gen, index, len(owner),
                                          len(state) if length is None else length) +
                owner + state)
        return body + struct.pack("<I", masked(crc32c(body)))

    state = b"an opaque iterator state"
    good = checkpoint(1, 0, 0, state)
    put("valid", good)
    put("valid_other_task", checkpoint(2, 1, 5, state))
    put("other_owner", checkpoint(1, 0, 0, state, owner=b"cluster-1234"))
    put("empty_state", checkpoint(1, 0, 0, b""))
    put("truncated", good[:-3])
    put("trailing", good + b"\0")
    bad = bytearray(good)
    bad[50] ^= 1
    put("bad_crc", bytes(bad))
    put("huge_length", checkpoint(1, 0, 0, b"abc", length=(1 << 64) - 2))
    put("magic_only", b"GRNCKPT2")
    put("old_format", b"GRNCKPT1" + good[8:])
    put("empty", b"")

    # Journal records: 4-byte little-endian length + an Update, in replay order.
    put = w.target("journal_record_fuzzer")
    pipeline = ('pipeline { source { type: "range" params { fields { key: "stop" value '
                '{ number_value: 20 } } } } }')
    updates = [
        'register_worker { worker_id: "w1" address: "localhost:1" }',
        'register_worker { worker_id: "w2" address: "localhost:2" }',
        'register_dataset { dataset_id: "d1" %s }' % pipeline,
        'create_job { name: "j" dataset_id: "d1" options { seed: 7 num_consumers: 1 '
        'num_worker_slots: 2 num_epochs: 2 } }',
        'start_epoch { job_id: 1 epoch: 0 plan { id: 0 num_records: 10 } '
        'plan { id: 1 begin_record: 10 num_records: 10 } }',
        'lease_splits { task_id: 1 from_seq: 0 max: 1 }',
        'lease_splits { task_id: 2 from_seq: 0 max: 1 }',
        'worker_lost { worker_id: "w2" incarnation: 1 }',
        'task_finished { task_id: 1 generation: 1 num_elements: 10 }',
        'task_finished { task_id: 2 generation: 2 num_elements: 10 }',
        'retire_job { job_id: 1 }',
    ]

    def journal(texts):
        out = b""
        for t in texts:
            u = encode("Update", t)
            out += struct.pack("<I", len(u)) + u
        return out

    put("lifecycle", journal(updates))
    put("huge_counts", journal(updates[:3] + [
        'create_job { name: "big" dataset_id: "d1" options { num_consumers: 2147483647 '
        'num_worker_slots: 2147483647 } }',
        'start_epoch { job_id: 1 epoch: 0 }']))
    put("lease_int64_max", journal(updates[:5] + [
        'lease_splits { task_id: 1 from_seq: 0 max: 9223372036854775807 }']))
    put("unknown_refs", journal([
        'lease_splits { task_id: 99 from_seq: 3 max: -1 }',
        'task_finished { task_id: -1 generation: -5 num_elements: -7 }',
        'start_epoch { job_id: 42 epoch: -1 }', 'retire_job { job_id: 0 }']))
    put("not_updates", b"\x03\x00\x00\x00\xff\xff\xff\x40\x00\x00\x00")

    # Snapshots: DispatcherStateProto.
    put = w.target("journal_snapshot_fuzzer")
    put("small", encode("DispatcherStateProto", '''
applied_seq: 9 next_job_id: 2 next_task_id: 3
datasets { dataset_id: "d1" %s }
jobs { job_id: 1 name: "j" dataset_id: "d1" options { seed: 7 num_consumers: 1
       num_worker_slots: 2 num_epochs: 2 } epochs_started: 1 }
epochs { job_id: 1 epoch: 0 plan { id: 0 num_records: 10 } plan { id: 1 num_records: 10 }
         next_split: 2 task_ids: 1 task_ids: 2 }
tasks { task_id: 1 job_id: 1 epoch: 0 consumer: 0 slot: 0 worker_id: "w1" generation: 1
        leased { id: 0 num_records: 10 } }
tasks { task_id: 2 job_id: 1 epoch: 0 consumer: 0 slot: 1 worker_id: "w1" generation: 1
        leased { id: 1 num_records: 10 } finished: true num_elements: 10 }
workers { worker_id: "w1" address: "localhost:1" incarnation: 1 }
''' % pipeline))
    put("dangling", encode("DispatcherStateProto",
        'tasks { task_id: 5 job_id: 9 epoch: 3 } epochs { job_id: 9 epoch: 3 task_ids: 5 '
        'task_ids: 6 } jobs { job_id: 1 } jobs { job_id: 1 }'))
    put("empty", b"")

    # Client positions: EpochReader::SavePosition blobs and `granary run` position files.
    put = w.target("run_position_fuzzer")
    blob = b"GPOS1" + encode("ClientPosition",
                             "job_id: 1 epoch: 0 consumer: 0 next_index { key: 1 value: 5 } "
                             "next_index { key: 2 value: 0 }")
    put("blob", blob)
    put("blob_negative", b"GPOS1" + encode("ClientPosition",
                                           "job_id: 1 next_index { key: 1 value: -5 }"))
    put("blob_truncated", blob[:-3])
    put("blob_no_magic", blob[5:])
    import base64
    put("file", b"granary-run-position 1\nepoch 0\nrows 4096\nmultiset 0123456789abcdef\n"
        b"duplicates 2\nreader " + base64.b64encode(blob) + b"\n")
    put("file_start", b"granary-run-position 1\nepoch 3\nrows 0\nmultiset 0000000000000000\n"
        b"duplicates 0\nreader \n")
    put("file_bad_base64", b"granary-run-position 1\nepoch 0\nrows 1\nmultiset 00\n"
        b"duplicates 0\nreader @@@\n")
    put("file_overflow", b"granary-run-position 1\nepoch 99999999999999999999\nrows -1\n")
    put("empty", b"")

    # Element images (transport/FORMAT.md) and GetElements answers, encoded from text format;
    # the first image has an alignment_padding field, as Granary's writer lays it out.
    put = w.target("element_image_fuzzer")
    image = encode("ElementProto",
                   'tensors { dtype: DT_FLOAT shape: [2, 3] alignment_padding: "\\0\\0\\0" '
                   'content: "' + "\\000" * 24 + '" } '
                   'tensors { dtype: DT_INT64 content: "\\373\\377\\377\\377\\377\\377\\377\\377" } '
                   'tensors { dtype: DT_STRING shape: 2 string_values: "granary" string_values: "" } '
                   "split_id: 77 record: -3")
    put("image", image)
    put("empty", b"")
    put("truncated", image[:len(image) // 2])
    put("wrong_content_size", encode("ElementProto",
                                     'tensors { dtype: DT_FLOAT shape: 3 content: "12345678" }'))
    put("response", encode("GetElementsResponse",
                           "elements { index: 5 checksum: 4660 payload: '%s' } "
                           "elements { index: 6 } end_of_task: true num_elements: 9 recomputed: 2"
                           % "".join("\\%03o" % b for b in image)))
    tail_text = ('steps { label: "op 6 (parallel_map, udf \'normalize\')" normalize { '
                 "scale: 0.00392157 mean: [0.485, 0.456, 0.406] std: [0.229, 0.224, 0.225] } } "
                 "batch_dims: 1")
    put("response_with_tail", encode("GetElementsResponse",
                                     "elements { index: 1 checksum: 1 payload: '%s' } "
                                     "trainer_tail { %s }"
                                     % ("".join("\\%03o" % b for b in image), tail_text)))

    # The client's trainer-side tail (client/trainer_tail_runner.h): a TrainerTailDef's length
    # (2 bytes, little-endian), the def, then an element image it runs on.
    put = w.target("trainer_tail_fuzzer")
    tail = encode("TrainerTailDef", tail_text)
    batch = encode("ElementProto",
                   'tensors { dtype: DT_UINT8 shape: [2, 2, 2, 3] content: "' +
                   "".join("\\%03o" % (i * 11 % 256) for i in range(24)) + '" } '
                   'tensors { dtype: DT_INT64 shape: 2 content: "' + "\\001" * 16 + '" } '
                   "split_id: 4 record: 17")
    put("batch", struct.pack("<H", len(tail)) + tail + batch)
    floats = encode("ElementProto",
                    'tensors { dtype: DT_FLOAT shape: [1, 2, 1, 3] content: "' +
                    "\\000\\000\\200\\077" * 6 + '" }')
    put("float_batch", struct.pack("<H", len(tail)) + tail + floats)
    put("wrong_rank", struct.pack("<H", len(tail)) + tail + image)
    put("empty", b"")

    print("wrote %d bytes of seeds under %s" % (w.total, CORPUS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
