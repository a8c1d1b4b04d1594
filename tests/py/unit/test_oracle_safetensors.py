"""The bundle's safetensors reader (formats/safetensors.py) against safetensors itself: files
written by safetensors.torch.save_file and safetensors.numpy.save_file, and a sharded model
with its index.json as transformers writes it, read by the reader and by safetensors.safe_open,
the oracle. Both must accept the same files (then with the same tensors and size) and refuse
the same damaged ones; the last tests break the reader to show that the comparison then fails.
"""
import json
import struct
from pathlib import Path

import pytest

safetensors_lib = pytest.importorskip("safetensors")
torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
from safetensors import safe_open  # noqa: E402
from safetensors.numpy import save_file as save_numpy  # noqa: E402
from safetensors.torch import save_file as save_torch  # noqa: E402
from twgrpo.checks.inputs import weights  # noqa: E402
from twgrpo.formats import safetensors  # noqa: E402


def oracle(path: Path):
    """What safetensors says: sorted tensor names and each one's (dtype, shape), or None when
    it refuses the file."""
    try:
        with safe_open(str(path), framework="np") as opened:
            return {name: (opened.get_slice(name).get_dtype(), opened.get_slice(name).get_shape())
                    for name in sorted(opened.keys())}
    except Exception:  # SafetensorError for every malformed header or size
        return None


def assert_reader_agrees_with_safetensors(path: Path) -> None:
    theirs = oracle(path)
    try:
        ours = safetensors.inspect(path, names=True)
    except safetensors.WeightsError as exc:
        assert theirs is None, f"the reader refuses what safetensors reads: {exc}"
        return
    assert theirs is not None, "the reader accepts what safetensors refuses"
    assert ours == {"tensors": len(theirs), "bytes": path.stat().st_size, "names": list(theirs)}


def header_of(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])


def rewrite(path: Path, header: dict, data_size: int) -> None:
    """The file with another header and its data cut or padded to data_size bytes."""
    raw = path.read_bytes()
    data = raw[8 + struct.unpack("<Q", raw[:8])[0]:]
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + (data + b"\0" * data_size)[:data_size])


def _values(shape, dtype, seed):
    values = torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 100
    return values > 0 if dtype is torch.bool else values.to(dtype)


TORCH_DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.int64,
                torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.uint16,
                torch.uint32, torch.uint64, torch.complex64, torch.float8_e4m3fn,
                torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz,
                torch.float8_e8m0fnu]
NUMPY_DTYPES = [np.float64, np.float32, np.float16, np.int64, np.uint64, np.int32, np.uint32,
                np.int16, np.uint16, np.int8, np.uint8, np.bool_, np.complex64]


def every_torch_dtype(path):
    tensors = {f"layer.{i}.{dtype}": _values((3, 4), dtype, i) for i, dtype in enumerate(TORCH_DTYPES)}
    tensors["mx.blocks"] = torch.zeros(4, 2, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)  # F4
    save_torch(tensors, str(path))


def every_numpy_dtype(path):
    rng = np.random.default_rng(1)
    save_numpy({f"n.{np.dtype(kind).name}": (rng.standard_normal((2, 3)) * 100).astype(kind)
                for kind in NUMPY_DTYPES}, str(path))


def empty_and_scalar_tensors(path):
    save_torch({"empty": torch.empty(0), "rows": torch.zeros(0, 5, dtype=torch.bfloat16),
                "scalar": torch.tensor(1.5), "int": torch.zeros(3, 0, 2, dtype=torch.int64),
                "full": _values(7, torch.float16, 2)}, str(path))


def with_metadata(path):
    save_torch({"w": _values((2, 2), torch.float32, 3)}, str(path),
               metadata={"format": "pt", "note": "ünïcode ✓", "empty": ""})


def only_empty_tensors(path):
    save_torch({"a": torch.empty(0), "b": torch.empty(0, 3)}, str(path))


def many_tensors_in_name_order_unlike_offset_order(path):
    save_torch({f"z{999 - i}.{'w' * (i % 5)}": _values(i % 7, torch.float32, i)
                for i in range(300)}, str(path))


def six_bit_floats(path):
    """F6 has no torch or numpy dtype, so no writer: safe_open alone vouches for the header."""
    header = {"a": {"dtype": "F6_E2M3", "shape": [4, 4], "data_offsets": [0, 12]},
              "b": {"dtype": "F6_E3M2", "shape": [8], "data_offsets": [12, 18]},
              "__metadata__": None}
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(range(18)))
    assert oracle(path) is not None


WRITERS = {writer.__name__: writer for writer in (
    every_torch_dtype, every_numpy_dtype, empty_and_scalar_tensors, with_metadata,
    only_empty_tensors, many_tensors_in_name_order_unlike_offset_order, six_bit_floats)}


@pytest.mark.parametrize("writer", WRITERS)
def test_the_reader_agrees_with_safetensors_on_files_it_wrote(tmp_path, writer):
    path = tmp_path / "model.safetensors"
    WRITERS[writer](path)
    assert oracle(path) is not None
    assert_reader_agrees_with_safetensors(path)


