"""Prove a safetensors file is whole without torch: header JSON, offsets, size, first/last byte."""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Dict, Union

MAX_HEADER = 100 << 20


class WeightsError(ValueError):
    pass


def inspect(path: Union[str, Path]) -> Dict[str, Any]:
    with open(path, "rb") as stream:
        size = stream.seek(0, 2)
        stream.seek(0)
        raw = stream.read(8)
        if len(raw) < 8:
            raise WeightsError(f"{size} bytes: too short for a safetensors header")
        length = struct.unpack("<Q", raw)[0]
        if length > MAX_HEADER or 8 + length > size:
            raise WeightsError(f"header length {length} does not fit a {size}-byte file")
        try:
            header = json.loads(stream.read(length))
        except ValueError as exc:
            raise WeightsError(f"header is not JSON: {exc}") from None
        end = 0
        tensors = 0
        for name, meta in header.items():
            if name == "__metadata__":
                continue
            begin, stop = meta["data_offsets"]
            if not 0 <= begin <= stop:
                raise WeightsError(f"tensor {name} has offsets {begin}..{stop}")
            end = max(end, stop)
            tensors += 1
        if 8 + length + end != size:
            raise WeightsError(f"tensors end at byte {8 + length + end}, file has {size}")
        if end:  # the data is readable at both ends
            stream.seek(8 + length)
            stream.read(1)
            stream.seek(size - 1)
            if len(stream.read(1)) != 1:
                raise WeightsError("last byte unreadable")
    return {"tensors": tensors, "bytes": size}
