"""EXTRA_OVERRIDES against the pinned verl's own trainer config: a key verl does not have is a
typo that Hydra would refuse only after the job has its GPUs (or, with a +, silently add and
nothing would read), so it is refused here with the nearest key verl has.

verl ships its trainer config flattened into one file (CI keeps it equal to what Hydra composes
from ppo_trainer.yaml and its defaults), so reading that file gives every key without
re-implementing Hydra's defaults lists.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ...formats import yamlsubset
from ...run.findings import Finding, finding
from ...run.profile import Profile
from ...run.recipe import WORD

CONFIG = Path("verl/trainer/config/_generated_ppo_trainer.yaml")


class Unreadable(Exception):
    """The pinned tree's trainer config cannot be read; the message says why."""


def trainer_config(verl_root: Path) -> Dict[str, Any]:
    path = Path(verl_root) / CONFIG
    try:
        return yamlsubset.load(path)
    except OSError as exc:
        raise Unreadable(f"cannot read {path}: {exc.strerror or exc}")
    except yamlsubset.YamlError as exc:
        raise Unreadable(f"{path}: {exc}")


def paths(config: Dict[str, Any], prefix: str = "") -> List[str]:
    """Every dotted key of config, mappings included."""
    found = []
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        found.append(dotted)
        if isinstance(value, dict):
            found += paths(value, dotted + ".")
    return found


def walk(config: Dict[str, Any], key: str) -> Tuple[int, Any]:
    """(how many of key's segments exist, the node the last existing one holds)."""
    node: Any = config
    segments = key.split(".")
    for depth, segment in enumerate(segments):
        if not isinstance(node, dict) or segment not in node:
            return depth, node
        node = node[segment]
    return len(segments), node


def did_you_mean(config: Dict[str, Any], key: str, known: List[str]) -> str:
    """The nearest key verl has: by the whole dotted key, else by the first missing segment."""
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    if close:
        return close[0]
    depth, node = walk(config, key)
    segments = key.split(".")
    if isinstance(node, dict):
        close = difflib.get_close_matches(segments[depth], [str(k) for k in node], n=1, cutoff=0.7)
        if close:
            return ".".join(segments[:depth] + close + segments[depth + 1:])
    return ""


def judge(config: Dict[str, Any], word: str, known: List[str]) -> Optional[Tuple[str, str]]:
    """(finding id, why) for an override verl's config does not take, else None. Hydra's rules:
    key= and ~key need the key; +key= needs it absent; ++key= takes either."""
    match = WORD.match(word)
    prefix, key = match.group(1) or "", match.group(2)
    depth, node = walk(config, key)
    exists = depth == len(key.split("."))
    if prefix == "+" and exists:
        return "GEN-E054", f"verl's config already has {key}: drop the '+'"
    if exists:
        return None
    if prefix in ("", "~"):
        guess = did_you_mean(config, key, known)
        return "GEN-E053", (f"verl's trainer config has no key {key}"
                            + (f"; did you mean {guess}?" if guess else ""))
    # A new key (+ or ++): fine under a free-form mapping ({} or null in verl's config); under a
    # mapping verl reads field by field, one close to a key it has is a typo nothing would read.
    if isinstance(node, dict) and node:
        guess = did_you_mean(config, key, known)
        if guess:
            return "GEN-E053", f"verl's trainer config has no key {key}; did you mean {guess}?"
    return None


def check_override_keys(profile: Profile, words: List[str],
                        verl_root: Optional[Path]) -> List[Finding]:
    """Findings for the accepted override words (recipe.parse's) against the pinned verl."""
    obj = f"profile {profile.PROFILE_NAME}"
    if not words:
        return []
    if verl_root is None or not Path(verl_root).is_dir():
        where = f" at {verl_root}" if verl_root else ""
        return [finding("GEN-W050", obj, f"EXTRA_OVERRIDES not checked against verl's trainer "
                        f"config: no verl checkout{where}", verl_root=str(verl_root or ""))]
    try:
        config = trainer_config(verl_root)
    except Unreadable as exc:
        return [finding("GEN-E055", obj, f"verl's trainer config cannot be read: {exc}",
                        config=str(Path(verl_root) / CONFIG))]
    known = paths(config)
    found = []
    for word in words:
        refused = judge(config, word, known)
        if refused:
            ident, why = refused
            found.append(finding(ident, obj, f"EXTRA_OVERRIDES {word!r}: {why}", override=word))
    return found
