# Shared setup for the bats suites: a sealed sandbox per test (rbenv's test_helper style).
# HOME and the storage root live under $BATS_TEST_TMPDIR; PATH is reset to the stubs, the test
# venv and the system folders, so nothing from the developer's shell leaks in.

REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd -P)
VENV=$REPO/.venv
LAUNCHER_REL=tools/verl/two-worker-grpo/run-two-worker-grpo-v1.sh

bats_load_library bats-support
bats_load_library bats-assert
bats_load_library bats-file

sandbox() {
  export HOME=$BATS_TEST_TMPDIR/home
  mkdir -p "$HOME"
  export PATH="$REPO/tests/stubs:$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  unset STORAGE_ROOT RUN_ID PROFILE PYTHONPATH TRACE
  # The test Ray heads' GPUs are nvidia-smi stubs, so NCCL has nothing to run on; the collective
  # probe is off here unless a test asks for it (Gloo: launcher_phases.bats, tests/py).
  export COLLECTIVE_PROBE=off
  export STORAGE=$BATS_TEST_TMPDIR/storage
}

# A fixture storage root (stand-in verl, tiny model, data, bundle with the test profile),
# built once per file and copied for each test.
build_fixture_once() {  # in setup_file
  FIXTURE=$BATS_FILE_TMPDIR/fixture
  if [[ ! -d "$FIXTURE" ]]; then
    "$VENV/bin/python" "$REPO/tests/lib/fixture.py" "$FIXTURE" "$@" >"$BATS_FILE_TMPDIR/fixture.env"
  fi
  export FIXTURE
}

use_fixture() {  # in setup: a private copy of the fixture as $STORAGE
  cp -a "$BATS_FILE_TMPDIR/fixture" "$STORAGE"
  export BUNDLE=$STORAGE/tools/verl/two-worker-grpo
  export PROFILE=test-fixture
}

gpus_csv() {  # gpus_csv FILE COUNT [MODEL] [DRIVER]: the nvidia-smi stub's table
  local file=$1 count=$2 model=${3:-NVIDIA A100-SXM4-80GB} driver=${4:-535.104.05} i
  echo "index,name,memory.total,driver_version,pci.bus_id,uuid" >"$file"
  for ((i = 0; i < count; i++)); do
    printf '%d,%s,81920,%s,00000000:%02X:00.0,GPU-%08d-0000-4000-8000-000000000000\n' \
      "$i" "$model" "$driver" $((7 + 4 * i)) "$i" >>"$file"
  done
}

# The Driver command for the sandbox's installed bundle, as make driver-command prints it.
driver_command() {  # driver_command RUN_ID
  "$VENV/bin/python" "$REPO/prep/bundle.py" driver-command "$STORAGE" --profile "$PROFILE" \
    --run-id "$1" --launcher "$BUNDLE/run-two-worker-grpo-v1.sh" --bundle-dir "${BUNDLE#"$STORAGE"/}"
}

run_dir() { echo "$STORAGE/runs/verl/two-worker-grpo/$1"; }

# Every file under a folder with its hash: compare before/after to show nothing changed.
tree_state() {
  (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
}

# A copy of this checkout (tracked and untracked files, not ignored ones), for tests that
# run make targets which rewrite files (checksums, pin-inputs).
copy_repo() {  # copy_repo DEST
  mkdir -p "$1"
  (cd "$REPO" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$1")
}

flip_byte() {  # flip one bit of the middle byte of a file
  python3 - "$1" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[len(data) // 2] ^= 0x01
open(path, "wb").write(bytes(data))
PY
}

# In setup_file, after build_fixture_once: the node's environment as the pasted RuntimeEnv sets
# it (stub nvidia-smi with COUNT GPUs, IB off), and a real single-node Ray head with the bundle's
# HF rollout adapter importable (the fixture profile's ROLLOUT_ENGINE is hf).
start_standin_head() {  # start_standin_head GPU_COUNT
  export GPUS_CSV=$BATS_FILE_TMPDIR/gpus.csv
  gpus_csv "$GPUS_CSV" "$1"
  export NVIDIA_SMI_STUB=$GPUS_CSV NCCL_IB_DISABLE=1
  export PYTHONPATH=$FIXTURE/tools/verl/two-worker-grpo/rollout
  # shellcheck source=dev/ray-head.bash
  source "$REPO/dev/ray-head.bash"
  # A CPU per GPU bundle plus the TaskRunner's, as verl asks (preflight's job-shape check).
  start_ray_head "$BATS_FILE_TMPDIR/ray-head.log" --num-gpus="$1" --num-cpus=$(($1 + 1)) 3>&-
  export RAY_HEAD_PGID RAY_HEAD_TEMP
  unset PYTHONPATH
}

stop_standin_head() {  # in teardown_file
  # shellcheck source=dev/ray-head.bash
  source "$REPO/dev/ray-head.bash"
  stop_ray_head
}
