"""Hostile and broken artifacts planted into a copy of a run folder (tests and bench only).

Each builder takes the run folder and a size knob, writes its file in bounded memory (big files
are generated, never committed) and returns the finding id postflight must raise for it.
"""
import struct
import zipfile
import zlib
from pathlib import Path

from tbwrite import masked_crc

ACTOR = Path("checkpoints/global_step_2/actor")
MODEL = ACTOR / "model_world_size_1_rank_0.pt"


def _append_repeated(path: Path, unit: bytes, size: int) -> None:
    with open(path, "ab") as stream:
        written = 0
        while written < size:
            stream.write(unit)
            written += len(unit)


def log_without_newline(run: Path, size: int = 300 << 20) -> str:
    """The real log, then ``size`` bytes of real log text with every newline gone."""
    text = (run / "training.log").read_bytes().replace(b"\n", b" ")
    _append_repeated(run / "training.log", text * max(1, (4 << 20) // len(text)), size)
    return "POST-E030"


def comm_id_line(run: Path, size: int = 80_000) -> str:
    """One line 'commId ' + ``size`` non-space characters: quadratic for `[^\\s:]+:`."""
    with open(run / "training.log", "ab") as stream:
        stream.write(b"commId " + b"x" * size + b"\n")
    return ""  # harmless text: the run still passes, and quickly


def tensorboard_length(run: Path, length: int = 1 << 60) -> str:
    """A record whose (CRC-valid) length field claims ``length`` bytes."""
    path = next((run / "tensorboard").iterdir())
    head = struct.pack("<Q", length & ((1 << 64) - 1))
    with open(path, "ab") as stream:
        stream.write(head + struct.pack("<I", masked_crc(head)) + b"\0" * 16)
    return "POST-E015"


def rollout_bad_utf8(run: Path, size: int = 0) -> str:
    path = run / "rollouts" / "1.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = lines[3].replace(b'"output": "', b'"output": "\xff\xfe', 1)
    path.write_bytes(b"".join(lines))
    return "POST-E020"


def pickle_only_zip(run: Path, size: int = 0) -> str:
    """A tiny zip holding only archive/data.pkl in place of a model shard."""
    with zipfile.ZipFile(run / MODEL, "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    return "POST-E032"


def _local(name: bytes, crc: int, csize: int, usize: int, method: int) -> bytes:
    return struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, crc, csize, usize,
                       len(name), 0) + name


def _central(name: bytes, crc: int, csize: int, usize: int, method: int, offset: int) -> bytes:
    return struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0, crc, csize,
                       usize, len(name), 0, 0, 0, 0, 0, offset) + name


def _end(count: int, cd_size: int, cd_offset: int) -> bytes:
    return struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count & 0xFFFF, count & 0xFFFF, cd_size,
                       cd_offset, 0)


def overlapping_zip(run: Path, unpacked: int = 1 << 30, entries: int = 64) -> str:
    """A small zip whose ``entries`` entries all share one deflate stream of ``unpacked`` zeros."""
    stem = MODEL.stem.encode()
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    path = run / MODEL
    crc, chunk, left = 0, b"\0" * (1 << 20), unpacked
    with open(path, "wb") as stream:
        first = stem + b"/data.pkl"
        stream.write(_local(first, 0, 0, 0, 8))  # sizes patched below
        start, csize = stream.tell(), 0
        while left:
            piece = chunk[:min(left, len(chunk))]
            crc = zlib.crc32(piece, crc)
            out = compressor.compress(piece)
            stream.write(out)
            csize += len(out)
            left -= len(piece)
        out = compressor.flush()
        stream.write(out)
        csize += len(out)
        stream.seek(0)
        stream.write(_local(first, crc, csize, unpacked, 8))
        stream.seek(start + csize)
        names = [first] + [stem + b"/data/%d" % i for i in range(entries - 1)]
        directory = b"".join(_central(n, crc, csize, unpacked, 8, 0) for n in names)
        stream.write(directory)
        stream.write(_end(len(names), len(directory), start + csize))
    return "POST-E032"


def many_entries_zip(run: Path, entries: int = 1 << 20) -> str:
    """A zip whose central directory lists ``entries`` entries, all at one stored local entry."""
    stem = MODEL.stem.encode()
    path = run / MODEL
    with open(path, "wb") as stream:
        name = stem + b"/data.pkl"
        payload = b"\x80\x02}q\x00."
        crc = zlib.crc32(payload)
        stream.write(_local(name, crc, len(payload), len(payload), 0) + payload)
        cd_offset = stream.tell()
        cd_size = 0
        batch = []
        for i in range(entries):
            batch.append(_central(stem + b"/data/%d" % i if i else name, crc, len(payload),
                                  len(payload), 0, 0))
            if len(batch) == 4096:
                block = b"".join(batch)
                stream.write(block)
                cd_size += len(block)
                batch = []
        block = b"".join(batch)
        stream.write(block)
        cd_size += len(block)
        if entries > 0xFFFF:  # zip64 end records carry the true count
            z64 = stream.tell()
            stream.write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, entries, entries,
                                     cd_size, cd_offset))
            stream.write(struct.pack("<IIQI", 0x07064B50, 0, z64, 1))
            stream.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                                     0xFFFFFFFF, 0))
        else:
            stream.write(_end(entries, cd_size, cd_offset))
    return "POST-E032"


def huge_rollout_row(run: Path, size: int = 300 << 20) -> str:
    """One rollout row of ``size`` bytes (a long output string)."""
    path = run / "rollouts" / "1.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    with open(path, "wb") as stream:
        stream.write(b"".join(lines[:-1]))
        stream.write(b'{"input": "q", "output": "')
        left = size
        while left > 0:
            piece = min(left, 1 << 20)
            stream.write(b"a" * piece)
            left -= piece
        stream.write(b'", "score": 0.0, "step": 1}\n')
    return "POST-E031"


ROWS = {  # the table: name -> (builder, size knob for bench)
    "training.log of 300 MB without a newline": (log_without_newline, 300 << 20),
    "one line 'commId ' + 80,000 non-space chars": (comm_id_line, 80_000),
    "TensorBoard record length 2^60": (tensorboard_length, 1 << 60),
    "TensorBoard record length 2^64-1": (tensorboard_length, (1 << 64) - 1),
    "rollout line with invalid UTF-8": (rollout_bad_utf8, 0),
    "313-byte zip holding only archive/data.pkl": (pickle_only_zip, 0),
    "1 MB zip, 64 entries on one 1 GiB deflate stream": (overlapping_zip, 1 << 30),
    "zip with 1M entries": (many_entries_zip, 1 << 20),
    "300 MB single rollout row": (huge_rollout_row, 300 << 20),
}
