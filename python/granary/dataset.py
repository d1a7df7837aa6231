"""granary.Dataset: a pipeline definition built in Python, in the idiom of tf.data.

A Dataset is immutable: every method returns a new one with one more op, so a common prefix
can be shared and extended:

    base = granary.Dataset.tfrecord(["/data/train-*.tfrecord"], records_per_split=512)
    train = (base.shuffle(1024)
                 .map("parse_example", keys=["image/encoded", "image/class/label"],
                      dtypes=["bytes", "int64"], num_threads=4)
                 .map("decode_jpeg", num_threads=4)
                 .mark("decoded")
                 .map("random_crop", height=224, width=224)
                 .batch(128)
                 .prefetch(2))

It holds the pipeline in the JSON form of pipeline files (protobuf's JSON mapping of
PipelineDef, docs/pipelines.md), so `to_json()` writes a file `granary run --pipeline` reads and
`Dataset.from_json(path)` reads one. Each step is checked at once by the C++ pipeline builder (op
and UDF names, parameter types and ranges): a mistake raises granary.InvalidArgument naming it.
"""

import base64
import json

from granary import _granary

__all__ = ["Dataset"]


def _source_params(files, compression, per_split_key, per_split, shuffle_splits):
    if isinstance(files, str):
        files = [files]
    params = {"files": list(files)}
    if compression:
        params["compression"] = compression
    if per_split:
        params[per_split_key] = per_split
    if shuffle_splits:
        params["shuffle_splits"] = True
    return params


def _udf_and_params(udf, python_udf, udf_params, **python_params):
    """The UDF name and params of a map or filter op given `udf`: a UDF's name (with
    `udf_params`), or a Python function — then the UDF `python_udf` ("python" or
    "python_filter") carrying the function's cloudpickle (base64) and the `python_params`
    given (timeout_ms, determinism_check_every; None: the default)."""
    python_params = {k: v for k, v in python_params.items() if v is not None}
    if not callable(udf):
        if python_params:
            raise _granary.InvalidArgument(
                f"{', '.join(sorted(python_params))} is for Python functions, not for UDF "
                f"'{udf}'")
        return udf, udf_params
    if udf_params:
        raise _granary.InvalidArgument(
            f"a Python function takes no UDF params ({', '.join(sorted(udf_params))}): bind "
            "them in the function (a closure or functools.partial)")
    try:
        import cloudpickle
    except ImportError as error:
        raise _granary.FailedPrecondition(
            "Python functions as UDFs are shipped with cloudpickle, which this interpreter "
            "lacks (Debian's python3-cloudpickle)") from error
    try:
        pickled = cloudpickle.dumps(udf)
    except Exception as error:  # noqa: BLE001 (whatever pickling raised, said plainly)
        name = getattr(udf, "__qualname__", repr(udf))
        raise _granary.InvalidArgument(
            f"the Python function {name} could not be pickled to ship it to the workers "
            f"(cloudpickle): {type(error).__name__}: {error} — it, or what it closes over or "
            "refers to, must be picklable: create locks, sockets, open files and the like "
            "inside the function instead") from error
    params = {"function": base64.b64encode(pickled).decode("ascii")}
    params.update(python_params)
    return python_udf, params


