"""The fast path for data.pkl: CPython's C unpickler, with every global replaced by an inert stub.

torchpickle.storage_refs walks the opcodes in Python (about 100 opcodes a tensor, 0.1 s a
shard); this reads the same storages in a few milliseconds, nearly all of it in C: the stubs are
built by BaseException's C constructor, persistent ids are collected by a list's append, and
the pickle is read from a buffered in-memory stream (the C unpickler then takes it in one piece
instead of calling read() for each opcode). Why it is safe on a hostile file:

- Nothing is imported or run. The unpickler resolves every name (GLOBAL, STACK_GLOBAL, INST,
  OBJ, EXT*) through find_class, which the C unpickler looks up on the instance and which here
  returns a fresh subclass of _Stub, never the named object. Pickle has no opcode that reads an
  attribute or calls anything but what is on its stack (the unpickler itself looks up only
  __setstate__, extend, append and add on an object, __new__ and __getinitargs__ on a class),
  so the only callables it can reach are these stubs: REDUCE, OBJ and INST call a stub class,
  which runs BaseException's C __new__ and __init__ (they keep the arguments as a tuple, args,
  and do nothing else); NEWOBJ(_EX) calls its __new__ alone. BUILD, SETITEM(S), APPEND(S) and
  ADDITEMS on a stub call its no-op Python methods (on a plain list, dict or set they do what
  they do to any container). BUILD is the one opcode that could set attributes (__class__,
  __dict__, args, __traceback__ ...): it calls __setstate__ when the object has one, and every
  stub has the no-op below in place of BaseException's, which would set them; a stub class as
  BUILD's target gets the same function unbound, which refuses its one argument. The persistent
  ids go to a list's append, which only keeps them, and None takes their place on the stack;
  after the load, _judge applies the walk's rules (torchpickle._storage_ref) to the whole list.
- Time is linear in the pickle: it has no loops or jumps, and the bytes are read from memory.
  Memory is linear too, each opcode making at most one object, with two exceptions: a PUT to
  memo index n grows the C memo to 2n slots, and a length field (BINBYTES, BINUNICODE8 ...)
  asks for its whole length before reading it, so a few bytes could ask for gigabytes. The load
  therefore runs under an address-space limit (RLIMIT_AS) of the process's size plus 64 bytes
  per pickle byte and 64 MiB; past it the allocation fails cleanly. FAST_MAX bounds the pickle.
- The fast path only ever vouches for a file: on any error or limit it returns None and the
  opcode walk (torchpickle.py) judges the file and words the finding.
"""
from __future__ import annotations

import contextlib
import io
import pickle
from typing import Any, Dict, Iterator, List, Optional, Tuple

from .torchpickle import MAX_ENTRIES, NotTorchSave

FAST_MAX = 4 << 20  # torch writes ~150 bytes of data.pkl a tensor: 339 tensors ~ 50 KB
MAX_GLOBALS = 4096  # distinct names one data.pkl may use (a torch shard uses ~20)
MEMORY_PER_BYTE = 64  # objects the unpickler may build, per byte of data.pkl
MEMORY_BASE = 64 << 20  # and a margin for the allocator's own arenas


class _Stub(BaseException):
    """What any global in data.pkl becomes: calling it keeps the arguments (in C), building and
    filling it does nothing. Never raised: BaseException is only a builtin base whose C
    constructor takes any positional arguments."""

    __slots__ = ()
    _pickle_name = ""

    def __setstate__(self, state: Any) -> None:
        pass

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def append(self, item: Any) -> None:
        pass

    def extend(self, items: Any) -> None:
        pass

    def add(self, item: Any) -> None:
        pass


_STUBS: Dict[Tuple[str, str], type] = {}


