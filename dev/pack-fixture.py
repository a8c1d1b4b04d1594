#!/usr/bin/env python3
"""Summary: Turn run folders a real GPU run left into a small test fixture.

Usage: python3 dev/pack-fixture.py SRC DEST --from-root /tmp/kr/storage [--from-root ...]
         [--to-root /srv/two-worker-grpo/.smoke/storage] [--keep-shards] [--checkout DIR]
SRC holds run folders (as SMOKE_KEEP copies them); DEST must not exist. For every run folder:
the machine's storage root (each --from-root) is rewritten to --to-root in every text file; report.html is left
out (tests render it again); the tensor bytes of every torch.save shard under actor/ are zeroed
in place (each data/<n> member keeps its name and length, its CRC-32 is recomputed in the data
descriptor and the central directory, so the shard stays a whole archive whose storages match
data.pkl); the lineage's file hashes in run.json and resume.json are recomputed for the zeroed
shards; and the shards are packed into DEST/shards.tar.gz (zeros compress away), paths
relative to DEST. Tests unpack it into their copies. --keep-shards leaves the shards as the
run wrote them, in place (the small smoke fixtures, whose real tensors tests compare with torch).
--checkout DIR rewrites the recording machine's checkout (in package origins) to /srv/two-worker-grpo.
"""
import argparse
import hashlib
import json
import shutil
import struct
import sys
import tarfile
import zipfile
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "verl" / "two-worker-grpo"))
from twgrpo.run import runrecord  # noqa: E402
from twgrpo.run.runfolder import NAME, RunFolder  # noqa: E402

LEFT_OUT = {NAME.report_html}
DESCRIPTOR = b"PK\x07\x08"


def rewrite_root(folder: Path, old: str, new: str) -> int:
    changed = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        data = path.read_bytes()
        if b"\0" in data or old.encode() not in data:
            continue
        path.chmod(path.stat().st_mode | 0o200)
        path.write_bytes(data.replace(old.encode(), new.encode()))
        changed += 1
    return changed


def zero_tensors(shard: Path) -> int:
    """Zero every data/<n> member of a torch.save zip; return the members zeroed."""
    with zipfile.ZipFile(shard) as archive:
        members = [m for m in archive.infolist() if "/data/" in m.filename]
        ends = archive.start_dir
    raw = bytearray(shard.read_bytes())
    for member in members:
        if member.compress_type != zipfile.ZIP_STORED:
            raise SystemExit(f"{shard}: {member.filename} is compressed: not a torch.save shard")
        start = member.header_offset
        name_len, extra_len = struct.unpack_from("<HH", raw, start + 26)
        data_at = start + 30 + name_len + extra_len
        raw[data_at:data_at + member.file_size] = bytes(member.file_size)
        crc = zlib.crc32(bytes(member.file_size))
        if member.flag_bits & 0x08:  # CRC in the data descriptor after the data
            at = data_at + member.file_size
            at += 4 if raw[at:at + 4] == DESCRIPTOR else 0
            struct.pack_into("<I", raw, at, crc)
        else:
            struct.pack_into("<I", raw, start + 14, crc)
    # Central directory: one entry per member, in order; patch each zeroed member's CRC.
    wanted = {m.header_offset: zlib.crc32(bytes(m.file_size)) for m in members}
    at = ends
    while raw[at:at + 4] == b"PK\x01\x02":
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", raw, at + 28)
        offset = struct.unpack_from("<I", raw, at + 42)[0]
        if offset == 0xFFFFFFFF:  # zip64: the offset is in the extra field
            offset = zip64_offset(raw, at, name_len, extra_len)
        if offset in wanted:
            struct.pack_into("<I", raw, at + 16, wanted[offset])
        at += 46 + name_len + extra_len + comment_len
    shard.chmod(shard.stat().st_mode | 0o200)
    shard.write_bytes(bytes(raw))
    with zipfile.ZipFile(shard) as archive:
        bad = archive.testzip()
    if bad:
        raise SystemExit(f"{shard}: {bad} fails its CRC after zeroing")
    return len(members)


def zip64_offset(raw: bytearray, at: int, name_len: int, extra_len: int) -> int:
    extra = raw[at + 46 + name_len:at + 46 + name_len + extra_len]
    sizes = struct.unpack_from("<II", raw, at + 20)
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, pos)
        if tag == 1:
            field = pos + 4 + 8 * sum(1 for s in reversed(sizes) if s == 0xFFFFFFFF)
            return struct.unpack_from("<Q", extra, field)[0]
        pos += 4 + size
    raise SystemExit("a zip64 entry without its offset")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rehash_lineage(run: Path) -> None:
    """Recompute the resumed checkpoint's file hashes where run.json and resume.json keep them."""
    record = runrecord.read(run)
    lineage = record.get("resume")
    if not lineage:
        return
    parent = run.parent / lineage["chain"][-1] / lineage["checkpoint"]
    files = {rel: sha256(parent / rel) for rel in lineage["files"]}
    lineage["files"] = files
    RunFolder(run).run_json.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    resume = RunFolder(run).resume_json
    if resume.is_file():
        data = json.loads(resume.read_text())
        data["lineage"]["files"] = files
        resume.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("src", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--from-root", required=True, action="append")
    parser.add_argument("--to-root", default="/srv/two-worker-grpo/.smoke/storage")
    parser.add_argument("--keep-shards", action="store_true")
    parser.add_argument("--checkout")
    args = parser.parse_args()
    if args.dest.exists():
        print(f"pack-fixture: {args.dest} exists: give a new folder (nothing is overwritten)", file=sys.stderr)
        return 2
    runs = sorted(p for p in args.src.iterdir() if runrecord.exists(p))
    if not runs:
        print(f"pack-fixture: no run folder (with run.json) in {args.src}", file=sys.stderr)
        return 2
    args.dest.mkdir(parents=True)
    for run in runs:
        shutil.copytree(run, args.dest / run.name, symlinks=True,
                        ignore=lambda _d, names: [n for n in names if n in LEFT_OUT])
    shards = [] if args.keep_shards else \
        sorted(p for p in args.dest.rglob("actor/*.pt") if zipfile.is_zipfile(p))
    for shard in shards:
        print(f"pack-fixture: {shard.relative_to(args.dest)}: {zero_tensors(shard)} tensors zeroed")
    for run in runs:
        rehash_lineage(args.dest / run.name)
        changed = sum(rewrite_root(args.dest / run.name, old, args.to_root) for old in args.from_root)
        if args.checkout:
            changed += rewrite_root(args.dest / run.name, args.checkout, "/srv/two-worker-grpo")
        print(f"pack-fixture: {run.name}: {changed} text file rewrites")
    if shards:
        with tarfile.open(args.dest / "shards.tar.gz", "w:gz") as tar:
            for shard in shards:
                tar.add(shard, arcname=str(shard.relative_to(args.dest)))
                shard.unlink()
        print(f"pack-fixture: {len(shards)} shards packed in {args.dest / 'shards.tar.gz'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
