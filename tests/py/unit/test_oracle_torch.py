"""The checkpoint walker (formats/torchzip.py: the zip walk, and data.pkl's storages by the C
unpickler's stubs and by the opcode walk) against torch itself. torch.save writes every archive
here, verl's FSDP2 checkpoint step among them; torch's own archive reader
(torch._C.PyTorchFileReader) and torch.load are the oracle for what the walker reports: the
entries with their offsets and sizes, and each storage data/<key> with its type, element count,
byte size and bytes. The real checkpoints of tests/fixtures are compared the same way, and the
last tests break the walker to show that the comparison then fails.

The walker does not read tensor shapes (data.pkl's rebuild arguments): a tensor's shape,
offset and strides only choose which bytes of its storage it views, and the comparison of
storages covers views, shared storages and empty tensors whatever their shapes.
"""
import collections
import json
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
import torch.distributed as dist  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402
from torch.distributed.tensor import DTensor, Shard  # noqa: E402
from twgrpo.checks.checkpoint import checkpoint  # noqa: E402
from twgrpo.formats import torchpickle, torchstubs, torchzip, zipwalk  # noqa: E402

REAL = sorted((Path(__file__).resolve().parents[2] / "fixtures").rglob("*.pt"))
# torch's own map of the storage type torch.save names for a dtype; the dtypes it lacks
# (float8, uint16 ...) are saved as UntypedStorage, counted in bytes.
STORAGE_TYPE = torch.storage._dtype_to_storage_type_map()
pytestmark = pytest.mark.filterwarnings("ignore")  # torch's notes on DeviceMesh pickling, ComplexHalf


def _content(storage) -> bytes:
    return torch.empty(0, dtype=torch.uint8).set_(storage).numpy().tobytes()


def loaded_storages(obj, found: dict, seen: dict) -> None:
    """Every storage of what torch.load returned, once: (storage type, element count, byte
    size, bytes), DTensors' local shards and device meshes included. ``seen`` holds each object
    visited, so that the id of one made on the way (a local shard) is not reused."""
    if id(obj) in seen:
        return
    seen[id(obj)] = obj
    if isinstance(obj, DTensor):
        parts = [obj.to_local(), obj.device_mesh]
    elif isinstance(obj, torch.Tensor):
        storage = obj.untyped_storage()
        kind = STORAGE_TYPE.get(obj.dtype, "UntypedStorage")
        item = 1 if kind == "UntypedStorage" else obj.element_size()
        found[storage._cdata] = (kind, storage.nbytes() // item, storage.nbytes(), _content(storage))
        return
    elif isinstance(obj, dict):
        parts = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        parts = list(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):  # a device mesh
        parts = list(vars(obj).values())
    else:
        return
    for part in parts:
        loaded_storages(part, found, seen)


def assert_walker_agrees_with_torch(path: Path) -> None:
    reader = torch._C.PyTorchFileReader(str(path))
    records = reader.get_all_records()  # entry names below the archive's one folder
    storages = sorted(name for name in records if name.startswith("data/"))
    summary = torchzip.check(path)
    assert (summary["entries"], summary["storages"]) == (len(records), len(storages))
    spans = torchzip.check(path, crc=False)["spans"]  # the big-file path: CRCs checked apart
    assert {name.partition("/")[2]: (at, size) for name, at, size, _ in spans} == \
        {name: (reader.get_record_offset(name), reader.get_record_size(name)) for name in records}
    torchzip.check_spans(path, spans)
    pickle = reader.get_record("data.pkl")
    walked = torchzip.storage_refs(pickle)
    assert torchstubs.storage_refs_fast(pickle) == walked
    assert sorted(f"data/{key}" for key in walked) == storages
    ours = collections.Counter((kind, numel, numel * torchzip.ITEM_SIZE[kind],
                                reader.get_record(f"data/{key}"))
                               for key, (kind, numel) in walked.items())
    found: dict = {}
    loaded_storages(torch.load(path, map_location="cpu", weights_only=False), found, {})
    assert ours == collections.Counter(found.values())


def _random(shape, dtype, seed):
    """Values that differ from every other case's, so that each storage's bytes are its own."""
    values = torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 1000
    return values > 0 if dtype is torch.bool else values.to(dtype)


def every_dtype():
    kinds = [torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.int64,
             torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64,
             torch.complex128, torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16,
             torch.uint32, torch.uint64, torch.complex32]
    return {str(dtype): _random((3, 5), dtype, seed) for seed, dtype in enumerate(kinds)}


def empty_tensors():
    return {"empty": torch.empty(0), "rows": torch.zeros(0, 5), "bf16": torch.ones(7, 0, dtype=torch.bfloat16),
            "scalar": torch.tensor(2.5), "int": torch.tensor([], dtype=torch.int64), "full": _random(4, torch.float32, 40)}


def views_and_shared_storages():
    base = _random((4, 6), torch.float32, 50)
    alone = _random(64, torch.float16, 51)
    return {"base": base, "transposed": base.t(), "column": base[:, 1], "rows": base[1:3],
            "flat tail": base.view(-1)[5:], "expanded": _random(1, torch.int64, 52).expand(10),
            "a slice of an unsaved tensor": alone[10:12], "strided": alone[::7],
            "permuted": _random((2, 3, 4), torch.bfloat16, 53).permute(2, 0, 1)}


def nested_containers():
    shared = _random(5, torch.float64, 60)
    return {"list": [_random(2, torch.int32, 61), (shared, {"deeper": [shared[1:], None]})],
            "tuple": (_random(3, torch.bool, 62), "text", 7, 2.5),
            "numpy": np.arange(6).reshape(2, 3), "empty": {}, "nested": {"a": {"b": {"c": [shared]}}}}


def module_state_dict():
    torch.manual_seed(70)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.LayerNorm(3),
                                torch.nn.Embedding(11, 3).to(torch.bfloat16))
    state = model.state_dict()
    assert isinstance(state, collections.OrderedDict)
    return state


