"""make smoke's environment step (dev/smoke-env.py) on this CPU machine: a lock of small wheels
built here, a local wheelhouse, real venvs and real pip. What needs a GPU (nvidia-smi, a CUDA
torch) is a PATH stub or a stand-in torch distribution; the real run is on the GPU machine."""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "dev" / "smoke-env.py"
sys.path.insert(0, str(REPO / "dev"))
sys.path.insert(0, str(REPO / "tools" / "verl" / "two-worker-grpo"))
from smokeenv import lockfile  # noqa: E402

SYSTEM_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")


def make_wheel(folder: Path, name: str, version: str, body: str = "") -> Path:
    """A pure-Python wheel of one module NAME whose VERSION is its __version__."""
    files = {f"{name}/__init__.py": f"__version__ = {version!r}\n{body}",
             f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(text.encode())}" for path, text in files.items()]
    files[f"{name}-{version}.dist-info/RECORD"] = "\n".join(record + [f"{name}-{version}.dist-info/RECORD,,"]) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lock_for(tmp: Path, wheels, extra=(), reuse=None) -> Path:
    reuse = reuse or {}
    lines = [*extra, "#! import " + " ".join(w.name.split("-")[0] for w in wheels)]
    for w in wheels:
        name, version = w.name.split("-")[:2]
        lines.append(f"{name}=={version} --hash=sha256:{sha(w)}  # reuse: {reuse.get(name, 'any')}; bytes: {w.stat().st_size}")
    path = tmp / "lock.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A bare Python: a new venv, nothing in it but what venv puts there."""
    if SYSTEM_PYTHON is None:
        pytest.skip("no python3 on the system path")
    folder = tmp_path_factory.mktemp("base") / "venv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(folder)], check=True)
    return folder / "bin" / "python"


@pytest.fixture
def house(tmp_path):
    wh = tmp_path / "wheelhouse"
    return wh, [make_wheel(wh, "alpha", "1.0"), make_wheel(wh, "beta", "2.0")]


def ensure(python, env, lock, wheelhouse=None, gpu=False, extra_env=None):
    argv = [sys.executable, str(SCRIPT), "ensure", "--python", str(python), "--env", str(env), "--lock", str(lock)]
    argv += ["--wheelhouse", str(wheelhouse)] if wheelhouse else []
    argv += [] if gpu else ["--no-gpu"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PIP_RETRIES": "0", "PIP_TIMEOUT": "3", **(extra_env or {})})


def version_in(python: Path, name: str) -> str:
    return subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({name!r}))"],
                          capture_output=True, text=True, check=True).stdout.strip()


def pip_into(python: Path, *wheels: Path) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", *map(str, wheels)], check=True)


def test_the_lock_is_built_from_the_wheelhouse_then_reused(tmp_path, base, house):
    wh, wheels = house
    lock, env = lock_for(tmp_path, wheels), tmp_path / "env"
    out = ensure(base, env, lock, wh)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == str(env / "bin")
    assert "installing 2 hash-checked pins from the wheelhouse" in out.stderr
    assert (version_in(env / "bin" / "python", "alpha"), version_in(env / "bin" / "python", "beta")) == ("1.0", "2.0")
    stamp = json.loads((env / "twgrpo-smoke-env.json").read_text())
    assert stamp["installed"] == ["alpha", "beta"] and stamp["lock_sha256"] == sha(lock)
    built = (env / "twgrpo-smoke-env.json").stat().st_mtime_ns
    again = ensure(base, env, lock, wh)
    assert again.returncode == 0 and "reusing" in again.stderr
    assert (env / "twgrpo-smoke-env.json").stat().st_mtime_ns == built  # not built again
    lock.write_text(lock.read_text() + "\n# an edit\n")  # another lock: built again, not reused
    third = ensure(base, env, lock, wh)
    assert third.returncode == 0 and "reusing" not in third.stderr


def test_a_file_whose_hash_differs_is_refused_before_anything_is_written(tmp_path, base, house):
    wh, wheels = house
    lock = lock_for(tmp_path, wheels)
    make_wheel(wh, "beta", "2.0", body="import os  # planted\n")  # same name, other bytes
    out = ensure(base, tmp_path / "env", lock, wh)
    assert out.returncode == 2
    assert f"{wheels[1]}: (ENV-E007) sha256 {sha(wheels[1])} is not the lock's for beta==2.0" in out.stderr
    assert not (tmp_path / "env").exists()


