"""Which storages a torch.save pickle (data.pkl) references, found by walking its opcodes with
pickletools.genops on a symbolic stack: nothing is unpickled or imported, and every item is
bounded before it is read. torchzip.py checks the archive around it.
"""
from __future__ import annotations

import pickletools
from typing import Any, Dict, List, Tuple

MAX_ENTRIES = 500_000  # a shard holds one storage per tensor: far fewer, even for huge models
MAX_ITEM = 16 << 20  # one string or bytes object inside data.pkl
MAX_STACK = 1 << 18  # pickle stack depth, and memo entries kept by the opcode walk
CHUNK = 1 << 20


class NotTorchSave(ValueError):
    """A readable file, but not laid out as torch.save lays out its archive."""


class PickleReader:
    """data.pkl for pickletools.genops, read from the archive in chunks. A pickle item (a string,
    a line) longer than MAX_ITEM is refused before it is read: a length field of 2^62 must not
    become an allocation."""

    def __init__(self, stream, start: int, size: int) -> None:
        self.stream, self.next, self.end = stream, start, start + size
        self.buffer, self.used = b"", 0

    def _fill(self) -> bool:
        if self.next >= self.end:
            return False
        self.stream.seek(self.next)
        data = self.stream.read(min(CHUNK, self.end - self.next))
        if not data:
            return False
        self.next += len(data)
        self.buffer = self.buffer[self.used:] + data
        self.used = 0
        return True

    def read(self, size: int = -1) -> bytes:
        if size < 0 or size > MAX_ITEM:
            raise NotTorchSave(f"data.pkl holds an item of {size} bytes; more than {MAX_ITEM}")
        while len(self.buffer) - self.used < size and self._fill():
            pass
        data = self.buffer[self.used:self.used + size]
        self.used += len(data)
        return data

    def readline(self) -> bytes:
        while True:
            cut = self.buffer.find(b"\n", self.used)
            if cut != -1 or len(self.buffer) - self.used > MAX_ITEM or not self._fill():
                break
        stop = len(self.buffer) if cut == -1 else cut + 1
        data = self.buffer[self.used:min(stop, self.used + MAX_ITEM)]
        self.used += len(data)
        return data


class _Global(str):
    """A GLOBAL opcode's 'module name' on the walk's stack."""


_UNKNOWN = object()
_MARK = object()
_STRINGS = {"BINUNICODE", "SHORT_BINUNICODE", "UNICODE", "BINUNICODE8", "STRING", "BINSTRING",
            "SHORT_BINSTRING"}
_INTS = {"BININT", "BININT1", "BININT2", "INT", "LONG", "LONG1", "LONG4"}


def storage_refs(pickle, limit: int = MAX_ENTRIES) -> Dict[int, Tuple[str, Any]]:
    """Storage key -> (storage type, element count) of every persistent id in a torch pickle
    (bytes or a stream), found by walking its opcodes on a symbolic stack; nothing is unpickled
    or imported. Memory: the stack and the memo's short strings, each at most MAX_STACK."""
    stack: List[Any] = []
    memo: Dict[int, Any] = {}
    memo_len = 0
    refs: Dict[int, Tuple[str, Any]] = {}

    def pop() -> Any:
        if not stack:
            raise NotTorchSave("data.pkl is not a valid pickle (stack underflow)")
        return stack.pop()

    def pop_mark() -> List[Any]:
        items = []
        while True:
            item = pop()
            if item is _MARK:
                return items[::-1]
            items.append(item)

    try:
        for op, arg, _ in pickletools.genops(pickle):
            name = op.name
            if name == "MARK":
                stack.append(_MARK)
            elif name in _STRINGS:  # only short strings can be part of a storage's id
                stack.append(arg if isinstance(arg, str) and len(arg) <= 16 else _UNKNOWN)
            elif name in _INTS:
                stack.append(arg)
            elif name == "GLOBAL":
                stack.append(_Global(arg))
            elif name == "STACK_GLOBAL":
                qualname, module = pop(), pop()
                stack.append(_Global(f"{module} {qualname}") if isinstance(qualname, str) else _UNKNOWN)
            elif name in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"):
                index = memo_len if name == "MEMOIZE" else int(arg)
                memo_len = max(memo_len, index + 1)
                if not stack:
                    raise NotTorchSave("data.pkl is not a valid pickle (memo of an empty stack)")
                if stack[-1] is not _UNKNOWN and len(memo) < MAX_STACK:
                    memo[index] = stack[-1]
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo.get(int(arg), _UNKNOWN))
            elif name == "TUPLE":
                stack.append(tuple(pop_mark()))
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                items = [pop() for _ in range(int(name[-1]))]
                stack.append(tuple(items[::-1]))
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name == "BINPERSID":
                _storage_ref(pop(), refs, limit)
            elif name == "PERSID":
                raise NotTorchSave("data.pkl uses a text persistent id; torch.save never does")
            else:  # any other opcode: its documented stack effect, values unknown
                before = op.stack_before
                if pickletools.markobject in before:
                    pop_mark()
                    for _ in range(before.index(pickletools.markobject)):
                        pop()
                else:
                    for _ in before:
                        pop()
                stack.extend(_UNKNOWN for _ in op.stack_after)
            if len(stack) > MAX_STACK or len(refs) > limit:
                raise NotTorchSave(f"data.pkl's stack grows past {MAX_STACK} items")
    except ValueError as exc:  # genops: unknown opcode, cut off before STOP
        if isinstance(exc, NotTorchSave):
            raise
        raise NotTorchSave(f"data.pkl is not a valid pickle ({exc})") from None
    return refs


def _storage_ref(pid: Any, refs: Dict[int, Tuple[str, Any]], limit: int) -> None:
    """Record ('storage', type, key, location, numel), the persistent id torch.save writes."""
    if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and
            isinstance(pid[2], str) and pid[2].isdigit() and pid[2].isascii() and len(pid[2]) < 12):
        raise NotTorchSave(f"data.pkl holds a persistent id that is not a torch storage: {pid!r:.120}")
    key = int(pid[2])
    if key >= limit:
        raise NotTorchSave(f"data.pkl references storage data/{key}, which has no entry")
    kind = pid[1].split(" ")[-1] if isinstance(pid[1], _Global) else "?"
    seen = refs.get(key)
    if seen is not None and seen != (kind, pid[4]):
        raise NotTorchSave(f"storage data/{key} is referenced as {seen} and as {(kind, pid[4])}")
    refs[key] = (kind, pid[4])
