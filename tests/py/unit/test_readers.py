"""The bounded readers one by one: torch.save archives, safetensors, lines, TensorBoard framing."""
import json
import random
import struct
import zipfile
from pathlib import Path

import pytest
import synthrun
from tbwrite import masked_crc
from twgrpo.formats import lines, safetensors, tfevents, tfrecord, torchzip

FIXTURE = next((Path(__file__).resolve().parents[2] / "fixtures" / "real-smoke-run").glob("smoke-*"))
REAL_SHARDS = sorted((FIXTURE / "checkpoints").rglob("*.pt"))


@pytest.mark.parametrize("path", REAL_SHARDS, ids=lambda p: p.name)
def test_real_torch_save_archives_pass(path):
    summary = torchzip.check(path)
    with zipfile.ZipFile(path) as archive:  # the oracle: zipfile's own listing
        names = archive.namelist()
    assert summary["entries"] == len(names)
    assert summary["storages"] == sum("/data/" in n and "/.data/" not in n for n in names)


def test_the_real_model_shard_references_every_storage_with_its_size():
    path = next(p for p in REAL_SHARDS if p.name.startswith("model_"))
    with zipfile.ZipFile(path) as archive:
        top = archive.namelist()[0].split("/")[0]
        refs = torchzip.storage_refs(archive.read(f"{top}/data.pkl"))
        sizes = {int(i.filename.rsplit("/", 1)[1]): i.file_size for i in archive.infolist()
                 if i.filename.startswith(f"{top}/data/")}
    assert sorted(refs) == sorted(sizes) and len(refs) == 27
    assert all(numel * torchzip.ITEM_SIZE[kind] == sizes[key] for key, (kind, numel) in refs.items())


def rewrite(path, entries, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, data in entries:
            archive.writestr(name, data)


def shard_entries(tmp_path, storages=(64, 3)):
    path = tmp_path / "model_world_size_1_rank_0.pt"
    synthrun.torch_zip(path, storages=storages)
    with zipfile.ZipFile(path) as archive:
        return path, [(n, archive.read(n)) for n in archive.namelist()]


def test_the_synthetic_shard_passes(tmp_path):
    path, _ = shard_entries(tmp_path)
    assert torchzip.check(path)["storages"] == 2


LAYOUT_FAULTS = {
    "unreferenced storage": lambda e: e[:-1] + [(e[0][0].replace("data.pkl", "data/2"), b"x"), e[-1]],
    "referenced storage missing": lambda e: [x for x in e if not x[0].endswith("data/1")],
    "storage of the wrong size": lambda e: [(n, d[:-4] if n.endswith("data/0") else d) for n, d in e],
    "no version": lambda e: [x for x in e if not x[0].endswith("/version")],
    "no byteorder": lambda e: [x for x in e if not x[0].endswith("/byteorder")],
    "data.pkl not first": lambda e: e[1:2] + e[:1] + e[2:],
    "two top folders": lambda e: e + [("other/version", b"3\n")],
    "an unknown entry": lambda e: e + [(e[0][0].replace("data.pkl", "payload.sh"), b"#!")],
    "a pickle that is not torch's": lambda e: [(e[0][0], b"\x80\x02(X\x01\x00\x00\x00aQ.")] + e[1:],
    "a pickle cut short": lambda e: [(e[0][0], e[0][1][:-10])] + e[1:],
    "a pickle string of 2^62 bytes": lambda e: [(e[0][0], b"\x80\x04\x8d" + struct.pack("<Q", 1 << 62) + b"x")] + e[1:],
    "a GLOBAL without its newline": lambda e: [(e[0][0], b"\x80\x02c" + b"t" * 5000)] + e[1:],
}


@pytest.mark.parametrize("name", LAYOUT_FAULTS)
def test_an_archive_torch_save_would_not_write_is_refused(tmp_path, name):
    path, entries = shard_entries(tmp_path)
    rewrite(path, LAYOUT_FAULTS[name](entries))
    with pytest.raises(torchzip.NotTorchSave):
        torchzip.check(path)


def test_a_compressed_entry_is_refused(tmp_path):
    path, entries = shard_entries(tmp_path)
    rewrite(path, entries, zipfile.ZIP_DEFLATED)
    with pytest.raises(torchzip.NotTorchSave, match="compressed"):
        torchzip.check(path)


@pytest.mark.parametrize("cut", [10, 200, 1000])
def test_a_cut_off_archive_is_damaged(tmp_path, cut):
    path, _ = shard_entries(tmp_path)
    path.write_bytes(path.read_bytes()[:-cut])
    with pytest.raises(torchzip.Damaged):
        torchzip.check(path)


def test_a_flipped_byte_fails_its_crc(tmp_path):
    path, _ = shard_entries(tmp_path)
    data = bytearray(path.read_bytes())
    at = data.index(bytes(range(256)))
    data[at + 7] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(torchzip.Damaged, match="CRC"):
        torchzip.check(path)


def safetensors_file(path, tensors, data_size=None):
    header = {name: {"dtype": dtype, "shape": shape, "data_offsets": offsets}
              for name, dtype, shape, offsets in tensors}
    raw = json.dumps(header).encode()
    end = max((t[3][1] for t in tensors), default=0) if data_size is None else data_size
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * end)
    return path