def test_a_wheel_the_wheelhouse_lacks_is_named(tmp_path, base, house):
    wh, wheels = house
    lock = lock_for(tmp_path, wheels)
    wheels[0].unlink()
    out = ensure(base, tmp_path / "env", lock, wh)
    assert out.returncode == 2 and "(ENV-E006) the wheelhouse lacks 1 of the pins to install: alpha==1.0" in out.stderr
    assert not (tmp_path / "env").exists()


def test_a_python_with_a_working_stack_is_used_as_it_is(tmp_path, house):
    wh, wheels = house
    python = tmp_path / "stack" / "bin" / "python"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(python.parent.parent)], check=True)
    pip_into(python, *wheels)
    out = ensure(python, tmp_path / "env", lock_for(tmp_path, wheels), wh)
    assert out.returncode == 0, out.stderr
    assert "already has a working stack: using it" in out.stderr
    assert out.stdout.strip().splitlines()[-1] == str(python.parent)
    assert not (tmp_path / "env").exists()


def test_a_version_outside_its_range_is_installed_over_and_the_base_stays_visible(tmp_path, house):
    wh, wheels = house
    python = tmp_path / "stack" / "bin" / "python"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(python.parent.parent)], check=True)
    pip_into(python, make_wheel(tmp_path / "old", "alpha", "0.9"), make_wheel(tmp_path / "old", "gamma", "3.0"))
    lock, env = lock_for(tmp_path, wheels, reuse={"alpha": ">=1.0"}), tmp_path / "env"
    out = ensure(python, env, lock, wh)
    assert out.returncode == 0, out.stderr
    assert "keeping 0 packages" in out.stderr and "installing 2 hash-checked pins" in out.stderr
    built = env / "bin" / "python"
    assert version_in(built, "alpha") == "1.0"  # the venv's own first
    assert version_in(built, "gamma") == "3.0"  # the base's packages (torch on a GPU machine) still seen
    assert version_in(python, "alpha") == "0.9"  # the base Python is never changed


def test_a_pin_pip_cannot_install_stops_the_build_and_removes_the_venv(tmp_path, base, house):
    wh, wheels = house
    wheels[1].write_bytes(b"not a zip archive")  # the lock below pins these very bytes
    out = ensure(base, tmp_path / "env", lock_for(tmp_path, wheels), wh)
    assert out.returncode == 2 and "(ENV-E008) pip install failed" in out.stderr, out.stderr
    assert not (tmp_path / "env").exists()


def test_a_stack_that_does_not_import_is_refused_and_removed(tmp_path, base, house):
    wh, wheels = house
    broken = make_wheel(wh, "beta", "2.0", body="raise ImportError('beta needs a library this machine lacks')\n")
    out = ensure(base, tmp_path / "env", lock_for(tmp_path, [wheels[0], broken]), wh)
    assert out.returncode == 2 and "(ENV-E009) the stack does not import" in out.stderr
    assert "beta needs a library this machine lacks" in out.stderr
    assert not (tmp_path / "env").exists()


def test_a_base_python_that_cannot_run_is_named(tmp_path, house):
    wh, wheels = house
    out = ensure(tmp_path / "no-python", tmp_path / "env", lock_for(tmp_path, wheels), wh)
    assert out.returncode == 2 and "(ENV-E012)" in out.stderr


def test_a_folder_the_builder_did_not_make_is_left_alone(tmp_path, base, house):
    wh, wheels = house
    env = tmp_path / "env"
    env.mkdir()
    (env / "notes.txt").write_text("mine")
    out = ensure(base, env, lock_for(tmp_path, wheels), wh)
    assert out.returncode == 2 and "(ENV-E010)" in out.stderr
    assert (env / "notes.txt").read_text() == "mine" and len(list(env.iterdir())) == 1


