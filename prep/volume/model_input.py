"""The model on the volume: a local folder copied, or the MODEL_HUB client's snapshot of MODEL_ID
at MODEL_REVISION, then SHA256SUMS over every file."""
from __future__ import annotations

import shutil
from pathlib import Path

from prep.volume import layout
from prep.volume.prepared import PrepareError, keep_if_verified, say
from twgrpo.run.profile import Profile

# MODEL_HUB -> (the client's module, its pip package, the hub's name)
MODEL_CLIENTS = {"modelscope": ("modelscope", "modelscope", "ModelScope"),
                 "huggingface": ("huggingface_hub", "huggingface_hub", "Hugging Face")}


def download_model(profile: Profile, staging: Path) -> None:
    client = MODEL_CLIENTS.get(profile.MODEL_HUB)
    if client is None:
        raise PrepareError(f"MODEL_HUB={profile.MODEL_HUB} has no download client here (known: "
                           f"{', '.join(MODEL_CLIENTS)}): pass MODEL_SOURCE=<a local copy of the "
                           "model folder>")
    module, package, hub = client
    try:
        snapshot_download = __import__(module, fromlist=["snapshot_download"]).snapshot_download
    except (ImportError, AttributeError):
        raise PrepareError(f"the {package} client is not installed: pip install {package}, or "
                           "pass MODEL_SOURCE=<a local copy of the model folder>") from None
    say(f"model: downloading {profile.MODEL_ID} at {profile.MODEL_REVISION} from {hub}")
    try:
        snapshot_download(profile.MODEL_ID, revision=profile.MODEL_REVISION, local_dir=str(staging))
    except Exception as exc:  # the client raises many kinds; all mean the same to us
        raise PrepareError(f"{hub} download failed: {exc} — check the network, or pass "
                           "MODEL_SOURCE=<a local copy>") from None


def prepare_model(profile: Profile, root: Path, source: str) -> str:
    final = profile.model_root(root)
    if keep_if_verified(final, "model"):
        return "kept (verified against its SHA256SUMS)"
    staging = layout.staging_for(final)
    if source:
        say(f"model: copying {source}")
        shutil.copytree(source, staging, dirs_exist_ok=True)
        (staging / "SHA256SUMS").unlink(missing_ok=True)  # written fresh below, over every file
    else:
        download_model(profile, staging)
    for cache in (staging / ".msc", staging / ".mv", staging / "._____temp",  # client bookkeeping
                  staging / ".cache"):
        if cache.is_dir():
            shutil.rmtree(cache)
        elif cache.exists():
            cache.unlink()
    layout.write_sums(staging)
    return layout.publish(staging, final)
