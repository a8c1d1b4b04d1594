"""The lines that fill a large run's log, taken a block at a time by their shape.

At thousands of ranks nearly every line the log pass must read is one of seven that each rank
prints once: its NCCL init START and COMPLETE, IB_DISABLE, the network NCCL chose, the NET/IB or
NET/Socket devices, and Gloo's count of connected peers, each behind Ray's actor prefix. Parsing
each one whole (trainlines._parse_line) costs about ten microseconds; here one pattern finds
them where they lie in the block, in C, and each match gives its fields directly. The keyword
search then reads only the rest of the block. A long run's log is verl's metrics line, one a
step ("step:N - name:value - ...", 2 KB of 64 metrics): its head is found the same way and
the rest judged by passes in C (metrics_taken); it gives its step counter
(training/global_step:N), 100,000 steps (229 MB) in 1.4 core-seconds, not the 22 of the
whole-line parser.

A shaped line gives exactly the evidence _parse_line gives for it
(tests/py/unit/test_trainshape.py compares the two on every shape and on hostile fields). Lines
this module does not take (other prefixes or colour codes, extra fields, a field outside its
plain ASCII form, a line holding an alarm word, one longer than the pass's line limit) are left
to _parse_line, so the shapes decide only speed, never a verdict.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

from .trainlines import ALARM_WORDS, IB_DEV, LINE_WORDS, METRIC_STEP, SOCKET_IF, InitEvent, LogScan

_PRINTABLE = rb"[!-9;-~]"  # printable ASCII but the colon: a host, as NCCL's head writes it
# A shaped line: the newline before it, colour codes, Ray's actor prefix, then one of the
# rank's lines to the end of the line. Starting at a newline gives the search a literal to look
# for and the match its line's start. Numbered groups (m.groups() is one call; m.lastindex,
# the last group that took part, names the kind): see the indices below.
SHAPED = re.compile(
    rb"\n(?:\x1b\[[0-9;]{0,32}[A-Za-z]){0,8}"  # a bounded repeat: no backtracking stack per code
    rb"\((?:[A-Za-z_][\w.]{0,200} )?pid=(\d{1,10})(?:, ip=[!-(*-~]{1,255})?\)(?:\x1b\[0m)? ?(?:(?:"
    rb"(" + _PRINTABLE + rb"{1,255}):(\d{1,10}):\d{1,10} \[\d{1,4}\] NCCL INFO (?:"
    rb"(\w{1,64}) comm 0x[0-9a-fA-F]{1,16} rank (\d{1,9}) n[Rr]anks (\d{1,9}) "
    rb"cudaDev (\d{1,4}) nvmlDev (\d{1,4}) busId ([0-9a-fA-F]{1,16}) "
    rb"commId (0x[0-9a-fA-F]{1,16}) - Init (START|COMPLETE)"
    rb"|NCCL_IB_DISABLE set by environment to ([!-\-/-~]{1,64})\.?"
    rb"|Using network (\w{1,64})"
    rb"|NET/IB : Using ([ -~]{0,4096})"
    rb"|NET/Socket : Using ([ -~]{0,4096}))"
    rb"|\[([!-\\^-~]{1,512})\] INFO Rank (\d{1,9}) is connected to (\d{1,9})\. "
    rb"Expected number of connected peers is: (\d{1,9}))(?=\n)"
    # verl's metrics line, a step: "step:N - name:value - ...". Only its head is matched: the
    # rest (2 KB, 64 metrics) is judged in C by metrics_taken, five times faster than a repeat.
    rb"|(step:\d{1,18})(?= - |\n))")
PPID, HOST, PID, FN, RANK, NRANKS, CUDA, NVML, BUS, COMMID, PHASE, IB, NET, IBDEVS, IFS, GPATH, GRANK, \
    PEERS, EXPECTED, METRICS = range(20)  # in m.groups()
# The kind of line (m.lastindex, counted from 1) -> the group of its free text, checked for
# alarms (a metrics line's text is checked for more: metrics_taken)
FREE = {PHASE + 1: FN, IB + 1: IB, NET + 1: NET, IBDEVS + 1: IBDEVS, IFS + 1: IFS, EXPECTED + 1: GPATH}
# A field holding one of these is left to _parse_line: an alarm word makes it judge the line
# for fatal markers and causes, and a second NCCL head inside a NET line's device list would
# let one of its other patterns match first.
_ALARMS = tuple(word.encode() for word in ALARM_WORDS) + (b"NCCL INFO",)
# A metrics line is taken only when it holds none of the words the parser reacts to but its
# step counter: an alarm word, or any other keyword it looks for. A word with a space between
# two characters that are not '-' cannot be in it (its only spaces are those of " - "), so only
# the others are looked for. Every check is a pass in C over the line's 2 KB (metrics_taken).
_METRIC_STEP = re.compile(METRIC_STEP.pattern.encode("ascii"))  # the parser's, on bytes
_COUNTER = b"training/global_step:"  # its literal start (no suffix of it starts it again)
assert _METRIC_STEP.pattern.startswith(_COUNTER)


def _can_be_in_metrics(word: str) -> bool:
    return not any(c == " " and 0 < i < len(word) - 1 and word[i - 1] != "-" and word[i + 1] != "-"
                   for i, c in enumerate(word))


def _by_capital(words) -> Tuple[Tuple[Tuple[bytes, Tuple[bytes, ...]], ...], Tuple[bytes, ...]]:
    """((first capital letter, its words), ...) and the words without a capital letter."""
    groups: Dict[bytes, Tuple[bytes, ...]] = {}
    for word in words:
        anchor = next((bytes([c]) for c in word if 65 <= c <= 90), b"")
        groups[anchor] = groups.get(anchor, ()) + (word,)
    return tuple((a, w) for a, w in groups.items() if a), groups.get(b"", ())


_CAPITAL_WORDS, _LOWER_WORDS = _by_capital(word.encode() for word in dict.fromkeys(ALARM_WORDS + LINE_WORDS)
                                           if word != "training/global_step:" and _can_be_in_metrics(word))
_PLAIN = bytes(c for c in range(32, 127) if not 65 <= c <= 90)  # printable ASCII but capitals
_CAPITALS = bytes(range(65, 91))


def metrics_taken(text: bytes) -> bool:
    """Whether a metrics line's text ("step:N - name:value - ...") may be taken by its shape:
    printable ASCII whose every space is one of a " - ", holding none of the words above. Its
    capitals (verl's metrics have few or none) say which capital-bearing words can be in it."""
    odd = text.translate(None, _PLAIN)  # its capitals and any byte outside printable ASCII
    if odd.translate(None, _CAPITALS) or text.count(b" ") != 2 * text.count(b" - "):
        return False
    if odd and any(anchor in odd and any(map(text.__contains__, words)) for anchor, words in _CAPITAL_WORDS):
        return False
    return not any(map(text.__contains__, _LOWER_WORDS))


# Field texts remembered (hosts, device lists repeat rank after rank): at most MEMO_MOST of at
# most MEMO_TEXT bytes each in each memo, about 2 MiB a memo on any log; any other text is
# checked anew.
# A remembered host, bus id or commId is also one str object wherever it is held, so a
# segment's scan pickles it once and its unpickling (serial, in the process that asked) makes
# it once: 2,048 x 8's whole-log scan loads in 0.10 s, not 0.15.
MEMO_MOST, MEMO_TEXT = 8192, 256


class Shapes:
    """Shaped lines of one block, found before the keyword search; memos of field texts
    (alarm-free or not, devices a NET line names) last across blocks."""

    def __init__(self) -> None:
        self._clean: Dict[bytes, bool] = {}
        self._devices: Dict[Tuple[str, bytes], List[str]] = {}
        self._texts: Dict[bytes, str] = {}

    def _text(self, raw: bytes) -> str:
        """raw (an ASCII field) as str, one object for each text remembered."""
        text = self._texts.get(raw)
        if text is None:
            text = raw.decode("ascii")
            if len(self._texts) < MEMO_MOST and len(raw) <= MEMO_TEXT:
                self._texts[raw] = text
        return text

    def _is_clean(self, text: bytes) -> bool:
        clean = self._clean.get(text)
        if clean is None:
            clean = not any(word in text for word in _ALARMS)
            if len(self._clean) < MEMO_MOST and len(text) <= MEMO_TEXT:
                self._clean[text] = clean
        return clean

    def find(self, block: bytes, size: int, max_line: int) -> Dict[int, Tuple[int, Any]]:
        """{line start: (kind, fields, or a metrics line's text)} of the shaped lines of
        block[:size] (the first line aside: no newline before it), each of at most max_line
        bytes and free of alarm words."""
        found: Dict[int, Tuple[int, Any]] = {}
        clean = self._clean
        for m in SHAPED.finditer(block, 0, size):
            start = m.start() + 1
            if m.end() - start > max_line:
                continue
            kind = m.lastindex
            if kind == METRICS + 1:  # the head: the line runs on to its newline
                end = block.find(b"\n", m.end(), size)
                if end != -1 and end - start <= max_line:
                    text = block[m.start(kind):end]
                    if metrics_taken(text):
                        found[start] = (kind, text)
                continue
            fields = m.groups()
            host, free = fields[HOST], fields[FREE[kind]]
            if (host is None or clean.get(host) or self._is_clean(host)) and \
                    (clean.get(free) or self._is_clean(free)):
                found[start] = (kind, fields)
        return found

    def devices(self, kind: str, text: bytes) -> List[str]:
        key = (kind, text)
        known = self._devices.get(key)
        if known is None:
            body = text.decode("ascii")
            known = ([i["ip"] for i in SOCKET_IF.finditer(body)] if kind == "ifs" else
                     ["%s:%s/%s" % d.group("dev", "port", "link") for d in IB_DEV.finditer(body)])
            if len(self._devices) < MEMO_MOST and len(text) <= MEMO_TEXT:
                self._devices[key] = known
        return known

    def add(self, scan: LogScan, number: int, shaped: Tuple[int, Any]) -> None:
        """What _parse_line adds for this line, line ``number``."""
        kind, f = shaped
        if kind == METRICS + 1:  # f: the line's text
            at = f.find(_COUNTER)  # where finditer's matches can start, found by a faster search
            while at != -1:
                m = _METRIC_STEP.match(f, at)
                if m:
                    scan.add_step(scan.metric_steps, int(m["step"]))
                at = f.find(_COUNTER, at + 1)
            return
        if kind == EXPECTED + 1:
            scan.add_gloo((int(f[PPID]), int(f[GRANK])), (int(f[PEERS]), int(f[EXPECTED])))
            return
        text = self._text
        key = (text(f[HOST]), int(f[PID]))
        if kind == PHASE + 1:
            event = InitEvent(key[0], key[1], int(f[CUDA]), int(f[NVML]), text(f[BUS].lower()),
                              int(f[NRANKS]), int(f[PPID]), number)
            scan.add_init((text(f[COMMID].lower()), int(f[RANK])), text(f[PHASE]), event)
        elif kind == IB + 1:
            scan.add_transport(key, ib=f[IB].decode("ascii"))
        elif kind == NET + 1:
            scan.add_transport(key, network=f[NET].decode("ascii"))
        elif kind == IBDEVS + 1:
            scan.add_transport(key, ib_devices=self.devices("ibdevs", f[IBDEVS]))
        else:
            scan.add_transport(key, ips=self.devices("ifs", f[IFS]))