def test_without_wheelhouse_an_unreachable_index_is_said_before_anything_is_written(tmp_path, base, house):
    _, wheels = house
    closed = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "",
              "PIP_CONFIG_FILE": os.devnull}
    out = ensure(base, tmp_path / "env", lock_for(tmp_path, wheels), extra_env=closed)
    assert out.returncode == 2 and "(ENV-E004) pip could not list alpha from its index" in out.stderr
    assert "make wheelhouse WHEELHOUSE=<dir>" in out.stderr
    assert not (tmp_path / "env").exists()


def test_not_enough_disk_is_said_before_anything_is_written(tmp_path, base, house):
    wh, wheels = house
    lock = lock_for(tmp_path, wheels)
    lock.write_text(lock.read_text().replace(f"bytes: {wheels[0].stat().st_size}", f"bytes: {2**60}"))
    out = ensure(base, tmp_path / "env", lock, wh)
    assert out.returncode == 2 and "(ENV-E005)" in out.stderr and "GiB needed for the environment" in out.stderr
    assert not (tmp_path / "env").exists()


def fake_gpu(tmp_path: Path, cuda: str) -> dict:
    """A PATH stub for nvidia-smi: one GPU, a driver for CUDA CUDA."""
    stub = tmp_path / "stub" / "nvidia-smi"
    stub.parent.mkdir()
    stub.write_text("#!/bin/sh\nif [ \"$1\" = -L ]; then echo 'GPU 0: NVIDIA H200 (UUID: GPU-1)'; exit 0; fi\n"
                    f"echo '| NVIDIA-SMI 580.1    Driver Version: 580.1    CUDA Version: {cuda}     |'\n")
    stub.chmod(0o755)
    return {"PATH": f"{stub.parent}:{os.environ['PATH']}"}


def stand_in_torch(tmp_path: Path, version: str, cuda: str) -> Path:
    """A base Python whose `torch` reports VERSION and a CUDA build CUDA, as torch does."""
    python = tmp_path / "torchbase" / "bin" / "python"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(python.parent.parent)], check=True)
    pip_into(python, make_wheel(tmp_path / "t", "torch", version, body=f"class version:\n    cuda = {cuda!r}\n"))
    return python


@pytest.mark.parametrize("torch, cuda, driver, expected", [
    ("2.11.0", "13.0", "12.8", "(ENV-E003) torch 2.11.0 is built for CUDA 13.0, the driver supports CUDA 12.8 at most"),
    ("2.1.0", "12.1", "13.0", "(ENV-E002) torch 2.1.0 is outside >=2.6"),
])
def test_torch_must_fit_the_lock_and_the_driver(tmp_path, house, torch, cuda, driver, expected):
    wh, wheels = house
    python = stand_in_torch(tmp_path, torch, cuda)
    lock = lock_for(tmp_path, wheels, extra=["#! base torch >=2.6"])
    out = ensure(python, tmp_path / "env", lock, wh, gpu=True, extra_env=fake_gpu(tmp_path, driver))
    assert out.returncode == 2 and expected in out.stderr, out.stderr
    assert not (tmp_path / "env").exists()


def test_a_cpu_build_of_torch_is_refused_on_a_gpu_machine(tmp_path, house):
    pytest.importorskip("torch")  # the test venv's real torch is the CPU build
    wh, wheels = house
    lock = lock_for(tmp_path, wheels, extra=["#! base torch >=2.6"])
    out = ensure(sys.executable, tmp_path / "env", lock, wh, gpu=True, extra_env=fake_gpu(tmp_path, "13.0"))
    assert out.returncode == 2 and "(ENV-E003)" in out.stderr and "is a CPU build" in out.stderr


def test_a_machine_without_nvidia_smi_is_exit_2(tmp_path, base, house):
    wh, wheels = house
    out = ensure(base, tmp_path / "env", lock_for(tmp_path, wheels), wh, gpu=True,
                 extra_env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 2 and "(ENV-E001) nvidia-smi is not on PATH" in out.stderr


def test_make_wheelhouse_downloads_the_lock_hash_checked(tmp_path, house):
    wh, wheels = house
    lock, dest = lock_for(tmp_path, wheels), tmp_path / "dest"
    local = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wh), "PIP_CONFIG_FILE": os.devnull}
    argv = [sys.executable, str(SCRIPT), "wheelhouse", "--dest", str(dest), "--lock", str(lock), "--python-version", "3.12"]
    out = subprocess.run(argv, capture_output=True, text=True, env=local, timeout=300)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in dest.iterdir()) == sorted(w.name for w in wheels)
    make_wheel(wh, "alpha", "1.0", body="x = 1\n")  # the index now serves other bytes
    shutil.rmtree(dest)
    out = subprocess.run(argv, capture_output=True, text=True, env=local, timeout=300)
    assert out.returncode == 2 and "(ENV-E013)" in out.stderr


