"""The model's weights, one file or sharded: MODEL_WEIGHTS names a .safetensors file, or a
sharded model's model.safetensors.index.json, whose every shard is then checked whole and
holding exactly the tensors the index gives it."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

from ...formats import safetensors
from ...run.findings import Finding, finding

INDEX_SUFFIX = ".safetensors.index.json"
SHOWN = 5  # tensor names shown per finding; the count says the rest


def is_sharded(weights: str) -> bool:
    return weights.endswith(INDEX_SUFFIX)


def weight_files(folder: Path, weights: str) -> List[str]:
    """The weight files the run reads: the one file, or the index and every shard it names (only
    the index when it cannot be read: check_weights reports that)."""
    if not is_sharded(weights):
        return [weights]
    try:
        return [weights, *safetensors.read_index(folder / weights)]
    except (OSError, safetensors.WeightsError):
        return [weights]


def _one(path: Path, names: bool = False):
    try:
        return safetensors.inspect(path, names=names), None
    except OSError as exc:
        return None, finding("INP-E014", str(path), f"cannot read the weights: {exc.strerror}")
    except (safetensors.WeightsError, KeyError, TypeError, ValueError) as exc:
        return None, finding("INP-E014", str(path), f"not a whole safetensors file: {exc}")


def _listed(names: List[str]) -> str:
    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def check_weights(folder: Path, weights: str, evidence: Dict[str, object]) -> List[Finding]:
    if not is_sharded(weights):
        info, problem = _one(folder / weights)
        if problem:
            return [problem]
        evidence["model_weights"] = info
        return []
    index_path = folder / weights
    try:
        shards = safetensors.read_index(index_path)
    except OSError as exc:
        return [finding("INP-E014", str(index_path), f"cannot read the index: {exc.strerror}")]
    except safetensors.WeightsError as exc:
        return [finding("INP-E071", str(index_path), str(exc))]
    found, tensors, size = [], 0, 0
    for shard, listed in shards.items():  # one shard at a time: memory is one header's names
        info, problem = _one(folder / shard, names=True)
        if problem:
            found.append(problem)
            continue
        held = set(info.pop("names"))
        missing = [n for n in listed if n not in held]
        extra = sorted(held.difference(listed))
        if missing or extra:
            parts = ([f"lacks {len(missing)} tensor(s) the index places there ({_listed(missing)})"]
                     if missing else [])
            parts += ([f"holds {len(extra)} tensor(s) the index places elsewhere or nowhere "
                       f"({_listed(extra)})"] if extra else [])
            found.append(finding("INP-E072", str(folder / shard), "; ".join(parts),
                                 missing=len(missing), extra=len(extra)))
        tensors += info["tensors"]
        size += info["bytes"]
    evidence["model_weights"] = {"index": weights, "shards": len(shards), "tensors": tensors,
                                 "bytes": size}
    return found