class _StubUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, ids: List[Any]) -> None:
        # buffered: the C unpickler peeks the whole pickle once instead of reading each opcode
        super().__init__(io.BufferedReader(io.BytesIO(data), max(len(data), 1)))
        self.persistent_load = ids.append  # C to C: each id kept, None pushed in its place
        self.stubs: Dict[Tuple[str, str], type] = {}

    def find_class(self, module: str, name: str) -> type:
        key = (str(module), str(name))
        stub = self.stubs.get(key)
        if stub is None:
            if len(self.stubs) >= MAX_GLOBALS:
                raise NotTorchSave(f"data.pkl names more than {MAX_GLOBALS} globals")
            stub = _STUBS.get(key)
            if stub is None:  # made once per name and process: shards name the same ~20
                stub = type("Stub", (_Stub,), {"__slots__": (), "_pickle_name": f"{key[0]} {key[1]}"})
                if len(_STUBS) < MAX_GLOBALS:
                    _STUBS[key] = stub
            self.stubs[key] = stub
        return stub


def storage_refs_fast(data: bytes, limit: int = MAX_ENTRIES) -> Optional[Dict[int, Tuple[str, Any]]]:
    """storage_refs (torchpickle.py) of a data.pkl held in memory, or None when this path
    cannot vouch for it (too big, not a pickle, a limit hit): the opcode walk then decides,
    and gives its error."""
    if len(data) > FAST_MAX:
        return None
    ids: List[Any] = []
    reader = _StubUnpickler(data, ids)
    try:
        with _memory_bound(MEMORY_PER_BYTE * len(data) + MEMORY_BASE) as bounded:
            if not bounded:
                return None
            reader.load()
        return _judge(ids, min(limit, MAX_ENTRIES))
    except Exception:  # any failure at all: the walk judges the file
        return None


def _judge(ids: List[Any], limit: int) -> Optional[Dict[int, Tuple[str, Any]]]:
    """Storage key -> (storage type, element count) when every persistent id is one torch.save
    writes, ('storage', <the storage type's stub>, '<key>', location, numel), with each key
    below limit and referenced alike each time: torchpickle._storage_ref's rules (a type that is
    not a stub is "?"), in whole-list passes that run in C (a shard holds hundreds of ids);
    None otherwise."""
    if not ids:
        return {}
    if set(map(type, ids)) != {tuple} or set(map(len, ids)) != {5}:
        return None
    heads, kinds, keys, _, numels = zip(*ids)
    if set(heads) != {"storage"}:
        return None
    names = {kind: (kind._pickle_name.split(" ")[-1]
                    if isinstance(kind, type) and issubclass(kind, _Stub) else "?")
             for kind in set(kinds)}
    pairs = zip(map(names.__getitem__, kinds), numels)
    if keys == _decimals(len(keys)):  # "0", "1", ... once each, as torch writes them
        return dict(enumerate(pairs)) if len(keys) <= limit else None
    if set(map(type, keys)) != {str}:
        return None
    if not (all(map(str.isdigit, keys)) and all(map(str.isascii, keys)) and max(map(len, keys)) < 12):
        return None
    numbers = list(map(int, keys))
    if max(numbers) >= limit:
        return None
    pairs = list(pairs)
    refs = dict(zip(numbers, pairs))
    if len(refs) < len(ids):  # a storage referenced more than once (views, tied weights)
        if any(refs[number] != pair for number, pair in zip(numbers, pairs)):
            return None
    return refs


_DECIMALS: Tuple[str, ...] = ()  # "0", "1", ...: as many as the most storages seen, up to 2^13


def _decimals(count: int) -> Tuple[str, ...]:
    """The first count keys as torch writes them (empty past 2^13: _judge then reads each key)."""
    global _DECIMALS
    if len(_DECIMALS) < count <= 1 << 13:
        _DECIMALS = tuple(map(str, range(count)))
    return _DECIMALS[:count] if count <= len(_DECIMALS) else ()


@contextlib.contextmanager
def _memory_bound(budget: int) -> Iterator[bool]:
    """Lower this process's address-space limit to its current size plus ``budget`` for the
    block, so an allocation past it fails as MemoryError; yields False where that cannot be
    done (no /proc or no resource module), and the caller takes the walk instead."""
    try:
        import resource
        with open("/proc/self/statm", "rb") as stream:
            size = int(stream.read().split()[0]) * resource.getpagesize()
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError, IndexError):
        yield False
        return
    want = size + budget
    if soft != resource.RLIM_INFINITY and soft <= want:
        yield True  # already bounded tighter than we would bound it
        return
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    try:
        yield True
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