def test_make_wheelhouse_without_a_folder_writes_nothing(tmp_path):
    out = subprocess.run(["make", "-s", "-C", str(REPO), "wheelhouse", "WHEELHOUSE="], capture_output=True, text=True)
    assert out.returncode != 0 and "(ENV-E011)" in out.stderr


def test_the_real_lock_parses_and_matches_its_pins():
    lock = lockfile.load()
    pins = {}
    for line in (REPO / "dev" / "smokeenv" / "pins.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            pin, reuse = line.split(None, 1)
            pins[lockfile.normalize(pin.split("==")[0])] = (pin.split("==")[1], reuse)
    assert {p.key: (p.version, p.reuse) for p in lock.pins} == pins  # make smoke-lock after a pins.txt edit
    assert ("torch", ">=2.6") in lock.base and [p.name for p in lock.fetch] == ["verl"]


def test_the_real_lock_covers_what_verl_needs():
    wheel = REPO / ".cache" / "wheels" / "verl-0.6.0-py3-none-any.whl"
    if not wheel.is_file():
        pytest.skip("verl 0.6.0's wheel is not in .cache/wheels (tests/run.sh fetches it)")
    assert sha(wheel) == lockfile.load().fetch[0].hashes[0]
    with zipfile.ZipFile(wheel) as archive:
        meta = archive.read("verl-0.6.0.dist-info/METADATA").decode()
    needs = {lockfile.normalize(line.split(":", 1)[1].strip().split(";")[0].split("[")[0].split("<")[0]
                                .split(">")[0].split("=")[0].split("!")[0])
             for line in meta.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line}
    # torch is the base's; wandb only serves verl's W&B logger, which the smoke does not use
    assert needs - {p.key for p in lockfile.load().pins} == {"wandb"}


@pytest.mark.parametrize("version, spec, inside", [
    ("2.13.0+cpu", ">=2.6", True), ("0.9.0", ">=0.8,<=0.10.0,!=0.9.0", False),
    ("0.10.0", ">=0.8,<=0.10.0,!=0.9.0", True), ("5.17.0", ">=4.56,<4.57", False), ("4.56.1", ">=4.56,<4.57", True),
    ("2.0", "==2.0.0", True), ("1.0rc1", ">=1.0", True),
])
def test_version_ranges(version, spec, inside):
    assert lockfile.satisfies(version, spec) is inside


@pytest.mark.parametrize("text, says", [
    ("alpha>=1.0 --hash=sha256:" + "a" * 64, "not an exact pin"),
    ("alpha==1.0", "needs one or more --hash"),
    ("alpha==1.0 --hash=sha256:abc", "needs one or more --hash"),
    ("alpha==1.0 --hash=sha256:" + "a" * 64 + "\nalpha==1.1 --hash=sha256:" + "b" * 64, "pinned twice"),
    ("alpha==1.0 --hash=sha256:" + "a" * 64 + "  # reuse: about 1", "not a version range"),
])
def test_a_malformed_lock_is_refused_with_its_line(text, says):
    with pytest.raises(lockfile.LockError, match=says):
        lockfile.parse(text)


def test_two_builds_at_once_make_one_venv(tmp_path, base, house):
    wh, wheels = house
    lock, env = lock_for(tmp_path, wheels), tmp_path / "env"
    argv = [sys.executable, str(SCRIPT), "ensure", "--no-gpu", "--python", str(base), "--env", str(env),
            "--lock", str(lock), "--wheelhouse", str(wh)]
    both = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=600), p.stdout.read(), p.stderr.read()) for p in both]
    assert [code for code, _, _ in results] == [0, 0], results
    assert sum("smoke-env: built" in err for _, _, err in results) == 1  # the other waited and took it
    assert version_in(env / "bin" / "python", "beta") == "2.0"
