"""The torch.save archive check's two ways of reading a file (formats/zipwalk.py): whole in
memory, or through a File window when it is big; the short way for the storage entries
torch.save writes in order; and the storages matched against data.pkl in whole-list passes."""
import io
import random
import struct
import zipfile
from array import array
from pathlib import Path

import pytest
import synthrun
import torchlike
from twgrpo.formats import torchpickle, torchzip, zipwalk

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REAL = sorted((FIXTURES / "real-smoke-run").rglob("actor/*.pt"))


def verdict(path, in_memory, monkeypatch):
    monkeypatch.setattr(torchzip, "IN_MEMORY", in_memory)
    try:
        summary = torchzip.check(path)
    except (torchzip.Damaged, torchzip.NotTorchSave) as exc:
        return type(exc).__name__, str(exc)
    return "ok", summary["top"], summary["entries"], summary["storages"]


def mutants(seeds, count, seed):
    rng = random.Random(seed)
    for _ in range(count):
        data = bytearray(rng.choice(seeds))
        if rng.random() < 0.2:
            data = data[:rng.randrange(len(data))]
        else:
            for _ in range(rng.randint(1, 3)):  # most into the central directory and its neighbours
                near_end = rng.random() < 0.6
                at = rng.randrange(max(0, len(data) - 3000) if near_end else 0, len(data))
                data[at] = rng.randrange(256)
        yield bytes(data)


def test_in_memory_and_through_a_window_the_verdicts_and_words_agree(tmp_path, monkeypatch):
    made = tmp_path / "model_world_size_2_rank_0.pt"
    torchlike.write_shard(made, [5, 64, 7, 300])
    seeds = [made.read_bytes()] + [p.read_bytes() for p in REAL]
    path, kinds = tmp_path / "x.pt", set()
    for data in mutants(seeds, 400, 3):
        path.write_bytes(data)
        whole = verdict(path, 32 << 20, monkeypatch)
        assert verdict(path, 0, monkeypatch) == whole, data
        kinds.add(whole[0])
    assert kinds == {"ok", "Damaged", "NotTorchSave"}


def write(path, names, compress=zipfile.ZIP_STORED, storages=(3, 5, 7)):
    """A torch-like archive whose entries are ``names`` (keys of storages or bookkeeping names)."""
    stem = path.stem
    data = {"data.pkl": synthrun.torch_pickle(list(storages)), "byteorder": b"little", "version": b"3\n"}
    data.update({f"data/{k}": b"\1" * (4 * n) for k, n in enumerate(storages)})
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            info = zipfile.ZipInfo(f"{stem}/{name}")
            info.compress_type = compress if name.startswith("data/") else zipfile.ZIP_STORED
            archive.writestr(info, data.get(name, data.get(name.replace("data/0", "data/"), b"\1" * 12)))
    return path


ORDER = ["data.pkl", "byteorder", "data/0", "data/1", "data/2", "version"]


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize("names,words", [
    (ORDER, None),
    (["data.pkl", "byteorder", "data/2", "data/0", "data/1", "version"], None),  # any order
    (["data.pkl", "data/0", "data/1", "data/0", "data/2", "byteorder", "version"], "data/0 appears twice"),
    (["data.pkl", "byteorder", "data/0", "data/1", "data/9", "version"], "storage keys run 0..n-1"),
    (["data.pkl", "byteorder", "version", "data/4", "data/5"], "data/5: storage keys run 0..n-1"),
    (["data.pkl", "byteorder", "data/0", "data/01", "data/2", "version"], "not one torch.save writes"),
    (["data.pkl", "byteorder", "data/0", "data/2", "version"], "data/1 is missing"),
    (["byteorder", "data.pkl", "data/0", "data/1", "data/2", "version"], "first entry is"),
], ids=["in order", "out of order", "twice", "past the count", "next past the count", "a leading zero", "a gap",
        "data.pkl second"])
def test_storage_entries_in_any_order_get_every_rule(tmp_path, names, words):
    path = write(tmp_path / "model_world_size_1_rank_0.pt", names)
    if words is None:
        assert torchzip.check(path)["storages"] == 3
    else:
        with pytest.raises(torchzip.NotTorchSave, match=words):
            torchzip.check(path)


