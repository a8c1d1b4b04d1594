"""Checkpoint shards laid out as verl 0.6 FSDP2 writes them with torch.save (tests and bench only).

data.pkl is emitted opcode by opcode in the shape a real FSDP2 shard has (see the real model
shard in tests/fixtures/real-smoke-run): an OrderedDict of DTensors, each rebuilt through
_rebuild_from_type_v2 from a local tensor (_rebuild_tensor_v2 on a persistent storage id) and a
DTensorSpec holding one shared DeviceMesh, a Shard placement and a TensorMeta; about 100
opcodes a tensor, as torch writes. Storage bytes are a repeated pattern, streamed to disk.
"""
import struct
import zipfile
from pathlib import Path
from typing import List, Sequence

TENSORS_7B = 339  # tensors in one FSDP2 model shard of a 7B Qwen2 (28 layers x 12 + 3)


class _Emitter:
    """Opcodes as torch's pickler writes them: each global and repeated string memoized once
    (LONG_BINPUT) and fetched again with LONG_BINGET."""

    def __init__(self) -> None:
        self.memo = {}

    def _memo(self, key, first: bytes) -> bytes:
        if key in self.memo:
            return b"j" + struct.pack("<I", self.memo[key])
        self.memo[key] = len(self.memo)
        return first + b"r" + struct.pack("<I", self.memo[key])

    def s(self, text: str) -> bytes:
        data = text.encode()
        return self._memo(("s", text), b"X" + struct.pack("<I", len(data)) + data)

    def g(self, module: str, name: str) -> bytes:
        return self._memo(("g", module, name), b"c" + module.encode() + b"\n" + name.encode() + b"\n")


def _i(value: int) -> bytes:
    return b"J" + struct.pack("<i", value)


def _pair(a: int, b: int) -> bytes:
    return _i(a) + _i(b) + b"\x86"


def dtensor(e: _Emitter, key: int, numel: int) -> bytes:
    """One value of the state dict: a DTensor over storage ``key`` of ``numel`` bf16 elements."""
    rows = max(1, numel // 128)
    shape, stride = _pair(rows, numel // rows), _pair(numel // rows, 1)
    head = e.g("torch._tensor", "_rebuild_from_type_v2") + b"("  # built in the order written,
    wrapper = (e.g("torch._utils", "_rebuild_wrapper_subclass") +
               e.g("torch.distributed.tensor", "DTensor") + b"(" +
               e.g("torch.distributed.tensor", "DTensor") + e.g("torch", "bfloat16") + shape +
               stride + _i(0) + e.g("torch.serialization", "_get_layout") +
               e.s("torch.strided") + b"\x85R" + e.g("torch", "device") + e.s("cuda") + _i(0) +
               b"\x86R\x89t")
    keys = [e.s("_local_tensor")]  # so that memo indices rise through the file
    local = (e.g("torch._utils", "_rebuild_tensor_v2") + b"((" + e.s("storage") +
             e.g("torch", "BFloat16Storage") + b"X" + struct.pack("<I", len(str(key))) +
             str(key).encode() + e.s("cuda:0") + _i(numel) + b"tQ" + _i(0) + shape + stride +
             b"\x89" + e.g("collections", "OrderedDict") + b")Rt" + b"R")
    keys.append(e.s("_spec"))
    if ("mesh",) in e.memo:
        mesh = b"j" + struct.pack("<I", e.memo[("mesh",)])
    else:
        mesh = (e.g("torch.distributed.device_mesh", "DeviceMesh") + b")\x81}(" +
                e.s("_device_type") + e.s("cuda") + e.s("_mesh_dim_names") + e.s("fsdp") +
                b"\x85" + e.s("_rank") + _i(0) + b"ub")
        mesh = e._memo(("mesh",), mesh)
    spec = (e.g("torch.distributed.tensor._dtensor_spec", "DTensorSpec") + b")\x81}(" +
            e.s("mesh") + mesh + e.s("placements") +
            e.g("torch.distributed.tensor.placement_types", "Shard") + b")\x81}" + e.s("dim") +
            _i(0) + b"sb\x85" + e.s("tensor_meta") +
            e.g("torch.distributed.tensor._dtensor_spec", "TensorMeta") + e.g("torch", "Size") +
            shape + b"\x85R" + stride + e.g("torch", "bfloat16") + b"\x87\x81" + b"ub")
    return head + wrapper + b"N}(" + keys[0] + local + keys[1] + spec + b"ut" + b"R"


def data_pkl(numels: Sequence[int]) -> bytes:
    e = _Emitter()
    out = b"\x80\x02" + e.g("collections", "OrderedDict") + b")R"
    if numels:
        out += b"("
        for key, numel in enumerate(numels):
            name = f"model.layers.{key // 12}.p{key % 12}.weight"
            out += b"X" + struct.pack("<I", len(name)) + name.encode() + dtensor(e, key, numel)
        out += b"u"
    return out + b"."


def write_shard(path: Path, numels: Sequence[int]) -> int:
    """A torch.save archive of bf16 DTensors of these sizes; the bytes written."""
    stem = path.stem
    pattern = bytes(range(256)) * 4096  # 1 MiB
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(f"{stem}/data.pkl", data_pkl(numels))
        archive.writestr(f"{stem}/byteorder", b"little")
        for key, numel in enumerate(numels):
            with archive.open(f"{stem}/data/{key}", "w", force_zip64=numel * 2 > (1 << 30)) as out:
                left = numel * 2
                while left:
                    chunk = pattern[:min(left, len(pattern))]
                    out.write(chunk)
                    left -= len(chunk)
        archive.writestr(f"{stem}/version", b"3\n")
        archive.writestr(f"{stem}/.data/serialization_id", b"1234567890")
    return path.stat().st_size


def numels_for(total_bytes: int, tensors: int = TENSORS_7B) -> List[int]:
    """bf16 element counts of ``tensors`` storages summing to about total_bytes."""
    each = max(64, total_bytes // 2 // tensors)
    return [each] * tensors
