"""Prove a safetensors file is whole without torch: header JSON; tensors contiguous, in the file,
each as long as its shape x dtype size; the file ends where the last tensor ends."""
from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

from .bounded import loads, open_regular

MAX_HEADER = 100 << 20


# Bits an element, for every dtype safetensors 0.8 reads (its Dtype enum): the 4- and 6-bit
# floats of MX formats pack elements across bytes, so a tensor's size is counted in bits.
DTYPE_BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8,
              "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16,
              "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64,
              "I64": 64, "U64": 64}


class WeightsError(ValueError):
    pass


def _span(name: str, meta: Any) -> Tuple[int, int, str]:
    """(begin, end, name) of one tensor, its byte length checked against shape and dtype."""
    if not isinstance(meta, dict):
        raise WeightsError(f"tensor {name}: header entry is not an object")
    offsets, shape, dtype = meta.get("data_offsets"), meta.get("shape"), meta.get("dtype")
    if not (isinstance(offsets, list) and len(offsets) == 2 and
            all(type(o) is int for o in offsets) and 0 <= offsets[0] <= offsets[1]):
        raise WeightsError(f"tensor {name} has offsets {offsets!r:.80}")
    if dtype not in DTYPE_BITS:
        raise WeightsError(f"tensor {name} has unknown dtype {dtype!r:.40}")
    if not (isinstance(shape, list) and len(shape) <= 64 and
            all(type(d) is int and 0 <= d < 1 << 62 for d in shape)):
        raise WeightsError(f"tensor {name} has shape {shape!r:.80}")
    count = 1
    for dim in shape:
        count *= dim
    bits = count * DTYPE_BITS[dtype]
    if bits % 8:  # safetensors refuses a tensor that ends inside a byte
        raise WeightsError(f"tensor {name}: shape {shape} x {dtype} is {bits} bits, not whole bytes")
    if offsets[1] - offsets[0] != bits // 8:
        raise WeightsError(f"tensor {name}: shape {shape} x {dtype} is {bits // 8} "
                           f"bytes, its offsets span {offsets[1] - offsets[0]}")
    return offsets[0], offsets[1], name


def inspect(path: Union[str, Path], names: bool = False) -> Dict[str, Any]:
    """{"tensors": count, "bytes": size}, and with names=True "names": the tensor names."""
    with open_regular(path)[0] as stream:  # a FIFO or device is refused, never waited on
        size = stream.seek(0, 2)
        stream.seek(0)
        raw = stream.read(8)
        if len(raw) < 8:
            raise WeightsError(f"{size} bytes: too short for a safetensors header")
        length = struct.unpack("<Q", raw)[0]
        if length > MAX_HEADER or 8 + length > size:
            raise WeightsError(f"header length {length} does not fit a {size}-byte file")
        try:
            header = loads(stream.read(length))
        except ValueError as exc:  # bad UTF-8 too
            raise WeightsError(f"header is not JSON: {exc}") from None
        if not isinstance(header, dict):
            raise WeightsError("header is not a JSON object")
        spans = []
        for name, meta in header.items():
            if name == "__metadata__":  # safetensors reads it as a map of strings, or null
                if meta is not None and not (isinstance(meta, dict) and
                                             all(isinstance(v, str) for v in meta.values())):
                    raise WeightsError(f"__metadata__ is not an object of strings: {meta!r:.80}")
                continue
            spans.append(_span(name, meta))
        spans.sort()
        end = 0
        for begin, stop, name in spans:  # the safetensors rules: contiguous, in order, no gaps
            if begin != end:
                raise WeightsError(f"tensor {name} starts at {begin}, expected {end} "
                                   f"({'overlapping' if begin < end else 'a gap'})")
            end = stop
        tensors = len(spans)
        if 8 + length + end != size:
            raise WeightsError(f"tensors end at byte {8 + length + end}, file has {size}")
        if end:  # the data is readable at both ends
            stream.seek(8 + length)
            stream.read(1)
            stream.seek(size - 1)
            if len(stream.read(1)) != 1:
                raise WeightsError("last byte unreadable")
    info: Dict[str, Any] = {"tensors": tensors, "bytes": size}
    if names:
        info["names"] = sorted(name for _, _, name in spans)
    return info


MAX_INDEX = 64 << 20
SHARD_NAME = re.compile(r"^[A-Za-z0-9._-]+\.safetensors$")


def read_index(path: Union[str, Path]) -> Dict[str, List[str]]:
    """A sharded model's model.safetensors.index.json: shard file -> its tensor names, sorted.
    Shard names are plain file names in the same folder."""
    with open_regular(path)[0] as stream:  # a FIFO or device is refused, never waited on
        raw = stream.read(MAX_INDEX + 1)
    if len(raw) > MAX_INDEX:
        raise WeightsError(f"index is larger than {MAX_INDEX >> 20} MiB")
    try:
        index = loads(raw)
    except ValueError as exc:
        raise WeightsError(f"index is not JSON: {exc}") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise WeightsError("index has no weight_map object naming tensors and their shards")
    shards: Dict[str, List[str]] = {}
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not SHARD_NAME.match(shard):
            raise WeightsError(f"tensor {name!r:.80} maps to {shard!r:.80}, not a .safetensors "
                               "file name in the model folder")
        shards.setdefault(shard, []).append(name)
    return {shard: sorted(names) for shard, names in sorted(shards.items())}
