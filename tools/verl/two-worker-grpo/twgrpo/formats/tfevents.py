"""TensorBoard event files without tensorboard: Event protobufs and their scalars, from the
records tfrecord.py frames and checks.
"""
from __future__ import annotations

import dataclasses
import math
import re
import struct
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

from .crc32c import crc32c
from . import tffold
from .tfnonfinite import NonFinite
from .tfproto import known_row, scalars_of_event
from .tfrecord import MAX_RECORD, Problem, masked_crc, read_records

__all__ = ["MAX_RECORD", "Problem", "Scalars", "crc32c", "load_scalars", "load_views",
           "masked_crc", "read_records", "scalars_of_event"]

def _file_order(path: Path) -> Tuple[int, str]:
    match = re.search(r"tfevents\.(\d+)", path.name)
    return (int(match.group(1)) if match else 0, str(path))


class Problems(list):
    """The first PROBLEM_SAMPLES problems, and how many there were (a file of a million
    damaged records must not become a million findings)."""
    count = 0

    def append(self, problem: Problem) -> None:
        self.count += 1
        if len(self) < PROBLEM_SAMPLES:
            super().append(problem)


PROBLEM_SAMPLES = 20
MAX_VALUES = 200_000  # (tag, step) values held in all; each tag is thinned to its share
MIN_PER_TAG = 32  # a tag's share never falls below this (MAX_TAGS x 32 < MAX_VALUES)
MAX_TAGS = 4096
BUCKETS = 240  # a charted tag's envelope: at most this many step buckets, each its min and max
ENVELOPE_TAGS = 256  # tags given an envelope (the first seen); a report charts fewer


@dataclasses.dataclass
class Scalars:
    files: List[Path]
    values: Dict[str, Dict[int, float]]  # tag -> step -> value; the last write of a step wins
    problems: List[Problem]
    tags: Set[str] = dataclasses.field(default_factory=set)  # every tag seen (up to MAX_TAGS)
    last: Dict[str, int] = dataclasses.field(default_factory=dict)  # tag -> last step seen
    held: int = 0  # values held
    dropped: int = 0  # values not held: their tag came after MAX_TAGS others
    thinned: int = 0  # values let go to keep a long run's charts within MAX_VALUES
    stride: Dict[str, int] = dataclasses.field(default_factory=dict)  # tag -> steps kept: k*stride
    # tag -> (lowest step, value) of a NaN or inf write no later finite write of that step took
    # back, for every tag, kept or not (MAX_TAGS; tfnonfinite.py); and of those taken back
    nonfinite: Dict[str, Tuple[int, float]] = dataclasses.field(default_factory=dict)
    taken_back: Dict[str, Tuple[int, float]] = dataclasses.field(default_factory=dict)
    # With envelopes on (charts): tag -> bucket -> [step of min, min, step of max, max] over
    # every finite value, thinned or not; a bucket is width[tag] steps, doubled as needed.
    envelope: Optional[Dict[str, Dict[int, List]]] = None
    width: Dict[str, int] = dataclasses.field(default_factory=dict)

    def drawn(self, tag: str) -> List[Tuple[int, float]]:
        """A tag's points for a chart: each bucket's lowest and highest value at their steps
        (min/max per pixel, from every value read), then the last step; without an envelope,
        the values held."""
        buckets = (self.envelope or {}).get(tag)
        # One step a bucket (a short run): each step's last write, exactly, as a rewrite wins.
        if not buckets or (self.width.get(tag, 1) == 1 and self.stride.get(tag, 1) == 1):
            return sorted(self.values.get(tag, {}).items())
        points = set()
        for low_step, low, high_step, high in buckets.values():
            points.add((low_step, low))
            points.add((high_step, high))
        last = self.last.get(tag)
        if last is not None and last in self.values.get(tag, {}):
            points = {p for p in points if p[0] != last} | {(last, self.values[tag][last])}
        return sorted(points)

    def at(self, tag: str, step: int) -> Optional[float]:
        return self.values.get(tag, {}).get(step)

    def last_step(self, tag: str) -> Optional[int]:
        return self.last.get(tag)


View = Tuple[Optional[Iterable[str]], Optional[int]]  # (keep, keep_step) of load_scalars


def load_scalars(folder: Path, keep: Optional[Iterable[str]] = None,
                 keep_step: Optional[int] = None) -> Scalars:
    """Scalars of every event file under folder; with ``keep``, values of those tags only.
    Memory is bounded: each tag keeps the steps that are multiples of its stride, the stride
    doubling whenever the tag holds more than its share of MAX_VALUES, so a tag's series covers
    the whole run; its last step and keep_step are always held."""
    return load_views(folder, [(keep, keep_step)])[0]


