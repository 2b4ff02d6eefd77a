"""Check a .tflite file before TFLite sees it: a damaged file is a ValueError, never a signal.

TFLite's Python ``Interpreter`` builds its model with ``FlatBufferModel::BuildFromFile`` /
``BuildFromBuffer``, which do not run the flatbuffer verifier: the interpreter builder then
follows every offset of the file as it finds it, and a truncated or damaged file makes it read
outside the mapping (SIGSEGV / SIGBUS, issue #12). :func:`check_bytes` walks the file the way
the builder will and refuses it, naming the first problem, when any read would leave the file.

Rules (each failure is a :class:`ModelFormatError` naming the file and the offending object):

* structure: at least 8 bytes, identifier ``TFL3``, a root table offset inside the file; every
  table's vtable inside the file (size even, >= 4, table size >= 4), the table's own bytes inside
  the file, every field inside its table; every offset (table, vector, string) pointing inside
  the file; every vector's elements inside the file; every string NUL-terminated inside it.
  This is applied recursively to all the tables TFLite's interpreter builder reads: Model,
  OperatorCode, SubGraph, Tensor, QuantizationParameters (and CustomQuantization),
  SparsityParameters / DimensionMetadata / their index vectors, VariantSubType, Buffer, Metadata,
  SignatureDef / TensorMap, Operator. Builtin options tables decoded by dtpu.tflite_model, the
  ones that hold vectors or strings (ConcatEmbeddings, Reshape, Squeeze, VarHandle, Bucketize)
  and the StableHLO ones of builtin_options_2 are checked field by field; any other options
  table (scalars only) is checked as a table (vtable, table bytes and every field's start inside
  it) without knowing its fields' sizes: a field wider than the bytes left in its table is not
  detected there.
  A nesting depth of 64 and 10^6 tables bound the walk, as flatbuffers' own verifier does.
* model: schema version 3 (what TFLite requires), at least one subgraph.
* indices: every operator's opcode index below the number of operator codes; every operator
  input, output and intermediate, and every subgraph input and output, either -1 (an omitted
  optional operand; TFLite's CheckTensorIndices lets -1 through everywhere) or a tensor of its
  subgraph; every tensor's buffer index
  below the number of buffers; signature tensor maps inside their subgraph.
* data: a tensor with a non-empty buffer (of a fixed-size type, not sparse) has at least as many
  bytes as its shape and type need; a buffer or custom options stored past the flatbuffer
  (offset/size, models over 2 GiB) lie inside the file; quantization has at least as many zero points as scales
  (TFLite reads one zero point per scale).

Never stricter than TFLite on a model it accepts: only what TFLite itself reads is checked, and
the data rules are TFLite's own (it requires equal sizes where this requires enough).

Written against the schema directly (about 40 field positions) rather than with the ``tflite``
package's generated classes that dtpu.tflite_model parses with: those do no bounds checking, so
every check here would still be ours, and a verifier has to know where each field lies and how
wide it is, which the generated getters hide. dtpu.tflite_model does the parsing that follows a
successful check.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

MAX_DEPTH = 64
MAX_TABLES = 1_000_000
SCHEMA_VERSION = 3

# TensorType -> bytes per element; None: variable-size (string, resource, variant) or packed (int4)
TYPE_SIZES = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 5: None, 6: 1, 7: 2, 8: 8, 9: 1, 10: 8, 11: 16, 12: 8,
              13: None, 14: None, 15: 4, 16: 2, 17: None}

# Field kinds of the tables walked here: a scalar's struct code, or a reference kind:
# ("table", name), ("vector", scalar code), ("tables", name), "string", ("union", type field,
# {type code: table name}).
_S = struct.calcsize
SCHEMA: dict[str, dict[int, object]] = {
    "Model": {0: "I", 1: ("tables", "OperatorCode"), 2: ("tables", "SubGraph"), 3: "string",
              4: ("tables", "Buffer"), 5: ("vector", "i"), 6: ("tables", "Metadata"),
              7: ("tables", "SignatureDef")},
    "OperatorCode": {0: "b", 1: "string", 2: "i", 3: "i"},
    "SubGraph": {0: ("tables", "Tensor"), 1: ("vector", "i"), 2: ("vector", "i"),
                 3: ("tables", "Operator"), 4: "string"},
    "Tensor": {0: ("vector", "i"), 1: "b", 2: "I", 3: "string", 4: ("table", "QuantizationParameters"),
               5: "B", 6: ("table", "SparsityParameters"), 7: ("vector", "i"), 8: "B",
               9: ("tables", "VariantSubType")},
    "QuantizationParameters": {0: ("vector", "f"), 1: ("vector", "f"), 2: ("vector", "f"),
                               3: ("vector", "q"), 4: "B",
                               5: ("union", 4, {1: "CustomQuantization"}), 6: "i"},
    "CustomQuantization": {0: ("vector", "B")},
    "SparsityParameters": {0: ("vector", "i"), 1: ("vector", "i"), 2: ("tables", "DimensionMetadata")},
    "DimensionMetadata": {0: "b", 1: "i", 2: "B", 3: ("union", 2, {1: "Int32Vector", 2: "Uint16Vector",
                                                                  3: "Uint8Vector"}),
                          4: "B", 5: ("union", 4, {1: "Int32Vector", 2: "Uint16Vector",
                                                   3: "Uint8Vector"})},
    "Int32Vector": {0: ("vector", "i")},
    "Uint16Vector": {0: ("vector", "H")},
    "Uint8Vector": {0: ("vector", "B")},
    "VariantSubType": {0: ("vector", "i"), 1: "b", 2: "B"},
    "Buffer": {0: ("vector", "B"), 1: "Q", 2: "Q"},
    "Metadata": {0: "string", 1: "I"},
    "SignatureDef": {0: ("tables", "TensorMap"), 1: ("tables", "TensorMap"), 2: "string",
                     4: "I"},
    "TensorMap": {0: "string", 1: "I"},
    "Operator": {0: "I", 1: ("vector", "i"), 2: ("vector", "i"), 3: "B",
                 4: ("union", 3, "BuiltinOptions"), 5: ("vector", "B"), 6: "b", 7: ("vector", "B"),
                 8: ("vector", "i"), 9: "Q", 10: "Q", 11: "B", 12: ("union", 11, "BuiltinOptions2")},
    # BuiltinOptions members with a known layout (the union's type code in the key's comment)
    "Conv2DOptions": {0: "b", 1: "i", 2: "i", 3: "b", 4: "i", 5: "i", 6: "b"},          # 1
    "DepthwiseConv2DOptions": {0: "b", 1: "i", 2: "i", 3: "i", 4: "b", 5: "i", 6: "i"},  # 2
    "ConcatEmbeddingsOptions": {0: "i", 1: ("vector", "i"), 2: ("vector", "i")},        # 3
    "Pool2DOptions": {0: "b", 1: "i", 2: "i", 3: "i", 4: "i", 5: "b"},                  # 5
    "FullyConnectedOptions": {0: "b", 1: "b", 2: "B", 3: "B", 4: "b"},                  # 8
    "SoftmaxOptions": {0: "f"},                                                         # 9
    "AddOptions": {0: "b", 1: "B"},                                                     # 11
    "ReshapeOptions": {0: ("vector", "i")},                                             # 17
    "MulOptions": {0: "b"},                                                             # 21
    "ReducerOptions": {0: "B"},                                                         # 27
    "SqueezeOptions": {0: ("vector", "i")},                                             # 30
    "ConcatenationOptions": {0: "i", 1: "b"},                                           # 10
    "VarHandleOptions": {0: "string", 1: "string"},                                     # 111
    "BucketizeOptions": {0: ("vector", "f")},                                           # 115
    # BuiltinOptions2 members (StableHLO), all of them but DilateOptions
    "StablehloConcatenateOptions": {0: "q"},
    "StablehloBroadcastInDimOptions": {0: ("vector", "q")},
    "StablehloSliceOptions": {0: ("vector", "q"), 1: ("vector", "q"), 2: ("vector", "q")},
    "StablehloConvolutionOptions": {0: ("vector", "q"), 1: ("vector", "q"), 2: ("vector", "q"),
                                    3: ("vector", "q"), 4: ("vector", "B"), 5: "q", 6: "q",
                                    7: ("vector", "q"), 8: "q", 9: "q", 10: ("vector", "q"),
                                    11: "q", 12: "q", 13: ("vector", "q"), 14: "q", 15: "q",
                                    16: ("vector", "I")},
    "StablehloCustomCallOptions": {0: "string", 1: "B", 2: "string", 3: "i", 4: ("vector", "i"),
                                   5: ("vector", "B")},
    "StablehloReduceOptions": {0: ("vector", "q"), 1: "i"},
    "StablehloScatterOptions": {0: "B", 1: ("vector", "q"), 2: ("vector", "q"),
                                3: ("vector", "q"), 4: "q", 5: "B", 6: "i"},
    "StablehloCompareOptions": {0: "I", 1: "I"},
    "StablehloDynamicSliceOptions": {0: ("vector", "q")},
    "StablehloPadOptions": {0: ("vector", "q"), 1: ("vector", "q"), 2: ("vector", "q")},
    "StablehloIotaOptions": {0: "q"},
    "StablehloDotGeneralOptions": {0: ("vector", "q"), 1: ("vector", "q"), 2: ("vector", "q"),
                                   3: ("vector", "q"), 4: ("vector", "I")},
    "StablehloReduceWindowOptions": {0: ("vector", "q"), 1: ("vector", "q"), 2: ("vector", "q"),
                                     3: ("vector", "q"), 4: ("vector", "q"), 5: "i"},
    "StablehloSortOptions": {0: "q", 1: "B", 2: "i"},
    "StablehloWhileOptions": {0: "i", 1: "i"},
    "StablehloGatherOptions": {0: ("vector", "q"), 1: ("vector", "q"), 2: ("vector", "q"),
                               3: "q", 4: ("vector", "q"), 5: "B"},
    "StablehloTransposeOptions": {0: ("vector", "q")},
    "StablehloRngBitGeneratorOptions": {0: "b"},
}
BUILTIN_OPTIONS = {1: "Conv2DOptions", 2: "DepthwiseConv2DOptions", 3: "ConcatEmbeddingsOptions",
                   5: "Pool2DOptions", 8: "FullyConnectedOptions", 9: "SoftmaxOptions",
                   10: "ConcatenationOptions", 11: "AddOptions", 17: "ReshapeOptions",
                   21: "MulOptions", 27: "ReducerOptions", 30: "SqueezeOptions",
                   111: "VarHandleOptions", 115: "BucketizeOptions"}
BUILTIN_OPTIONS_2 = {1: "StablehloConcatenateOptions", 2: "StablehloBroadcastInDimOptions",
                     3: "StablehloSliceOptions", 4: "StablehloConvolutionOptions",
                     5: "StablehloCustomCallOptions", 6: "StablehloReduceOptions",
                     7: "StablehloScatterOptions", 8: "StablehloCompareOptions",
                     9: "StablehloDynamicSliceOptions", 10: "StablehloPadOptions",
                     11: "StablehloIotaOptions", 12: "StablehloDotGeneralOptions",
                     13: "StablehloReduceWindowOptions", 14: "StablehloSortOptions",
                     15: "StablehloWhileOptions", 16: "StablehloGatherOptions",
                     17: "StablehloTransposeOptions", 19: "StablehloRngBitGeneratorOptions"}


class ModelFormatError(ValueError):
    """The file is not a TFLite model TFLite could read safely; the message says where and why."""


class _Checker:
    def __init__(self, buf: bytes, name: str) -> None:
        self.buf = buf
        self.size = len(buf)
        self.name = name
        self.tables = 0

    def fail(self, what: str) -> None:
        raise ModelFormatError(f"{self.name}: {what}")

    # -- primitives ------------------------------------------------------------------------------
    def _need(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or pos + size > self.size:
            self.fail(f"{what} at byte {pos} ({size} bytes) lies outside the {self.size}-byte file"
                      + (" (truncated?)" if pos >= 0 else ""))

    def read(self, fmt: str, pos: int, what: str):
        self._need(pos, _S("<" + fmt), what)
        return struct.unpack_from("<" + fmt, self.buf, pos)[0]

    def table(self, pos: int, what: str, depth: int) -> tuple[int, list[int]]:
        """Check the table at `pos`; (table size, field offsets per field index)."""
        if depth > MAX_DEPTH:
            self.fail(f"{what}: tables nested deeper than {MAX_DEPTH}")
        self.tables += 1
        if self.tables > MAX_TABLES:
            self.fail(f"more than {MAX_TABLES} tables")
        vtable = pos - self.read("i", pos, f"{what} (table)")
        vt_size = self.read("H", vtable, f"{what}'s vtable")
        t_size = self.read("H", vtable + 2, f"{what}'s vtable")
        if vt_size < 4 or vt_size % 2:
            self.fail(f"{what}: vtable at byte {vtable} declares {vt_size} bytes (must be even, >= 4)")
        self._need(vtable, vt_size, f"{what}'s vtable")
        if t_size < 4:
            self.fail(f"{what}: table at byte {pos} declares {t_size} bytes (must be >= 4)")
        self._need(pos, t_size, what)
        offsets = list(struct.unpack_from(f"<{(vt_size - 4) // 2}H", self.buf, vtable + 4))
        for index, off in enumerate(offsets):
            if off and (off < 4 or off >= t_size):
                self.fail(f"{what}: field {index} at offset {off} lies outside its {t_size}-byte table")
        return t_size, offsets

    def field(self, pos: int, t_size: int, offsets: list[int], index: int, size: int,
              what: str) -> int | None:
        """Position of field `index` (None: absent), checked to hold `size` bytes in its table."""
        off = offsets[index] if index < len(offsets) else 0
        if not off:
            return None
        if off + size > t_size:
            self.fail(f"{what}: field {index} ({size} bytes at offset {off}) runs past its "
                      f"{t_size}-byte table")
        return pos + off

    def deref(self, pos: int, what: str) -> int:
        target = pos + self.read("I", pos, what)
        if target >= self.size:
            self.fail(f"{what}: offset at byte {pos} points to byte {target}, past the end of the "
                      f"{self.size}-byte file (truncated?)")
        return target

    def vector(self, pos: int, elem: int, what: str) -> tuple[int, int]:
        """(start of the elements, count) of the vector at `pos`, all inside the file."""
        n = self.read("I", pos, f"{what} (vector length)")
        if n * elem > self.size - pos - 4:
            self.fail(f"{what}: vector of {n} x {elem} bytes at byte {pos} runs past the end of the "
                      f"{self.size}-byte file")
        return pos + 4, n

    def string(self, pos: int, what: str) -> None:
        start, n = self.vector(pos, 1, what)
        if start + n >= self.size or self.buf[start + n] != 0:
            self.fail(f"{what}: string of {n} bytes at byte {pos} is not NUL-terminated inside "
                      "the file")

    # -- schema walk -----------------------------------------------------------------------------
    def walk(self, pos: int, kind: str, what: str, depth: int = 0) -> dict[int, object]:
        """Check the table at `pos` as `kind`; its fields' values (scalars, vector (start, n),
        table positions, lists of table positions) by field index."""
        t_size, offsets = self.table(pos, what, depth)
        layout = SCHEMA.get(kind)
        values: dict[int, object] = {}
        if layout is None:  # an options table of unlisted layout: its bounds only (see above)
            return values
        for index, spec in layout.items():
            if isinstance(spec, str) and spec != "string":
                at = self.field(pos, t_size, offsets, index, _S("<" + spec), what)
                if at is not None:
                    values[index] = struct.unpack_from("<" + spec, self.buf, at)[0]
                continue
            at = self.field(pos, t_size, offsets, index, 4, what)
            if at is None:
                continue
            sub = f"{what}.{_FIELD_NAMES.get((kind, index), f'field{index}')}"
            if spec == "string":
                self.string(self.deref(at, sub), sub)
                values[index] = True
                continue
            ref = spec[0]
            if ref == "union":
                type_code = values.get(spec[1], 0)
                if not type_code:
                    continue
                members = spec[2] if isinstance(spec[2], dict) else (
                    BUILTIN_OPTIONS if spec[2] == "BuiltinOptions" else BUILTIN_OPTIONS_2)
                member = members.get(type_code, f"{spec[2]}[{type_code}]")
                values[index] = self.walk(self.deref(at, sub), member, f"{sub} ({member})", depth + 1)
                continue
            target = self.deref(at, sub)
            if ref == "table":
                values[index] = (target, self.walk(target, spec[1], sub, depth + 1))
            elif ref == "vector":
                start, n = self.vector(target, _S("<" + spec[1]), sub)
                values[index] = (start, n)
            elif ref == "tables":
                start, n = self.vector(target, 4, sub)
                items = []
                for i in range(n):
                    item = f"{sub}[{i}]"
                    items.append(self.walk(self.deref(start + 4 * i, item), spec[1], item, depth + 1))
                values[index] = items
        return values

    def ints(self, vec, dtype=np.int32) -> np.ndarray:
        if vec is None:
            return np.zeros(0, dtype)
        start, n = vec
        return np.frombuffer(self.buf, dtype=np.dtype(dtype).newbyteorder("<"), count=n, offset=start)


# Field names for messages (the schema's names of the fields walked above).
_FIELD_NAMES = {
    ("Model", 1): "operator_codes", ("Model", 2): "subgraphs", ("Model", 3): "description",
    ("Model", 4): "buffers", ("Model", 5): "metadata_buffer", ("Model", 6): "metadata",
    ("Model", 7): "signature_defs", ("OperatorCode", 1): "custom_code", ("SubGraph", 0): "tensors",
    ("SubGraph", 1): "inputs", ("SubGraph", 2): "outputs", ("SubGraph", 3): "operators",
    ("SubGraph", 4): "name", ("Tensor", 0): "shape", ("Tensor", 3): "name",
    ("Tensor", 4): "quantization", ("Tensor", 6): "sparsity", ("Tensor", 7): "shape_signature",
    ("Tensor", 9): "variant_tensors", ("QuantizationParameters", 0): "min",
    ("QuantizationParameters", 1): "max", ("QuantizationParameters", 2): "scale",
    ("QuantizationParameters", 3): "zero_point", ("QuantizationParameters", 5): "details",
    ("Buffer", 0): "data", ("Metadata", 0): "name", ("SignatureDef", 0): "inputs",
    ("SignatureDef", 1): "outputs", ("SignatureDef", 2): "signature_key", ("TensorMap", 0): "name",
    ("Operator", 1): "inputs", ("Operator", 2): "outputs", ("Operator", 4): "builtin_options",
    ("Operator", 5): "custom_options", ("Operator", 7): "mutating_variable_inputs",
    ("Operator", 8): "intermediates", ("Operator", 12): "builtin_options_2",
}


def check_bytes(data: bytes, name: str = "model") -> None:
    """Raise ModelFormatError (a ValueError) naming `name` and the first problem of `data`."""
    buf = bytes(data)
    c = _Checker(buf, name)
    if len(buf) < 8:
        c.fail(f"{len(buf)} bytes is too short for a TFLite model (empty or truncated file)")
    if buf[4:8] != b"TFL3":
        c.fail(f"file identifier is {buf[4:8]!r}, not b'TFL3': not a TFLite model")
    root = c.deref(0, "root table offset")
    model = c.walk(root, "Model", "model")
    version = model.get(0, 0)
    if version != SCHEMA_VERSION:
        c.fail(f"schema version {version}; TFLite reads version {SCHEMA_VERSION}")
    codes = len(model.get(1, []))
    buffers = model.get(4, [])
    subgraphs = model.get(2, [])
    if not subgraphs:
        c.fail("the model has no subgraph")
    buffer_sizes = []
    for b, buffer in enumerate(buffers):
        data_vec = buffer.get(0)
        size = data_vec[1] if data_vec is not None else 0
        offset, ext = buffer.get(1, 0), buffer.get(2, 0)
        if offset > 1 and (offset > len(buf) or ext > len(buf) - offset):
            c.fail(f"buffer {b}: {ext} bytes at offset {offset} lie outside the {len(buf)}-byte file")
        buffer_sizes.append(size if size else (ext if offset > 1 else 0))
    for s, sg in enumerate(subgraphs):
        where = f"subgraph {s}"
        tensors = sg.get(0, [])
        n = len(tensors)
        for t, tensor in enumerate(tensors):
            _check_tensor(c, f"{where} tensor {t}", tensor, buffer_sizes)
        for key, label in ((1, "inputs"), (2, "outputs")):
            bad = [int(i) for i in c.ints(sg.get(key)) if not -1 <= i < n]
            if bad:
                c.fail(f"{where} {label} name tensor {bad[0]}; the subgraph has {n} tensors "
                       "(or -1, which TFLite's index check lets through)")
        for o, op in enumerate(sg.get(3, [])):
            index = op.get(0, 0)
            if index >= codes:
                c.fail(f"{where} operator {o}: opcode index {index}; the model has {codes} "
                       "operator codes")
            offset, size = op.get(9, 0), op.get(10, 0)
            if offset > 1 and (offset > len(buf) or size > len(buf) - offset):
                c.fail(f"{where} operator {o}: {size} bytes of custom options at offset {offset} "
                       f"lie outside the {len(buf)}-byte file")
            for key, label in ((1, "input"), (2, "output"), (8, "intermediate")):
                bad = [int(i) for i in c.ints(op.get(key)) if not -1 <= i < n]
                if bad:
                    c.fail(f"{where} operator {o}: {label} tensor {bad[0]}; the subgraph has {n} "
                           "tensors (or -1: omitted)")
    for d, sig in enumerate(model.get(7, [])):
        sg_index = sig.get(4, 0)
        if sg_index >= len(subgraphs):
            c.fail(f"signature {d}: subgraph {sg_index}; the model has {len(subgraphs)}")
        n = len(subgraphs[sg_index].get(0, []))
        for key in (0, 1):
            for m in sig.get(key, []):
                if m.get(1, 0) >= n:
                    c.fail(f"signature {d}: tensor {m.get(1, 0)} of subgraph {sg_index}, which "
                           f"has {n} tensors")


def _check_tensor(c: _Checker, where: str, tensor: dict, buffer_sizes: list[int]) -> None:
    buffer = tensor.get(2, 0)
    if buffer >= len(buffer_sizes):
        c.fail(f"{where}: buffer index {buffer}; the model has {len(buffer_sizes)} buffers")
    q = tensor.get(4)
    if q is not None:
        params = q[1]
        scales = params.get(2)
        zero_points = params.get(3)
        if scales is not None and scales[1] and zero_points is not None \
                and zero_points[1] < scales[1]:
            c.fail(f"{where}: {scales[1]} quantization scales but {zero_points[1]} zero points")
    held = buffer_sizes[buffer] if buffer < len(buffer_sizes) else 0
    itemsize = TYPE_SIZES.get(tensor.get(1, 0))
    if not held or itemsize is None or tensor.get(6) is not None:
        return
    shape = [int(d) for d in c.ints(tensor.get(0))]
    if any(d < 0 for d in shape):
        return  # an unknown dimension: TFLite refuses or resizes it, the bytes cannot be counted
    need = itemsize
    for d in shape:
        need *= d
        if need > held:
            break
    if need > held:
        need = itemsize
        for d in shape:
            need *= d
        c.fail(f"{where}: shape {tuple(shape)} of {itemsize}-byte elements needs "
               f"{need} bytes; its buffer {tensor.get(2, 0)} holds {held}")


def check_file(path: str | os.PathLike) -> bytes:
    """Read and check a model file; its bytes. OSError if unreadable, ModelFormatError if bad."""
    path = Path(path)
    data = path.read_bytes()
    check_bytes(data, str(path))
    return data
