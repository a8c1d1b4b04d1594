"""NaN and inf in TensorBoard scalars, and which of them a later write took back.

A step can be written twice: verl resumed in the same TensorBoard folder (trainer.resume_mode
auto in one output folder, outside the launcher's attempts, which each have their own folder)
writes the steps after its checkpoint again, in a later event file, and the last write of a
step wins (tfevents.Scalars.values). A NaN written at a step that a later write made finite is
not in the run's history as every view shows it. So every non-finite write is held by tag and
step until a later finite write of the same tag and step takes it back (a NaN written there
again holds it again); what stands at the end is each tag's lowest non-finite step that nothing
took back (postflight's POST-E128), and what was taken back is said too (POST-W128).

Bounds: at most HELD_WRITES steps held, over all tags, taken back or not (17 MiB at most,
measured): a diverged run resumed before its divergence rewrites hundreds of steps of tens of
tags. Past that, each tag keeps its lowest steps, and a write not held stands whatever comes
later (it may have been taken back, but a verdict never rests on what was not held), with the
last value written there. Past MAX_TAGS tags with a non-finite write, the first non-finite step
of any other tag stands, with its last value. Each write costs a few dict steps, a heap step
where steps go down: linear on any stream.
"""
from __future__ import annotations

import heapq
from typing import Dict, List, Optional, Set, Tuple

HELD_WRITES = 1 << 17  # steps held in all: 4,096 tags x 32, or 60 tags x 2,184


class NonFinite:
    """Non-finite writes in read order; standing() and taken_back() give the outcome."""

    def __init__(self, max_tags: int) -> None:
        self.max_tags = max_tags
        self.tags: Set[str] = set()  # tags with a non-finite write (up to max_tags)
        self.held: Dict[str, Dict[int, float]] = {}  # tag -> step -> value, standing so far
        self.back: Dict[str, Dict[int, float]] = {}  # tag -> step -> value, taken back so far
        self.count = 0  # steps in held and back
        self.tops: Dict[str, List[int]] = {}  # tag -> its held steps, negated (a heap; stale
        # entries, of steps no longer held, are dropped when they come to the top)
        self.beyond: Dict[str, Tuple[int, float]] = {}  # tag -> lowest write not held: stands
        self.untracked: Optional[Tuple[str, int, float]] = None  # past max_tags: the first, stands

    def __len__(self) -> int:
        return len(self.tags)

    def note(self, tag: str, step: int, value: float) -> None:
        """A NaN or inf write of tag at step."""
        if tag not in self.tags:
            if len(self.tags) >= self.max_tags:
                if self.untracked is None or self.untracked[:2] == (tag, step):  # its last value
                    self.untracked = (tag, step, value)
                return
            self.tags.add(tag)
        back = self.back.get(tag)
        if back and step in back:  # written again, non-finite: held again
            del back[step]
            self.count -= 1
        steps = self.held.get(tag)
        if steps is None:
            steps = self.held[tag] = {}
        if step in steps:
            steps[step] = value
            return
        # A diverged run writes NaN at every later step: past a step not held, one comparison.
        known = self.beyond.get(tag)
        if known is not None and step >= known[0]:
            if step == known[0]:  # written again: the last value is the one that stands
                self.beyond[tag] = (step, value)
            return
        if self.count < HELD_WRITES:
            self._hold(tag, steps, step, value)
            return
        top = self._top(tag, steps)  # full: each tag keeps its lowest steps
        if top is not None and step < top:
            self._beyond(tag, top, steps.pop(top))
            self.count -= 1
            self._hold(tag, steps, step, value)
        else:
            self._beyond(tag, step, value)

    def finite(self, tag: str, step: int) -> None:
        """A finite write of tag at step: a non-finite write held for that step is taken back.
        Callers check `tag in held` first: most tags never had a non-finite write."""
        steps = self.held[tag]
        if step in steps:
            self.back.setdefault(tag, {})[step] = steps.pop(step)
            if not steps:
                del self.held[tag]
                self.tops.pop(tag, None)

    def _hold(self, tag: str, steps: Dict[int, float], step: int, value: float) -> None:
        steps[step] = value
        self.count += 1
        heap = self.tops.setdefault(tag, [])
        heapq.heappush(heap, -step)
        if len(heap) > 2 * len(steps) + 16:  # stale entries: rebuilt, so the heap stays small
            heap[:] = [-held for held in steps]
            heapq.heapify(heap)

    def _top(self, tag: str, steps: Dict[int, float]) -> Optional[int]:
        heap = self.tops.get(tag, [])
        while heap and -heap[0] not in steps:
            heapq.heappop(heap)
        return -heap[0] if heap else None

    def _beyond(self, tag: str, step: int, value: float) -> None:
        if tag not in self.beyond or step < self.beyond[tag][0]:
            self.beyond[tag] = (step, value)

    def standing(self) -> Dict[str, Tuple[int, float]]:
        """Each tag's lowest non-finite write that nothing took back, by tag."""
        found: Dict[str, Tuple[int, float]] = {}
        for tag in self.tags:
            steps = self.held.get(tag)
            candidates = [self.beyond[tag]] if tag in self.beyond else []
            if steps:
                lowest = min(steps)
                candidates.append((lowest, steps[lowest]))
            if candidates:
                found[tag] = min(candidates, key=lambda pair: pair[0])
        if self.untracked is not None:
            tag, step, value = self.untracked
            found[tag] = (step, value)
        return dict(sorted(found.items()))

    def taken_back(self) -> Dict[str, Tuple[int, float]]:
        """Each tag's lowest non-finite write that a later finite write took back, by tag."""
        return {tag: min(steps.items()) for tag, steps in sorted(self.back.items()) if steps}
