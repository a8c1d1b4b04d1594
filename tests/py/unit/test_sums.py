"""The one SHA256SUMS reader against hostile folders: names that leave the folder, symlinks out,
devices and FIFOs, duplicates, empty or huge files. The inputs check reports each with its
own id and never hashes what lies outside; pin-inputs and the bundle tools refuse the same."""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from twgrpo.formats import hashing, sums

REPO = Path(__file__).resolve().parents[3]
VERIFY = REPO / "tools/verl/two-worker-grpo/verify-two-worker-grpo-v1.py"


def digest(data: bytes) -> str:
    import hashlib
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "model"
    root.mkdir()
    (root / "config.json").write_text("{}")
    (root / "sub").mkdir()
    (root / "sub" / "weights.bin").write_bytes(b"w" * 1000)
    return root


def write_sums(folder, lines):
    (folder / "SHA256SUMS").write_text("".join(line + "\n" for line in lines))


def good_lines(folder):
    return [f"{digest((folder / n).read_bytes())}  {n}" for n in ("config.json", "sub/weights.bin")]


def kinds(problems):
    return sorted(p.kind for p in problems)


def test_sha256sum_output_parses_and_verifies_like_sha256sum(folder):
    out = subprocess.run(["sha256sum", "config.json", "sub/weights.bin"], cwd=folder,
                         capture_output=True, text=True, check=True).stdout
    (folder / "SHA256SUMS").write_text(out)
    assert subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=folder,
                          capture_output=True).returncode == 0  # the oracle agrees
    listing, problems = sums.check_folder(folder, ["config.json"])
    assert problems == []
    assert list(listing.entries) == ["config.json", "sub/weights.bin"]


@pytest.mark.parametrize("name,kind", [
    ("/etc/hostname", sums.ESCAPES),
    ("../../../../etc/hostname", sums.ESCAPES),
    ("sub/../../outside", sums.ESCAPES),
    ("sub//weights.bin", sums.MALFORMED),
    ("./sub/./weights.bin", sums.MALFORMED),
])
def test_a_name_that_is_not_inside_the_folder_is_never_opened(folder, name, kind):
    write_sums(folder, good_lines(folder) + [f"{'0' * 64}  {name}"])
    listing, problems = sums.check_folder(folder)
    assert kinds(problems) == [kind]
    assert name not in listing.entries


def test_malformed_lines_and_duplicates_are_problems(folder):
    lines = good_lines(folder)
    write_sums(folder, lines + ["not a sums line", f"{'z' * 64}  x", lines[0]])
    _, problems = sums.check_folder(folder)
    assert kinds(problems) == [sums.DUPLICATE, sums.MALFORMED, sums.MALFORMED]


def test_a_symlink_leading_out_is_refused_and_the_outside_file_is_never_hashed(folder, tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"outside bytes")
    (folder / "link").symlink_to(secret)
    write_sums(folder, good_lines(folder) + [f"{'0' * 64}  link"])
    _, problems = sums.check_folder(folder)
    assert kinds(problems) == [sums.SYMLINK_OUT]
    assert digest(b"outside bytes") not in problems[0].message  # no oracle for an attacker


def test_a_symlink_inside_the_folder_is_fine(folder):
    (folder / "alias.json").symlink_to("config.json")
    write_sums(folder, good_lines(folder) + [f"{digest(b'{}')}  alias.json"])
    assert sums.check_folder(folder)[1] == []


def test_dev_zero_a_fifo_and_a_folder_are_refused_at_once(folder):
    (folder / "zero").symlink_to("/dev/zero")
    os.mkfifo(folder / "fifo")
    write_sums(folder, good_lines(folder) + [f"{'0' * 64}  zero", f"{'0' * 64}  fifo",
                                             f"{'0' * 64}  sub"])
    started = time.monotonic()
    _, problems = sums.check_folder(folder)
    assert time.monotonic() - started < 10
    assert kinds(problems) == [sums.NOT_REGULAR, sums.NOT_REGULAR, sums.SYMLINK_OUT]


def test_hashing_a_fifo_fails_instead_of_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="not a regular file"):
        hashing.sha256_file(tmp_path / "fifo")


def test_an_empty_sums_file_still_needs_the_files_the_profile_reads(folder):
    write_sums(folder, [])
    _, problems = sums.check_folder(folder, ["config.json", "sub/weights.bin"])
    assert [(p.kind, p.name) for p in problems] == [(sums.REQUIRED, "config.json"),
                                                    (sums.REQUIRED, "sub/weights.bin")]


def test_reading_is_bounded_for_huge_endless_and_binary_sums_files(folder, tmp_path):
    huge = folder / "SHA256SUMS"
    with open(huge, "wb") as stream:
        stream.truncate(1 << 30)  # sparse: 1 GiB that costs no disk
    started = time.monotonic()
    listing = sums.read(huge, max_bytes=1 << 20)
    assert time.monotonic() - started < 5
    assert kinds(listing.problems) == [sums.UNREADABLE] and "larger than" in listing.problems[0].message
    huge.unlink()
    huge.symlink_to("/dev/zero")
    assert "not a regular file" in sums.read(huge).problems[0].message
    huge.unlink()
    os.mkfifo(huge)
    assert "not a regular file" in sums.read(huge).problems[0].message  # no blocking open
    huge.unlink()
    huge.write_bytes(b"\xff\xfe binary")
    assert "not UTF-8" in sums.read(huge).problems[0].message


# The inputs check on a real fixture storage root, with SHA256SUMS re-pinned in the profile as
# an attacker who also controls the profile (or an operator who pinned a bad folder) would.
# (golden and storage: the shared fixture storage root of conftest.py)


