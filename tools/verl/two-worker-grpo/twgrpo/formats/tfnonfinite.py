"""NaN and inf in TensorBoard scalars, and which of them a later write took back.

A step can be written twice: verl resumed in the same TensorBoard folder (trainer.resume_mode
auto in one output folder, outside the launcher's attempts, which each have their own folder)
writes the steps after its checkpoint again, in a later event file, and the last write of a
step wins (tfevents.Scalars.values). A NaN written at a step that a later write made finite is
not in the run's history as every view shows it. So every non-finite write is held by tag and
step until a later finite write of the same tag and step takes it back; what stands at the end
is each tag's lowest non-finite step that nothing took back (postflight's POST-E128), and what
was taken back is said too (POST-W128).

Bounds: at most MAX_TAGS tags, and per tag the lowest HELD_STEPS non-finite steps (4,096 x 64
writes held: 15 MiB at most, measured). A write past those is not held: the lowest such step
stands, whatever comes later (it may have been taken back, but a verdict never rests on what
was not held).
"""
from __future__ import annotations

from typing import Dict, Set, Tuple

HELD_STEPS = 64  # non-finite steps held a tag (a diverged run writes NaN at every step after)


class NonFinite:
    """Non-finite writes in read order; standing() and taken_back give the outcome."""

    def __init__(self, max_tags: int) -> None:
        self.max_tags = max_tags
        self.tags: Set[str] = set()  # tags with a non-finite write (up to max_tags)
        self.held: Dict[str, Dict[int, float]] = {}  # tag -> step -> value, not taken back (yet)
        self.beyond: Dict[str, Tuple[int, float]] = {}  # tag -> lowest write not held: stands
        self.taken_back: Dict[str, Tuple[int, float]] = {}  # tag -> lowest write taken back

    def __len__(self) -> int:
        return len(self.tags)

    def note(self, tag: str, step: int, value: float) -> None:
        """A NaN or inf write of tag at step."""
        if tag not in self.tags:
            if len(self.tags) >= self.max_tags:
                return
            self.tags.add(tag)
        steps = self.held.get(tag)
        if steps is None:
            steps = self.held[tag] = {}
        if step in steps or len(steps) < HELD_STEPS:
            steps[step] = value
            return
        # Full: the lowest steps are kept. A diverged run writes NaN at every later step, so a
        # step above the held ones is the common case: one comparison with the last beyond.
        known = self.beyond.get(tag)
        if known is not None and step >= known[0]:
            return
        top = max(steps)
        if step < top:  # below a held step (steps went back): the top gives way
            self._beyond(tag, top, steps.pop(top))
            steps[step] = value
        else:
            self._beyond(tag, step, value)

    def finite(self, tag: str, step: int) -> None:
        """A finite write of tag at step: a non-finite write held for that step is taken back.
        Callers check `tag in held` first: most tags never had a non-finite write."""
        steps = self.held[tag]
        if step in steps:
            value = steps.pop(step)
            if not steps:
                del self.held[tag]
            if tag not in self.taken_back or step < self.taken_back[tag][0]:
                self.taken_back[tag] = (step, value)

    def _beyond(self, tag: str, step: int, value: float) -> None:
        if tag not in self.beyond or step < self.beyond[tag][0]:
            self.beyond[tag] = (step, value)

    def standing(self) -> Dict[str, Tuple[int, float]]:
        """Each tag's lowest non-finite write that nothing took back, by tag."""
        found: Dict[str, Tuple[int, float]] = {}
        for tag in sorted(self.tags):
            steps = self.held.get(tag)
            lowest = min(steps) if steps else None
            candidates = ([(lowest, steps[lowest])] if lowest is not None else []) + \
                ([self.beyond[tag]] if tag in self.beyond else [])
            if candidates:
                found[tag] = min(candidates, key=lambda pair: pair[0])
        return found