def _one_element_more(header, data):  # each tensor's shape grown by one element, offsets kept
    name = next(n for n in header if n != "__metadata__" and header[n]["shape"])
    header[name]["shape"][-1] += 1
    return header, data


DAMAGE = {  # (header, data size) -> the damaged file's; safetensors refuses each
    "one element more than the bytes": _one_element_more,
    "a byte of data too many": lambda h, d: (h, d + 1),
    "a byte of data too few": lambda h, d: (h, d - 1),
    "metadata of numbers": lambda h, d: ({**h, "__metadata__": {"step": 1}}, d),
    "metadata a list": lambda h, d: ({**h, "__metadata__": ["pt"]}, d),
    "an unknown dtype": lambda h, d: ({**h, "x": {"dtype": "C128", "shape": [0], "data_offsets": [d, d]}}, d),
    "a negative dimension": lambda h, d: ({**h, "x": {"dtype": "F32", "shape": [-1], "data_offsets": [d, d]}}, d),
}


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("writer", ["every_torch_dtype", "every_numpy_dtype", "six_bit_floats"])
def test_the_reader_refuses_what_safetensors_refuses(tmp_path, writer, damage):
    path = tmp_path / "model.safetensors"
    WRITERS[writer](path)
    header = header_of(path)
    size = max(meta["data_offsets"][1] for name, meta in header.items() if name != "__metadata__")
    rewrite(path, *DAMAGE[damage](header, size))
    assert oracle(path) is None
    assert_reader_agrees_with_safetensors(path)


@pytest.mark.parametrize("dtype,shape", [("F4", [3]), ("F4", [1, 5]), ("F6_E2M3", [3]), ("F6_E3M2", [2, 2])])
def test_a_sub_byte_tensor_that_ends_inside_a_byte_is_refused_by_both(tmp_path, dtype, shape):
    path = tmp_path / "model.safetensors"
    text = json.dumps({"t": {"dtype": dtype, "shape": shape, "data_offsets": [0, 2]}}).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0\0")
    assert oracle(path) is None
    assert_reader_agrees_with_safetensors(path)


def write_sharded(folder: Path, shards: int = 3) -> dict:
    """A sharded model as transformers' save_pretrained writes it: model-0000i-of-0000n
    .safetensors and model.safetensors.index.json with total_size and the weight map."""
    tensors = {f"model.layers.{i}.{part}": _values((8, 4), torch.bfloat16, i)
               for i in range(6) for part in ("self_attn.q_proj.weight", "mlp.up_proj.bias")}
    tensors["lm_head.weight"] = _values((16, 4), torch.float32, 99)
    names = sorted(tensors)
    weight_map, total = {}, 0
    for shard in range(shards):
        file = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        part = {name: tensors[name] for name in names[shard::shards]}
        save_torch(part, str(folder / file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, file))
        total += sum(t.numel() * t.element_size() for t in part.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return index


def test_a_sharded_model_agrees_shard_by_shard_and_passes_the_weights_check(tmp_path):
    index = write_sharded(tmp_path)
    shards = safetensors.read_index(tmp_path / "model.safetensors.index.json")
    assert sorted(shards) == sorted(set(index["weight_map"].values()))
    for shard, names in shards.items():
        assert names == list(oracle(tmp_path / shard))
        assert_reader_agrees_with_safetensors(tmp_path / shard)
    evidence: dict = {}
    assert weights.check_weights(tmp_path, "model.safetensors.index.json", evidence) == []
    files = [tmp_path / shard for shard in shards]
    assert evidence["model_weights"] == {"index": "model.safetensors.index.json", "shards": 3,
                                         "tensors": len(index["weight_map"]),
                                         "bytes": sum(f.stat().st_size for f in files)}


BREAKS = {  # a fault in the reader, and a file that shows it
    "BF16 read as 4 bytes an element": ("every_torch_dtype", lambda m: m.setitem(safetensors.DTYPE_BITS, "BF16", 32)),
    "F4 read as a byte an element": ("every_torch_dtype", lambda m: m.setitem(safetensors.DTYPE_BITS, "F4", 8)),
    "F6 read as a byte an element": ("six_bit_floats", lambda m: m.setitem(safetensors.DTYPE_BITS, "F6_E3M2", 8)),
    "C64 unknown": ("every_numpy_dtype", lambda m: m.delitem(safetensors.DTYPE_BITS, "C64")),
    "U16 two bytes too many": ("every_numpy_dtype", lambda m: m.setitem(safetensors.DTYPE_BITS, "U16", 32)),
    "the header length limit below the header": ("with_metadata", lambda m: m.setattr(safetensors, "MAX_HEADER", 64)),
}


@pytest.mark.parametrize("fault", BREAKS)
def test_the_comparison_fails_when_the_reader_is_broken(tmp_path, monkeypatch, fault):
    writer, breaks = BREAKS[fault]
    path = tmp_path / "model.safetensors"
    WRITERS[writer](path)
    assert_reader_agrees_with_safetensors(path)
    breaks(monkeypatch)
    with pytest.raises(AssertionError, match="the reader refuses what safetensors reads"):
        assert_reader_agrees_with_safetensors(path)
