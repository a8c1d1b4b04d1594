"""The data.pkl fast path (formats/torchstubs.py): the same storages as the opcode walk on every
pickle torch writes, nothing imported or run, memory bounded, and the walk judging the rest."""
import resource
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import synthrun
import torchlike
from twgrpo.formats import torchpickle, torchstubs, torchzip

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REAL = sorted(FIXTURES.rglob("*.pt"))


def pickle_of(path):
    with zipfile.ZipFile(path) as archive:
        return archive.read(archive.namelist()[0])


@pytest.mark.parametrize("path", REAL, ids=lambda p: f"{p.parents[2].name}/{p.name}")
def test_real_torch_pickles_read_fast_to_the_walks_storages(path):
    data = pickle_of(path)
    fast = torchstubs.storage_refs_fast(data)
    assert fast is not None and fast == torchpickle.storage_refs(data)


@pytest.mark.parametrize("numels", [[], [7], torchlike.numels_for(1 << 20, 99)], ids=len)
def test_fsdp2_shaped_and_synthetic_pickles_agree(numels):
    for data in (torchlike.data_pkl(numels), synthrun.torch_pickle(numels)):
        fast = torchstubs.storage_refs_fast(data)
        assert fast is not None and fast == torchpickle.storage_refs(data)
        assert len(fast) == len(numels)


HOSTILE = {
    "not a storage id": b"\x80\x02(X\x01\x00\x00\x00aQ.",
    "a text persistent id": b"\x80\x02Pstorage\n.",
    "cut short": torchlike.data_pkl([5, 6])[:-40],
    "a string of 2^62 bytes": b"\x80\x04\x8d" + struct.pack("<Q", 1 << 62) + b"x",
    "an unknown opcode": b"\x80\x02\xff.",
    "a storage key past the entries": synthrun.torch_pickle([4] * 3),
    "a call of os.system": b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85R.",
}


@pytest.mark.parametrize("name", HOSTILE)
def test_what_the_fast_path_cannot_vouch_for_goes_to_the_walk(name):
    data = HOSTILE[name]
    fast = torchstubs.storage_refs_fast(data, limit=2)
    try:
        walked = torchpickle.storage_refs(data, limit=2)
    except torchpickle.NotTorchSave:
        assert fast is None  # the walk words the finding
    else:
        assert fast in (None, walked)


def test_globals_are_stubs_never_imported_or_called(tmp_path):
    marker = tmp_path / "ran"
    data = (b"\x80\x02cos\nsystem\nX" + struct.pack("<I", len(f"touch {marker}")) +
            f"touch {marker}".encode() + b"\x85R" + b"cthis_module_does_not_exist\nthing\n)R" + b"\x86.")
    modules = set(sys.modules)
    assert torchstubs.storage_refs_fast(data) == {}
    assert not marker.exists() and "this_module_does_not_exist" not in sys.modules
    assert set(sys.modules) == modules


BOMB = """
import resource, sys
from twgrpo.formats import torchstubs
before = resource.getrlimit(resource.RLIMIT_AS)
data = b"\\x80\\x02]r" + (1 << 28).to_bytes(4, "little") + b"."  # a 2 GiB memo, 9 bytes
# VmHWM, this program's own peak: ru_maxrss keeps the forking parent's peak across exec, and the
# test process that forks this one may be hundreds of MiB late in a long run
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(torchstubs.storage_refs_fast(data), resource.getrlimit(resource.RLIMIT_AS) == before, peak >> 10)
"""


def test_a_memo_index_of_2_to_the_28_does_not_allocate_gigabytes():
    root = Path(torchzip.__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", BOMB], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(root)}).stdout.split()
    assert out[:2] == ["None", "True"]  # the walk judges it; the limit is restored
    assert int(out[2]) < 512  # MiB peak: the C memo would have touched 2 GiB


def test_the_archive_check_uses_the_fast_path_and_the_walk_for_big_pickles(tmp_path, monkeypatch):
    path = tmp_path / "model_world_size_1_rank_0.pt"
    torchlike.write_shard(path, [64, 32])
    calls = []
    monkeypatch.setattr(torchzip, "storage_refs", lambda *a: calls.append(a) or torchpickle.storage_refs(*a))
    assert torchzip.check(path)["storages"] == 2 and calls == []
    monkeypatch.setattr(torchzip, "FAST_MAX", 10)
    assert torchzip.check(path)["storages"] == 2 and len(calls) == 1


def test_a_7b_model_shard_of_339_dtensors_reads_fast():
    data = torchlike.data_pkl(torchlike.numels_for(1 << 20))
    fast = torchstubs.storage_refs_fast(data)
    assert fast is not None and len(fast) == 339 and fast == torchpickle.storage_refs(data)


def test_a_pickle_read_before_is_not_unpickled_again_and_each_file_is_still_matched(tmp_path, monkeypatch):
    monkeypatch.setattr(torchzip, "_REFS", {})
    calls = []
    monkeypatch.setattr(torchzip, "storage_refs_fast", lambda *a: calls.append(a) or torchstubs.storage_refs_fast(*a))
    for rank in range(3):  # the same tensors on every rank: one data.pkl, three archives
        torchlike.write_shard(tmp_path / f"model_world_size_3_rank_{rank}.pt", [64, 32])
        assert torchzip.check(tmp_path / f"model_world_size_3_rank_{rank}.pt")["storages"] == 2
    assert len(calls) == 1
    path = tmp_path / "model_world_size_3_rank_0.pt"
    data = path.read_bytes()  # the same data.pkl, storage 1 two bytes short (CRC recomputed)
    with zipfile.ZipFile(path) as archive:
        entries = [(i.filename, archive.read(i)) for i in archive.infolist()]
    with zipfile.ZipFile(path, "w") as archive:
        for name, body in entries:
            archive.writestr(name, body[:-2] if name.endswith("data/1") else body)
    assert path.read_bytes() != data
    with pytest.raises(torchzip.NotTorchSave, match="storage data/1: 32 x BFloat16Storage needs 64 bytes, the entry holds 62"):
        torchzip.check(path)
    assert len(calls) == 1


@pytest.mark.parametrize("kept", [0, 2])
def test_the_pickles_remembered_are_at_most_refs_kept_and_none_at_zero(tmp_path, monkeypatch, kept):
    monkeypatch.setattr(torchzip, "_REFS", {})
    monkeypatch.setattr(torchzip, "REFS_KEPT", kept)
    for rank in range(4):  # four distinct data.pkl: another shape each
        path = tmp_path / f"model_world_size_4_rank_{rank}.pt"
        torchlike.write_shard(path, [64, 32 + rank])
        assert torchzip.check(path)["storages"] == 2
    assert len(torchzip._REFS) == kept
