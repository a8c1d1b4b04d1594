#!/usr/bin/env python3
"""Summary: Build a test storage root: generated inputs, a stand-in verl, a pinned test profile,
and the bundle installed with that profile added and its hash chain renewed.

Usage: tests/lib/fixture.py ROOT [--nodes N] [--gpus-per-node G] [--gpu-model NAME] [--set K=V]
Prints KEY=value lines: PROFILE, LAUNCHER_SHA256, BUNDLE_DIR.
"""
import argparse
import subprocess
import sys
from pathlib import Path

# Path bootstrap: the repo root (prep/, dev/) and the bundle's twgrpo package.
REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools" / "verl" / "two-worker-grpo")]
from dev.sandbox import install_sandbox  # noqa: E402
from prep.volume import pin  # noqa: E402
from twgrpo.formats import hashing  # noqa: E402
from twgrpo.run.profile import load_profile  # noqa: E402

STANDIN = REPO / "tests" / "fixtures" / "verl-standin"
PROFILE = "test-fixture"


def run(*args: str) -> None:
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("--nodes", default="1")
    parser.add_argument("--gpus-per-node", default="2")
    parser.add_argument("--gpu-model", default="NVIDIA A100-SXM4-80GB")
    parser.add_argument("--standin", type=Path, default=STANDIN, help="the stand-in verl tree")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="another profile value (batch sizes for a bigger world)")
    args = parser.parse_args()
    root = args.root
    base = load_profile("smoke-1x1")
    run(str(REPO / "dev" / "generate-inputs.py"), "--storage-root", str(root), "--profile",
        "smoke-1x1", "--verl-source", str(args.standin), "--unpinned")
    # The stand-in's commit is not the smoke pin: find it and move it where the profile says.
    verl_parent = base.verl_root(root).parent
    values = pin.read_pins(base, root)
    values.update(NODES=args.nodes, GPUS_PER_NODE=args.gpus_per_node, GPU_MODEL=args.gpu_model)
    values.update(item.split("=", 1) for item in args.set)
    text = pin.profile_text(base, PROFILE, values, "A test profile made by tests/lib/fixture.py.")
    bundle_dir = root / "tools" / "verl" / "two-worker-grpo"
    install_sandbox(bundle_dir, {PROFILE: text})
    assert (verl_parent / values["VERL_COMMIT"]).is_dir()
    launcher = bundle_dir / "run-two-worker-grpo-v1.sh"
    print(f"PROFILE={PROFILE}")
    print(f"LAUNCHER_SHA256={hashing.sha256_file(launcher)}")
    print(f"BUNDLE_DIR={bundle_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