def central(data, index):
    """Where the index-th central directory entry starts."""
    at = struct.unpack_from("<I", data, len(data) - 22 + 16)[0]
    for _ in range(index):
        at += 46 + sum(struct.unpack_from("<HHH", data, at + 28))
    return at


def patched(data, *changes):
    data = bytearray(data)
    for at, fmt, value in changes:
        struct.pack_into(fmt, data, at, value)
    return bytes(data)


def local(data, index):
    return struct.unpack_from("<I", data, central(data, index) + 42)[0]


END = -22  # the end record, from the file's end
FAULTS = {  # (the change, what the finding says); entry 2 is data/0
    "stray bytes after the end": (lambda d: d + b"x", "stray bytes after the zip end record"),
    "no end record": (lambda d: d[:-30], "no zip end record"),
    "a multi-disk archive": (lambda d: patched(d, (len(d) + END + 4, "<H", 1)), "multi-disk"),
    "more entries than fit": (lambda d: patched(d, (len(d) + END + 8, "<H", 999),
                                                (len(d) + END + 10, "<H", 999)), "cannot fit"),
    "zip64 without its locator": (lambda d: patched(d, (len(d) + END + 16, "<I", 0xFFFFFFFF)), "without a zip64 locator"),
    "a central entry malformed": (lambda d: patched(d, (central(d, 3), "<I", 0)), "entry 3 is malformed"),
    "a central entry cut off": (lambda d: patched(d, (central(d, 5) + 28, "<H", 60000)), "entry 5 is cut off"),
    "an encrypted storage": (lambda d: patched(d, (central(d, 2) + 8, "<H", 1)), "data/0 is encrypted"),
    "a storage said compressed": (lambda d: patched(d, (central(d, 2) + 10, "<H", 8)), "data/0 is compressed"),
    "a storage of two sizes": (lambda d: patched(d, (central(d, 2) + 20, "<I", 1)), "data/0 is compressed"),
    "no local header": (lambda d: patched(d, (local(d, 2), "<I", 0)), "no local header at byte"),
    "a local header naming another": (lambda d: patched(d, (local(d, 2) + 30, "<B", ord("X"))), "names another file"),
    "overlapping entries": (lambda d: patched(d, (central(d, 3) + 42, "<I", local(d, 1))), "overlaps the entry before"),
    "an entry past the directory": (lambda d: patched(d, (central(d, 2) + 20, "<I", 1 << 30),
                                                      (central(d, 2) + 24, "<I", 1 << 30)),
                                    "runs past the central directory"),
    "a CRC wrong": (lambda d: patched(d, (central(d, 2) + 16, "<I", 12345)), "data/0 fails its CRC check"),
}


@pytest.mark.parametrize("name", FAULTS)
def test_each_zip_rule_has_its_words_in_memory_and_through_a_window(tmp_path, monkeypatch, name):
    change, words = FAULTS[name]
    path = write(tmp_path / "model_world_size_1_rank_0.pt", ORDER)
    path.write_bytes(change(path.read_bytes()))
    for in_memory in (32 << 20, 0):
        monkeypatch.setattr(torchzip, "IN_MEMORY", in_memory)
        with pytest.raises((torchzip.Damaged, torchzip.NotTorchSave), match=words):
            torchzip.check(path)


def test_a_first_entry_named_like_a_storage_is_not_one(tmp_path):
    path = tmp_path / "model_world_size_1_rank_0.pt"
    with zipfile.ZipFile(path, "w") as archive:  # "0": storage 0's name while no folder is known
        for name in ("0", "m/byteorder", "m/data/0", "m/version"):
            archive.writestr(name, b"\1" * 12)
    with pytest.raises(torchzip.NotTorchSave, match="first entry is 0, not <folder>/data.pkl"):
        torchzip.check(path)


class Unseekable(io.RawIOBase):
    def __init__(self):
        self.data = bytearray()

    def writable(self):
        return True

    def write(self, chunk):
        self.data += chunk
        return len(chunk)