class Dataset:
    """An immutable pipeline definition (see the module docstring)."""

    __slots__ = ("_definition", "_serialized", "_batched")

    def __init__(self, definition):
        # `definition`: the pipeline as a JSON-compatible dict. Checked here, so that every
        # Dataset that exists is a valid pipeline.
        self._definition = definition
        self._serialized = _granary.parse_pipeline_json(json.dumps(definition), "Dataset")
        self._batched = _granary.validate_pipeline(self._serialized)

    # --- Sources ---

    @staticmethod
    def range(stop, start=0, step=1, elements_per_split=0, shuffle_splits=False):
        """The integers start, start + step, ... below stop, as int64 scalars."""
        params = {"stop": stop}
        if start:
            params["start"] = start
        if step != 1:
            params["step"] = step
        if elements_per_split:
            params["elements_per_split"] = elements_per_split
        if shuffle_splits:
            params["shuffle_splits"] = True
        return Dataset({"source": {"type": "range", "params": params}})

    @staticmethod
    def tfrecord(files, compression=None, records_per_split=0, shuffle_splits=False):
        """The records of TFRecord files (glob patterns), as scalar bytes tensors.

        compression: None, "GZIP" or "auto" (by the .gz suffix). records_per_split: 0 makes a
        split of each file.
        """
        return Dataset({"source": {"type": "tfrecord", "params": _source_params(
            files, compression, "records_per_split", records_per_split, shuffle_splits)}})

    @staticmethod
    def text_lines(files, compression=None, lines_per_split=0, shuffle_splits=False):
        """The lines of text files (glob patterns), as scalar bytes tensors."""
        return Dataset({"source": {"type": "text_lines", "params": _source_params(
            files, compression, "lines_per_split", lines_per_split, shuffle_splits)}})

    @staticmethod
    def from_json(path):
        """The pipeline file at `path` (${NAME} placeholders expanded from the environment)."""
        serialized = _granary.load_pipeline_file(path)
        return Dataset(json.loads(_granary.pipeline_to_json(serialized)))

    # --- Ops ---

    def _with(self, op):
        definition = json.loads(json.dumps(self._definition))  # a deep copy
        definition.setdefault("ops", []).append(op)
        return Dataset(definition)

    def map(self, udf, num_threads=None, timeout_ms=None, determinism_check_every=None,
            **udf_params):
        """Applies the UDF `udf` (with `udf_params`) to every element; on `num_threads` threads
        (order preserved) when given — 0: as many as the pipeline's autotuner finds best.

        `udf` is a built-in or plugin UDF's name, or a Python function: fn(*tensors) -> array,
        bytes or a tuple of them, called with the element's tensors as NumPy arrays (a bytes
        scalar as bytes) and, if it has a parameter named `rng`, a numpy.random.Generator keyed
        by the element (its only allowed randomness: the function must be deterministic given
        its arguments, or recomputed elements differ). It is shipped with its closure
        (cloudpickle) and run by the workers' helper processes — workers started with
        --allow_python_udfs — one per thread; a call longer than `timeout_ms` (default 60 s) is
        killed and fails its element. The first call and one in `determinism_check_every`
        (default 1000; 0: none) are made twice, and different results fail the job as not
        deterministic (docs/python.md)."""
        udf, udf_params = _udf_and_params(udf, "python", udf_params, timeout_ms=timeout_ms,
                                          determinism_check_every=determinism_check_every)
        op = {"op": "map" if num_threads is None else "parallel_map", "udf": udf}
        if num_threads is not None:
            op["params"] = {"num_threads": num_threads}
        if udf_params:
            op["udfParams"] = udf_params
        return self._with(op)

    def filter(self, udf, timeout_ms=None, determinism_check_every=None, **udf_params):
        """Keeps the elements the predicate UDF `udf` accepts: a UDF's name, or a Python
        function fn(*tensors) -> bool, run as map's (see map)."""
        udf, udf_params = _udf_and_params(udf, "python_filter", udf_params,
                                          timeout_ms=timeout_ms,
                                          determinism_check_every=determinism_check_every)
        op = {"op": "filter", "udf": udf}
        if udf_params:
            op["udfParams"] = udf_params
        return self._with(op)

    def ignore_errors(self):
        """After a map or filter: drops the elements whose UDF failed with DataLoss or
        InvalidArgument (counted as skipped)."""
        return self._with({"op": "ignore_errors"})

    def shuffle(self, buffer_size, seed=None):
        """A uniform random pick from a buffer of `buffer_size` elements (keyed by the job
        seed, the epoch and `seed`)."""
        params = {"buffer_size": buffer_size}
        if seed is not None:
            params["seed"] = seed
        return self._with({"op": "shuffle", "params": params})

    def batch(self, batch_size, drop_remainder=False):
        """Stacks `batch_size` rows into one element (shapes must agree)."""
        return self._with({"op": "batch", "params": {"batch_size": batch_size,
                                                      "drop_remainder": drop_remainder}})

    def take(self, count):
        return self._with({"op": "take", "params": {"count": count}})

    def skip(self, count):
        return self._with({"op": "skip", "params": {"count": count}})

    def prefetch(self, buffer_size=2):
        """A background thread runs `buffer_size` elements ahead."""
        return self._with({"op": "prefetch", "params": {"buffer_size": buffer_size}})

    def mark(self, name):
        """A named candidate cache location (cache_policy="at_mark" caches up to the first;
        "auto" lets the dispatcher choose among them, or not to cache)."""
        return self._with({"op": "mark", "params": {"name": name}})

    # --- The definition ---

    def to_json(self, indent=2):
        """The pipeline file's JSON."""
        return json.dumps(self._definition, indent=indent)

    def pipeline_def(self):
        """The serialized PipelineDef (deterministic bytes: equal pipelines, equal bytes)."""
        return self._serialized

    @property
    def batched(self):
        """Whether the elements are batches (the pipeline has a batch op)."""
        return self._batched

    def __eq__(self, other):
        return isinstance(other, Dataset) and self._serialized == other._serialized

    def __hash__(self):
        return hash(self._serialized)

    def __repr__(self):
        ops = [op["op"] if "udf" not in op else f"{op['op']}({op['udf']})"
               for op in self._definition.get("ops", [])]
        return f"Dataset({self._definition['source']['type']}{''.join(' -> ' + o for o in ops)})"
