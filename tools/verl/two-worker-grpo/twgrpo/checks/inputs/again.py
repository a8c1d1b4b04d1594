"""Postflight's second look at the inputs: the model, data and reward file the run read are still
the bytes its recorded profile pins.

The inputs phase hashed them before training; a file changed after that (during training, or
after it) would otherwise still read SUCCESS, though the run is then proven for bytes that are no
longer there. The same checks as the inputs phase run again (inputs.py: SHA256SUMS against the
pin, then every listed file, hashed streaming and in parallel by formats/hashing.py), on the
volume the run folder sits in (<root>/runs/verl/two-worker-grpo/<RUN_ID>). Where an input is not
there (the volume is not mounted on this box, the run folder was copied elsewhere) a warning
names what was not re-hashed: never a silent pass.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from ...run.findings import Finding, finding
from ...run.runfolder import runs_dir
from . import inputs, reward


def storage_root_of(folder: Path) -> Optional[Path]:
    """The storage root a run folder sits in, or None when it is not in a volume's layout."""
    folder = Path(folder)
    if len(folder.parents) < 4:
        return None
    root = folder.parents[3]
    return root if runs_dir(root) == folder.parent else None


def _changed(found: List[Finding]) -> List[Finding]:
    """The inputs phase's errors, said as postflight's: the pinned bytes are no longer there."""
    return [finding("POST-E171", f.obj, f"differs from the run's pin now ({f.id}: {f.message})",
                    input_finding=f.id, **f.evidence)
            for f in found if f.level == "error"]


def check_inputs_unchanged(ctx) -> List[Finding]:
    """ctx: postflight.PostflightContext. Records inputs_rehashed (what was re-hashed here)."""
    root = storage_root_of(ctx.run_dir)
    if root is None:
        return [finding("POST-W020", str(ctx.run_dir), "model, data and reward file not re-hashed: "
                        "the run folder is not under <storage root>/runs/verl/two-worker-grpo/, "
                        "so its inputs cannot be found")]
    again = inputs.InputsContext.build(ctx.profile, root)
    found: List[Finding] = []
    rehashed, absent = [], []
    for what, folder, check in (("model", again.model_root, inputs.check_model_files),
                                ("data", again.data_root, inputs.check_data_files)):
        if folder.is_symlink() or not folder.is_dir():
            absent.append(f"{what} ({folder})")
            continue
        found += _changed(check(again))
        rehashed.append(what)
    path = ctx.profile.reward_path(root)
    if path is not None:
        if not path.exists() and not path.is_symlink():
            absent.append(f"reward file ({path})")
        else:
            found += _changed(reward.check_reward_file(again))
            rehashed.append("reward file")
    ctx.evidence["inputs_rehashed"] = rehashed
    if absent:
        found.append(finding("POST-W020", str(root), "not re-hashed, not found on this box: "
                             f"{', '.join(absent)}; the run is not proven for those bytes now",
                             not_rehashed=absent))
    return found