def optimizer_state_dict():
    torch.manual_seed(80)
    model = torch.nn.Linear(6, 2)
    optim = torch.optim.AdamW(model.parameters())
    model(torch.ones(3, 6)).sum().backward()
    optim.step()
    return {"model": model.state_dict(), "optim": optim.state_dict()}


CASES = {case.__name__: case for case in (every_dtype, empty_tensors, views_and_shared_storages,
                                          nested_containers, module_state_dict, optimizer_state_dict)}


@pytest.mark.parametrize("streamed", [False, True], ids=["in memory", "streamed"])
@pytest.mark.parametrize("case", CASES)
def test_the_walker_reports_what_torch_saved(tmp_path, monkeypatch, case, streamed):
    path = tmp_path / "case.pt"
    torch.save(CASES[case](), path)
    if streamed:  # read through zipwalk.File's windows, as a file larger than IN_MEMORY is
        monkeypatch.setattr(torchzip, "IN_MEMORY", 0)
    assert_walker_agrees_with_torch(path)
    assert checkpoint.shard_problem(path) is None


@pytest.mark.parametrize("path", REAL, ids=lambda p: f"{p.parents[2].name}/{p.name}")
def test_the_walker_reports_what_torch_loads_from_the_real_checkpoints(path):
    assert_walker_agrees_with_torch(path)


@pytest.fixture(scope="module")
def mesh():
    """A one-rank Gloo process group in this process: FSDP2 and DTensors need one."""
    started = not dist.is_initialized()
    if started:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield init_device_mesh("cpu", (1,))
    if started:
        dist.destroy_process_group()


def rank_part(state, rank: int, world: int, mesh):
    """state with each DTensor replaced by rank's rows of it (Shard(0)), in a storage of its
    own, as each FSDP2 rank holds and saves its shard."""
    if isinstance(state, DTensor):
        rows = state.to_local().chunk(world)[rank].clone()
        return DTensor.from_local(rows, mesh, [Shard(0)], run_check=False, shape=state.shape,
                                  stride=state.stride())
    if isinstance(state, dict):
        return type(state)((key, rank_part(value, rank, world, mesh)) for key, value in state.items())
    if isinstance(state, list):
        return [rank_part(value, rank, world, mesh) for value in state]
    return state


def write_fsdp_step(step_dir: Path, world: int, mesh) -> None:
    """checkpoints/global_step_<n>/ as verl 0.6 writes it with FSDP2: per rank its model and
    optimizer shards (DTensors) and its extra state (LR scheduler, RNG states); the dataloader's
    state in data.pt; fsdp_config.json and the Hugging Face config."""
    torch.manual_seed(90)
    model = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 4))
    fully_shard(model, mesh=mesh)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optim, step_size=2)
    model(torch.tensor([[1, 2, 3]])).sum().backward()
    optim.step()
    scheduler.step()
    actor = step_dir / "actor"
    (actor / "huggingface").mkdir(parents=True)
    for rank in range(world):
        name = f"world_size_{world}_rank_{rank}.pt"
        torch.save(rank_part(model.state_dict(), rank, world, mesh), actor / f"model_{name}")
        torch.save(rank_part(optim.state_dict(), rank, world, mesh), actor / f"optim_{name}")
        rng = {"cpu": torch.get_rng_state(), "numpy": np.random.get_state(), "random": random.getstate()}
        torch.save({"lr_scheduler": scheduler.state_dict(), "rng": rng}, actor / f"extra_state_{name}")
    torch.save({"_snapshot": {"_snapshot_step": 2, "_main_snapshot": {"_num_workers": 8}},
                "_steps_since_snapshot": 0, "_iterator_finished": False}, step_dir / "data.pt")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world}))
    (actor / "huggingface" / "config.json").write_text(json.dumps({"model_type": "qwen2"}))


@pytest.mark.parametrize("world", [1, 2])
def test_an_fsdp2_checkpoint_step_torch_wrote_passes_and_each_shard_agrees(tmp_path, mesh, world):
    run = tmp_path / "run"
    write_fsdp_step(run / "checkpoints" / "global_step_2", world, mesh)
    found, evidence = checkpoint.step_findings(run, 2, world)
    assert found == [] and len(evidence["shards"]) == 3 * world
    for path in sorted((run / "checkpoints").rglob("*.pt")):
        assert_walker_agrees_with_torch(path)


BREAKS = {  # a fault in the walker, and what it breaks
    "bf16 read as 4 bytes an element": lambda m: m.setitem(torchzip.ITEM_SIZE, "BFloat16Storage", 4),
    "the fast path misses the last storage": lambda m: m.setattr(
        torchstubs, "_judge", lambda ids, limit, judge=torchstubs._judge: judge(ids[:-1], limit)),
    "the opcode walk loses one-byte integers": lambda m: m.setattr(
        torchpickle, "_INTS", torchpickle._INTS - {"BININT1"}),
    "a local header's lengths read from the wrong bytes": lambda m: m.setattr(
        zipwalk, "_LOCAL", "<4s18xHH4x"),
}


@pytest.mark.parametrize("fault", BREAKS)
def test_the_comparison_fails_when_the_walker_is_broken(tmp_path, monkeypatch, fault):
    path = tmp_path / "case.pt"
    torch.save(every_dtype(), path)
    assert_walker_agrees_with_torch(path)
    BREAKS[fault](monkeypatch)
    with pytest.raises((AssertionError, torchzip.NotTorchSave, torchzip.Damaged)):
        assert_walker_agrees_with_torch(path)