def test_data_descriptors_after_zip64_local_headers_are_sized_as_zip64(tmp_path):
    sink = Unseekable()  # zipfile then writes a data descriptor after each entry
    stem = "model_world_size_1_rank_0"
    with zipfile.ZipFile(sink, "w") as archive:
        for name, data in [("data.pkl", synthrun.torch_pickle([3])), ("byteorder", b"little"),
                           ("data/0", b"\1" * 12), ("version", b"3\n")]:
            with archive.open(f"{stem}/{name}", "w", force_zip64=True) as out:
                out.write(data)
    path = tmp_path / f"{stem}.pt"
    path.write_bytes(bytes(sink.data))
    assert all(i.flag_bits & 8 for i in zipfile.ZipFile(path).infolist())
    assert torchzip.check(path)["storages"] == 1


@pytest.mark.parametrize("extra,has", [
    (b"", False),
    (struct.pack("<HH", 1, 16) + bytes(16), True),
    (struct.pack("<HH", 0x4246, 4) + b"ZZZZ" + struct.pack("<HH", 1, 8) + bytes(8), True),  # after torch's padding
    (struct.pack("<HH", 0x4246, 6) + b"\x01\x00ZZZZ", False),  # its tag's bytes inside another field
    (b"ZZ\x01", False),
])
def test_a_zip64_field_is_found_where_a_field_starts(extra, has):
    assert zipwalk._has_zip64(extra) is has


class Counting(io.RawIOBase):
    """A file's stream that counts the bytes read from it."""

    def __init__(self, path):
        self.stream, self.read_bytes = open(path, "rb"), 0

    def seek(self, offset, whence=0):
        return self.stream.seek(offset, whence)

    def read(self, size=-1):
        data = self.stream.read(size)
        self.read_bytes += len(data)
        return data


def test_a_big_file_is_walked_through_headers_not_its_data(tmp_path):
    path = tmp_path / "model_world_size_1_rank_0.pt"
    torchlike.write_shard(path, [32 << 10] * 40)  # 40 entries of 64 KiB
    stream, size = Counting(path), path.stat().st_size
    count, cd_offset, cd_size = zipwalk.end_records(zipwalk.File(stream, size), size)
    stream.read_bytes = 0
    found = zipwalk.walk(zipwalk.File(stream, size), count, cd_offset, cd_size, [])
    assert len(found.spans) == count == 44 and len(found.sizes) == 40
    assert stream.read_bytes <= cd_size + (count + 1) * zipwalk.WINDOW < size // 4


SIZES = array("Q", [8, 12, 2])
REFS = {
    "in order": {0: ("FloatStorage", 2), 1: ("FloatStorage", 3), 2: ("ByteStorage", 2)},
    "out of order": {2: ("ByteStorage", 2), 0: ("FloatStorage", 2), 1: ("FloatStorage", 3)},
    "a key missing": {0: ("FloatStorage", 2), 2: ("ByteStorage", 2)},
    "a key too many": {0: ("FloatStorage", 2), 1: ("FloatStorage", 3), 2: ("ByteStorage", 2), 3: ("ByteStorage", 0)},
    "a key past the end": {0: ("FloatStorage", 2), 1: ("FloatStorage", 3), 5: ("ByteStorage", 2)},
    "a size wrong": {0: ("FloatStorage", 2), 1: ("FloatStorage", 4), 2: ("ByteStorage", 2)},
    "a kind unknown": {0: ("?", 2), 1: ("FloatStorage", 3), 2: ("ByteStorage", 2)},
    "a count unknown": {0: ("FloatStorage", object()), 1: ("FloatStorage", 3), 2: ("ByteStorage", 2)},
    "a count of True": {0: ("FloatStorage", 2), 1: ("FloatStorage", 3), 2: ("ByteStorage", True)},
    "a negative count": {0: ("FloatStorage", 2), 1: ("FloatStorage", -3), 2: ("ByteStorage", 2)},
}


@pytest.mark.parametrize("name", REFS)
def test_whole_list_match_says_yes_only_where_one_by_one_passes(name):
    refs = REFS[name]
    try:
        torchzip._match(refs, SIZES)
        passes = True
    except torchpickle.NotTorchSave:
        passes = False
    fast = torchzip._entry_sizes(refs) == SIZES.tolist()
    assert not fast or passes
    assert fast == (name in ("in order", "out of order"))
    assert passes == (name in ("in order", "out of order", "a kind unknown", "a count unknown"))