def event_files(folder: Path) -> List[Path]:
    """The event files under folder, in the order they are read (by their time stamp)."""
    return sorted(folder.rglob("events.out.tfevents.*"), key=_file_order)


def load_views(folder: Path, views: List[View], envelopes: bool = False) -> List[Scalars]:
    """load_scalars for several (keep, keep_step) views in one pass: each record is read,
    CRC-checked and decoded once, and its values go to every view (postflight's checks).
    envelopes: each view also keeps every tag's min and max per step bucket (Scalars.drawn)."""
    files = event_files(folder)
    problems = Problems()
    tags: Set[str] = set()
    nonfinite: Dict[str, Tuple[int, float]] = {}  # every tag's, whatever a view keeps: shared
    taken_back: Dict[str, Tuple[int, float]] = {}
    writes = NonFinite(MAX_TAGS)  # filled as the records come; nonfinite and taken_back at the end
    rewritable = writes.held  # tag -> its non-finite steps: a finite write may take one back
    loads = [(Scalars(files, {}, problems, tags=tags, nonfinite=nonfinite, taken_back=taken_back,
                      envelope={} if envelopes else None),
              set(keep) if keep is not None else None, keep_step) for keep, keep_step in views]
    # tag -> the views that keep it, each with the parts of it a value touches (up to MAX_TAGS)
    routes: Dict[str, List[tuple]] = {}
    # The last step of a tag and the last value written at it: the same for every view that
    # holds the tag (each holds all of its values from its first), so one pair a tag.
    latest: Dict[str, Tuple[int, float]] = {}
    layouts: Dict = {}  # the record layouts met so far (tfproto.scalars_of_event)

    def fold(step: int, found: Iterable[Tuple[str, float]]) -> None:
        """One record's values into every view that keeps their tags, value by value."""
        for tag, value in found:
            route = routes.get(tag)
            if route is None:
                route = _route(loads, routes, tags, tag)
            finite = not value - value  # 0.0 for a finite value, NaN for NaN and inf
            if not finite:
                writes.note(tag, step, value)
            elif tag in rewritable:
                writes.finite(tag, step)
            held = False
            for scalars, keep_step, values, strides, lasts, envelope, widths in route:
                if envelope is not None and finite:
                    # A value inside a bucket it does not widen is most of a long run's:
                    # judged here, without a call; the rest (a new bucket) by _envelop.
                    buckets = envelope.get(tag)
                    cell = None if buckets is None else buckets.get(step // widths.get(tag, 1))
                    if cell is None:
                        _envelop(scalars, envelope, tag, step, value)
                    else:
                        if value < cell[1]:
                            cell[0], cell[1] = step, value
                        if value > cell[3]:
                            cell[2], cell[3] = step, value
                series = values.get(tag)
                if series is None or step in series:  # a new tag, a step written again
                    held = _hold(scalars, tag, step, value, keep_step) or held
                    continue
                held = True  # _hold's steps for a new step of a held tag, inline
                if step > lasts[tag]:
                    lasts[tag] = step
                stride = strides.get(tag, 1)
                if step % stride and step != keep_step:
                    scalars.thinned += 1  # a long run's most common value
                    continue
                series[step] = value
                scalars.held += 1
                if len(series) > max(MIN_PER_TAG, MAX_VALUES // len(values)):
                    _thin(scalars, tag, series, stride * 2, keep_step)
            if held and step >= latest.get(tag, (step,))[0]:
                latest[tag] = (step, value)

    # Rows of one layout wait in a batch (tffold.py): folded a tag at a time once steady.
    batch_tags: Optional[Tuple[str, ...]] = None
    batch_steps: List[int] = []
    batch_rows: List[tuple] = []

    def flush() -> None:
        if batch_rows:
            if tffold.steady(batch_tags, routes, writes, MAX_TAGS, ENVELOPE_TAGS):
                tffold.fold_rows(batch_tags, batch_steps, batch_rows, routes, writes, latest,
                                 _envelop, _thin, _share)
            else:
                for step, row in zip(batch_steps, batch_rows):
                    fold(step, zip(batch_tags, row))
            batch_steps.clear()
            batch_rows.clear()

    for path in files:
        try:
            for index, record in enumerate(read_records(path, problems)):
                try:
                    row = known_row(layouts, record)
                except (ValueError, struct.error):  # read again below, where damage is named
                    row = None
                if row is not None:
                    if row[2] is not batch_tags or len(batch_rows) * len(row[2]) >= tffold.BATCH:
                        flush()
                        batch_tags = row[2]
                    batch_steps.append(row[0])
                    batch_rows.append(row[3])
                    continue
                flush()
                try:
                    step, _, found = scalars_of_event(record, layouts)
                except (ValueError, struct.error) as exc:  # ThriftError is a ValueError
                    problems.append(Problem("crc", str(path), index, -1,
                                            f"record does not decode: {exc}"))
                    continue
                fold(step, found)
            flush()
        except OSError as exc:  # a FIFO, a device, a read error
            flush()
            problems.append(Problem("crc", str(path), 0, -1, f"unreadable: {exc.strerror or exc}"))
    nonfinite.update(writes.standing())
    taken_back.update(writes.taken_back())
    for scalars, _, _ in loads:
        for tag, series in scalars.values.items():  # the chart and the summary end at the last step
            step, value = latest[tag]
            if step not in series:
                scalars.held += 1
            series[step] = value
    return [scalars for scalars, _, _ in loads]


def _share(tags: int) -> int:
    """Values a tag may hold while ``tags`` tags are held (more, and it is thinned)."""
    return max(MIN_PER_TAG, MAX_VALUES // tags)


def _route(loads, routes: Dict[str, List[tuple]], tags: Set[str], tag: str) -> List[tuple]:
    """The views that keep a tag seen for the first time (or past MAX_TAGS, every time)."""
    if tag not in tags and len(tags) < MAX_TAGS:
        tags.add(tag)
    route = [(scalars, keep_step, scalars.values, scalars.stride, scalars.last, scalars.envelope,
              scalars.width) for scalars, wanted, keep_step in loads if wanted is None or tag in wanted]
    if len(routes) < MAX_TAGS:
        routes[tag] = route
    return route


def _hold(scalars: Scalars, tag: str, step: int, value: float, keep_step: Optional[int]) -> bool:
    """Hold one value of a tag the view keeps; True when the tag is held at all."""
    series = scalars.values.get(tag)
    if series is None:
        if len(scalars.values) >= MAX_TAGS:
            scalars.dropped += 1
            return False
        series = scalars.values[tag] = {}
    last = scalars.last.get(tag)
    if last is None or step > last:
        scalars.last[tag] = step
    stride = scalars.stride.get(tag, 1)
    if step in series:
        series[step] = value  # the last write of a step wins
    elif step % stride == 0 or step == keep_step:
        series[step] = value
        scalars.held += 1
        if len(series) > _share(len(scalars.values)):
            _thin(scalars, tag, series, stride * 2, keep_step)
    else:
        scalars.thinned += 1
    return True


def _envelop(scalars: Scalars, envelope: Dict[str, Dict[int, List]], tag: str, step: int,
             value: float) -> None:
    """Widen the tag's bucket of this step to hold value; past BUCKETS buckets, the width
    doubles and neighbouring buckets merge (a run of any length keeps BUCKETS at most)."""
    buckets = envelope.get(tag)
    if buckets is None:
        if len(envelope) >= ENVELOPE_TAGS:
            return
        buckets = envelope[tag] = {}
    width = scalars.width.get(tag, 1)
    cell = buckets.get(step // width)
    if cell is None:
        buckets[step // width] = [step, value, step, value]
        while len(buckets) > BUCKETS:
            width *= 2
            merged: Dict[int, List] = {}
            for index, (low_step, low, high_step, high) in buckets.items():
                into = merged.get(index // 2)
                if into is None:
                    merged[index // 2] = [low_step, low, high_step, high]
                    continue
                if low < into[1]:
                    into[0], into[1] = low_step, low
                if high > into[3]:
                    into[2], into[3] = high_step, high
            buckets = scalars.envelope[tag] = merged
            scalars.width[tag] = width
        return
    if value < cell[1]:
        cell[0], cell[1] = step, value
    if value > cell[3]:
        cell[2], cell[3] = step, value


def _thin(scalars: Scalars, tag: str, series: Dict[int, float], stride: int,
          keep_step: Optional[int]) -> None:
    """Keep every stride-th step of one tag (and keep_step): half of what it held."""
    scalars.stride[tag] = stride
    gone = [s for s in series if s % stride and s != keep_step]
    for step in gone:
        del series[step]
    scalars.held -= len(gone)
    scalars.thinned += len(gone)


def is_finite(value: Optional[float]) -> bool:
    return value is not None and math.isfinite(value)