def test_a_well_formed_safetensors_file_passes(tmp_path):
    path = safetensors_file(tmp_path / "m.safetensors", [("a", "F32", [2, 3], [0, 24]),
                                                         ("b", "BF16", [4], [24, 32]), ("c", "I64", [0], [32, 32])])
    assert safetensors.inspect(path)["tensors"] == 3


@pytest.mark.parametrize("tensors,message", [
    ([("a", "F32", [4], [0, 16]), ("b", "F32", [4], [8, 24])], "overlapping"),
    ([("a", "F32", [4], [0, 16]), ("b", "F32", [2], [24, 32])], "a gap"),
    ([("a", "F32", [4], [0, 12])], "is 16 bytes"),
    ([("a", "Q7", [4], [0, 16])], "unknown dtype"),
    ([("a", "F32", [-4], [0, 16])], "shape"),
    ([("a", "F32", [4], [16, 0])], "offsets"),
])
def test_safetensors_offsets_must_be_contiguous_and_sized(tmp_path, tensors, message):
    path = safetensors_file(tmp_path / "m.safetensors", tensors)
    with pytest.raises(safetensors.WeightsError, match=message):
        safetensors.inspect(path)


def test_read_lines_matches_splitlines_whatever_the_chunk(tmp_path):
    for trial in range(200):
        rng = random.Random(trial)
        parts = [b"x" * rng.choice([0, 1, 3, 10, 30]) for _ in range(rng.randint(0, 8))]
        text = b"\n".join(parts) + (b"\n" if rng.random() < 0.5 else b"")
        path = tmp_path / "f"
        path.write_bytes(text)
        limit, chunk = rng.choice([1, 5, 12, 40]), rng.choice([1, 2, 3, 7, 64])
        got = [(l.number, l.offset, l.length, l.data) for l in lines.read_lines(path, limit, chunk)]
        want, offset = [], 0
        for number, line in enumerate(text.splitlines(), 1):
            want.append((number, offset, len(line), line if len(line) <= limit else None))
            offset += len(line) + 1
        assert got == want, (text, limit, chunk)


def framed(length, data=b""):
    head = struct.pack("<Q", length)
    return head + struct.pack("<I", masked_crc(head)) + data


def test_a_plausible_length_past_the_end_is_a_truncated_tail(tmp_path):
    path = tmp_path / "events.out.tfevents.1.x"
    path.write_bytes(framed(1000, b"abc"))
    problems = []
    assert list(tfevents.read_records(path, problems)) == []
    assert [p.kind for p in problems] == ["truncated"]


def test_a_record_larger_than_the_read_limit_is_stepped_over(tmp_path, monkeypatch):
    monkeypatch.setattr(tfrecord, "MAX_RECORD", 100)  # the framing lives in tfrecord.py
    small = b"hello"
    path = tmp_path / "events.out.tfevents.1.x"
    path.write_bytes(framed(500, b"\0" * 504) + framed(len(small), small + struct.pack("<I", masked_crc(small))))
    problems = []
    assert list(tfevents.read_records(path, problems)) == [small] and problems == []