def profile_path(storage):
    return storage / "tools/verl/two-worker-grpo/profiles/test-fixture.env"


def model(storage):
    return next((storage / "models").rglob("model.safetensors")).parent


def repin_model(storage, lines):
    path = model(storage) / "SHA256SUMS"
    path.write_text("".join(line + "\n" for line in lines))
    profile = profile_path(storage)
    profile.write_text(re.sub(r"(?m)^MODEL_SUMS_SHA256=.*$",
                              f"MODEL_SUMS_SHA256={hashing.sha256_file(path)}",
                              profile.read_text()))


def run_inputs(storage):
    out = subprocess.run([sys.executable, "-I", "-B", str(VERIFY), "inputs", "--profile",
                          str(profile_path(storage)), "--storage-root", str(storage)],
                         capture_output=True, text=True, timeout=120)
    return out.returncode, set(re.findall(r"\((INP-[EW]\d+)\)", out.stdout)), out.stdout


def original(storage):
    return (model(storage) / "SHA256SUMS").read_text().splitlines()


ATTACKS = [
    ("absolute path", lambda s: [f"{'0' * 64}  /etc/hostname"], {"INP-E020"}),
    ("dot-dot path", lambda s: [f"{'0' * 64}  ../../../../../../../../etc/hostname"], {"INP-E020"}),
    ("duplicate entry", lambda s: original(s)[:1], {"INP-E021"}),
]


@pytest.mark.parametrize("name,extra,expected", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_inputs_names_each_sums_attack(storage, name, extra, expected):
    repin_model(storage, original(storage) + extra(storage))
    code, ids, out = run_inputs(storage)
    assert code == 1, out
    assert ids == expected, out
    assert "etc/hostname: sha256 expected" not in out  # the outside file was not hashed


def test_inputs_refuses_a_symlink_out_and_dev_zero(storage, tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"x")
    (model(storage) / "extra.bin").symlink_to(outside)
    (model(storage) / "zero.bin").symlink_to("/dev/zero")
    repin_model(storage, original(storage) + [f"{'0' * 64}  extra.bin", f"{'0' * 64}  zero.bin"])
    code, ids, out = run_inputs(storage)
    assert code == 1 and ids == {"INP-E022"}, out
    assert out.count("(INP-E022)") == 2


def test_inputs_refuses_a_listed_fifo(storage):
    os.mkfifo(model(storage) / "pipe")
    repin_model(storage, original(storage) + [f"{'0' * 64}  pipe"])
    code, ids, out = run_inputs(storage)
    assert code == 1 and ids == {"INP-E023"}, out


def test_an_empty_sums_file_with_tampered_weights_fails(storage):
    weights = model(storage) / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 1
    weights.write_bytes(bytes(raw))
    repin_model(storage, [])
    code, ids, out = run_inputs(storage)
    assert code == 1, out
    assert "INP-E025" in ids, out
    assert re.search(r"model.safetensors'? is needed but not listed", out)


def test_an_oversized_sums_file_is_unreadable_not_a_hang(storage):
    repin_model(storage, original(storage) + ["#" * 100] * 200000)  # 20 MB of junk lines
    code, ids, out = run_inputs(storage)
    assert code == 1 and ids == {"INP-E024"}, out


def test_pin_inputs_refuses_an_unsafe_folder_and_writes_no_profile(storage, tmp_path):
    from prep.volume import pin
    from twgrpo.run.profile import load_profile
    profile = load_profile(str(profile_path(storage)))
    pins = pin.read_pins(profile, storage)  # the fixture itself pins
    assert pins["MODEL_SUMS_SHA256"] == hashing.sha256_file(model(storage) / "SHA256SUMS")
    repin_model(storage, original(storage) + [f"{'0' * 64}  ../../../../etc/hostname"])
    with pytest.raises(pin.UnsafeFolder, match="climbs out of the folder"):
        pin.read_pins(profile, storage)
    name = f"unsafe-{os.getpid()}"
    target = REPO / "tools/verl/two-worker-grpo/profiles" / f"{name}.env"
    try:
        out = subprocess.run([sys.executable, str(REPO / "prep/prepare-inputs.py"), "pin",
                              "--prep-root", str(storage), "--profile", str(profile_path(storage)),
                              "--name", name], capture_output=True, text=True, timeout=120)
        assert out.returncode == 1, out.stderr
        assert "cannot be pinned" in out.stderr and "nothing was pinned" in out.stderr
        assert not target.exists()
    finally:
        if target.exists():
            target.unlink()


def test_the_bundle_tools_read_sums_with_the_same_parser(tmp_path):
    from prep import bundle
    files = {"a.py": tmp_path / "a.py"}
    files["a.py"].write_text("x = 1\n")
    sums_file = tmp_path / "SHA256SUMS"
    sums_file.write_text(f"{hashing.sha256_file(files['a.py'])}  a.py\n"
                         f"{'0' * 64}  ../escape.py\nbroken line\n")
    launcher = tmp_path / "launcher.sh"
    checker = tmp_path / bundle.CHECKER_NAME
    checker.write_text("pass\n")
    launcher.write_text(f"readonly BUNDLE_SUMS_SHA256={hashing.sha256_file(sums_file)}\n"
                        f"readonly BUNDLE_CHECK_SHA256={hashing.sha256_file(checker)}\n")
    problems = bundle.chain_problems(files, sums_file, launcher)
    assert any("climbs out of the folder" in p for p in problems), problems
    assert any("is not '<sha256>  <name>'" in p for p in problems), problems
    assert len(problems) == 2
