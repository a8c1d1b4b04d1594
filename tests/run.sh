#!/usr/bin/env bash
# Summary: Install what the tests need, run shellcheck, bats and pytest, print one closing line.
# Usage: tests/run.sh [pytest args...]        (make test; .ci/run)
#        tests/run.sh --fast [pytest args...] (make test-fast: the Python tests without a Ray
#        cluster, a browser, Slurm or a venv build; needs only the venv, which it builds)
#
# Installs, only when missing: Debian packages python3-venv, bats, bats-assert, bats-support,
# bats-file, ShellCheck, util-linux, git, and chromium with a font, to render the report
# page in a real browser (they need root and the Debian mirror); the venv .venv from
# tests/requirements.txt (needs PyPI). Tests that need root (network namespaces, mounts) skip,
# counted, when not root. Ends with "N passed, N failed, N skipped"; exit 1 if any failed.
set -euo pipefail
if [[ "${TRACE:-}" == 1 ]]; then
  PS4='+ ${BASH_SOURCE[0]##*/}:${LINENO}:${FUNCNAME[0]:-main}: '
  set -x
fi

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
readonly REPO
readonly VENV=$REPO/.venv
readonly RESULTS=$REPO/.cache/test-results
readonly DEBIAN_PACKAGES=(python3-venv bats bats-assert bats-support bats-file shellcheck util-linux
  git chromium fonts-dejavu-core slurmctld slurmd slurm-client munge gcc libc6-dev iptables)

die() {
  printf 'tests: %s\n' "$*" >&2
  exit 2
}

install_debian_packages() {
  local missing=() pkg
  for pkg in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  ((${#missing[@]} == 0)) && return 0
  [[ $(id -u) == 0 ]] || die "missing Debian packages ${missing[*]} — install them (sudo apt-get install ${missing[*]})"
  echo "tests: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_venv() {
  # The stamp's first field is the hash of the requirements' content, so a venv shared between
  # checkouts (a symlink) is reused wherever the requirements are the same.
  local stamp=$VENV/.requirements.sha256 want have=""
  want=$(sha256sum <"$REPO/tests/requirements.txt" | cut -d' ' -f1)
  [[ -f "$stamp" ]] && have=$(cut -d' ' -f1 "$stamp")
  [[ "$have" == "$want" ]] && return 0
  if [[ -x "$VENV/bin/python" ]]; then  # pip leaves what is already satisfied as it is
    echo "tests: bringing $VENV up to tests/requirements.txt"
  else
    echo "tests: building $VENV from tests/requirements.txt"
    python3 -m venv "$VENV"
  fi
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REPO/tests/requirements.txt"
  printf '%s\n' "$want" >"$stamp"
}

shell_files() {
  git -C "$REPO" ls-files -co --exclude-standard -- '*.sh' '*.bash' '*.bats' .ci/run | sed "s|^|$REPO/|"
}

run_shellcheck() {  # a TAP plan and one line per file, so it counts like the other suites
  local file n=0 files=()
  mapfile -t files < <(shell_files)
  echo "1..${#files[@]}"
  for file in "${files[@]}"; do
    n=$((n + 1))
    if shellcheck -x -P "$REPO" "$file" >"$RESULTS/shellcheck.out" 2>&1; then
      echo "ok $n shellcheck ${file#"$REPO"/}"
    else
      echo "not ok $n shellcheck ${file#"$REPO"/}"
      sed 's/^/# /' "$RESULTS/shellcheck.out"
    fi
  done
}

# The verl 0.6.0 wheel: the smoke inputs' verl checkout is made from it (a test checks its pins).
fetch_verl_wheel() {
  [[ -f "$REPO/.cache/wheels/verl-0.6.0-py3-none-any.whl" ]] && return 0
  "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
    -d "$REPO/.cache/wheels" verl==0.6.0 ||
    echo "tests: could not download verl 0.6.0's wheel; the test that needs it will skip"
}

# make test-fast: the inner loop, the Python tests without a cluster, a browser or a venv build.
fast() {
  install_venv
  export PATH="$VENV/bin:$PATH"
  cd "$REPO" && exec python -m pytest -q -p no:cacheprovider tests/py/unit "$@"
}

main() {
  [[ "${1:-}" == --fast ]] && { shift; fast "$@"; }
  install_debian_packages
  install_venv
  fetch_verl_wheel
  mkdir -p "$RESULTS"
  rm -f "$RESULTS"/*.tap "$RESULTS"/*.xml  # a suite that dies must not be counted by old results
  export PATH="$VENV/bin:$PATH"
  local status=0
  echo "== shellcheck"
  run_shellcheck | tee "$RESULTS/shellcheck.tap" || true
  echo "== bats"
  bats --tap --recursive "$REPO/tests/bats" | tee "$RESULTS/bats.tap" || true
  echo "== pytest"
  (cd "$REPO" && python -m pytest -q -rs -p no:cacheprovider --junitxml="$RESULTS/pytest.xml" tests/py "$@") || true
  python3 "$REPO/tests/summarize.py" "$RESULTS" || status=$?
  return "$status"
}

main "$@"
