"""What the runs learned, for make compare: every scalar both logged, judged against a tolerance.

A scalar is compared at its end: the mean over the last WINDOW of the steps both runs logged
(at least one step, at most MAX_WINDOW). It is the same when the two means differ by at most
the tolerance (relative, of the larger; plus ABS_TOL for values at zero). Beyond it:

* over MIN_STEPS or more common steps, it is judged against its own noise, the median change
  from one logged step to the next within the two runs: within NOISE_TIMES of it the runs
  agree as far as their noise can tell; further apart, they differ;
* over fewer steps the noise cannot be told: a scalar that does not move at all within
  either run, over two logged steps or more (a learning rate, a reward that is always 0),
  differs; one that moves is "too few steps to judge" (a tiny random model's response
  lengths over 2 steps are such noise), never a difference.

Timing, throughput and memory scalars are not what a run learned: they are set side by side
(how it went) and not judged. Points are the report's (runview.py: at most 240 per scalar,
the last step kept; a resumed run's curve begins with its parents' steps).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .compare_defaults import DEFAULT_TOLERANCE
from .runview import RunView

ABS_TOL = 1e-9
WINDOW = 0.10
MAX_WINDOW = 100
MIN_STEPS = 8
NOISE_TIMES = 3.0
PERFORMANCE = ("timing_s/", "timing_per_token_ms/", "perf/", "global_seqlen/")
Points = List[Tuple[int, float]]

VERDICTS = {"same": "within tolerance", "noise": "within the runs' step-to-step noise",
            "differs": "differs beyond tolerance", "few": "too few steps to judge",
            "not judged": "how it went, not judged", "no common step": "no common step"}


def _point(point: Tuple[int, float]) -> List[Any]:
    """[step, value] for JSON: NaN and inf spelled out as text."""
    return [point[0], point[1] if math.isfinite(point[1]) else str(point[1])]


def _finite(points: Points) -> Points:
    return [(s, v) for s, v in points if math.isfinite(v)]


def _interpolate(points: Points, step: int) -> Optional[float]:
    """points' value at step, on the straight line between its neighbours."""
    before = [(s, v) for s, v in points if s <= step]
    after = [(s, v) for s, v in points if s >= step]
    if not before or not after:
        return None
    (s0, v0), (s1, v1) = before[-1], after[0]
    return v0 if s1 == s0 else v0 + (v1 - v0) * (step - s0) / (s1 - s0)


def aligned(a: Points, b: Points) -> List[Tuple[int, float, float]]:
    """(step, a's value, b's value) on the steps both logged; when thinning left them few
    common steps, b on a's steps within both runs' range (linearly between b's points)."""
    a, b = _finite(a), _finite(b)
    bv = dict(b)
    common = [(s, v, bv[s]) for s, v in a if s in bv]
    if len(common) * 2 >= min(len(a), len(b)) or len(b) < 2:
        return common
    lo, hi = max(a[0][0], b[0][0]), min(a[-1][0], b[-1][0])
    out = []
    for s, v in a:
        if lo <= s <= hi:
            w = _interpolate(b, s)
            if w is not None:
                out.append((s, v, w))
    return out


def _median(values: List[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def noise(a: Points, b: Points, lo: int, hi: int) -> Optional[float]:
    """The median change between successive logged steps within each run, over lo..hi."""
    changes = []
    for points in (a, b):
        inside = [v for s, v in _finite(points) if lo <= s <= hi]
        changes += [abs(y - x) for x, y in zip(inside, inside[1:])]
    return _median(changes) if changes else None


def judge(tag: str, a: Points, b: Points, tolerance: float) -> Dict[str, Any]:
    """One scalar of two runs: the common steps, the final values and the verdict."""
    out: Dict[str, Any] = {
        "tag": tag, "kind": "how it went" if tag.startswith(PERFORMANCE) else "learned",
        "last": [_point(a[-1]) if a else None, _point(b[-1]) if b else None]}
    pairs = aligned(a, b)
    out["common_steps"] = len(pairs)
    if not pairs:
        out.update(verdict="no common step", window=0)
        return out
    window = pairs[-max(1, min(MAX_WINDOW, math.ceil(len(pairs) * WINDOW))):]
    mean_a = sum(p[1] / len(window) for p in window)  # divided first: 1e308 + 1e308 is no inf
    mean_b = sum(p[2] / len(window) for p in window)
    diff, scale = mean_a - mean_b, max(abs(mean_a), abs(mean_b))
    allowed = ABS_TOL + tolerance * scale
    out.update(window=len(window), from_step=window[0][0], to_step=window[-1][0], mean=[mean_a, mean_b],
               difference=diff, relative=(diff / scale if scale else 0.0), allowed=allowed)
    if out["kind"] == "how it went":
        out["verdict"] = "not judged"
        return out
    if abs(diff) <= allowed:
        out["verdict"] = "same"
        return out
    step_noise = noise(a, b, pairs[0][0], pairs[-1][0])
    out["noise"] = step_noise
    if len(pairs) >= MIN_STEPS and step_noise is not None:
        out["verdict"] = "noise" if abs(diff) <= NOISE_TIMES * step_noise else "differs"
    else:
        steady = all(len(_finite(p)) >= 2 and len({v for _, v in _finite(p)}) == 1 for p in (a, b))
        out["verdict"] = "differs" if steady else "few"
    return out


def compare(run: RunView, reference: RunView, tolerance: float) -> Dict[str, Any]:
    """Every scalar both runs logged, judged (differences are run minus reference); the
    scalars only one of them logged, named."""
    a, b = dict(run.series), dict(reference.series)
    both = [tag for tag, _ in run.series if tag in b]
    judged = [judge(tag, a[tag], b[tag], tolerance) for tag in both]
    return {"judged": judged,
            "only_first": [t for t in a if t not in b], "only_other": [t for t in b if t not in a],
            "not_charted": [len(run.more_tags), len(reference.more_tags)],
            "counts": {name: sum(1 for j in judged if j["verdict"] == name) for name in VERDICTS}}


def differing(result: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [j for j in result["judged"] if j["verdict"] == "differs"]


def summary(result: Dict[str, Any]) -> str:
    """'41 scalars: 35 within tolerance, 6 too few steps to judge; 27 not judged (how it went)'."""
    counts = result["counts"]
    learned = sum(v for k, v in counts.items() if k != "not judged")
    parts = [f"{counts[k]} {VERDICTS[k]}" for k in ("differs", "same", "noise", "few", "no common step")
             if counts[k]]
    text = f"{learned} learned scalars: " + (", ".join(parts) if parts else "none in common")
    if counts["not judged"]:
        text += f"; {counts['not judged']} timing/throughput scalars set side by side"
    return text


def tolerance_of(value: Optional[str]) -> float:
    """The TOLERANCE knob: a relative tolerance like 0.05, or a percentage like 5%."""
    if value is None or value == "":
        return DEFAULT_TOLERANCE
    text = value.strip()
    percent = text.endswith("%")
    # float() raises ValueError on anything else; the caller says what to write instead
    number = float(text[:-1] if percent else text) / (100.0 if percent else 1.0)
    if not math.isfinite(number) or not 0 <= number < 10:
        raise ValueError(value)
    return number


def charted(views: Sequence[RunView]) -> List[Tuple[str, List[Points]]]:
    """(tag, each run's points) for every scalar the first run and at least one other logged."""
    others = [dict(v.series) for v in views[1:]]
    return [(tag, [points] + [o.get(tag, []) for o in others]) for tag, points in views[0].series
            if any(tag in o for o in others)]
