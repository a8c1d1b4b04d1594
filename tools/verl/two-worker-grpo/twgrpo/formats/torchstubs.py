"""The fast path for data.pkl: CPython's C unpickler, with every global replaced by an inert stub.

torchpickle.storage_refs walks the opcodes in Python (about 100 opcodes a tensor, 0.1 s a
shard); this reads the same storages in about a millisecond. Why it is safe on a hostile file:

- Nothing is imported or run. The unpickler resolves every name (GLOBAL, STACK_GLOBAL, INST,
  OBJ, EXT*) through find_class, which the C unpickler looks up on the instance and which here
  returns a fresh subclass of _Stub, never the named object. Pickle has no opcode that reads an
  attribute or calls anything but what is on its stack, so the only callables it can reach are
  these stubs: REDUCE, NEWOBJ and INST build _Stub instances; BUILD, SETITEM(S), APPEND(S) and
  ADDITEMS on them call their no-op methods (on a plain list, dict or set they do what they do
  to any container). The persistent ids go to persistent_load below, which only records them.
- Time is linear in the pickle: it has no loops or jumps, and the bytes are read from memory (a
  length field past the end is a truncation error, not an allocation). Memory is linear too,
  each opcode making at most one object, with one exception: a PUT to memo index n grows the C
  memo to 2n slots, so 5 bytes could ask for gigabytes. The load therefore runs under an
  address-space limit (RLIMIT_AS) of the process's size plus 64 bytes per pickle byte and
  64 MiB; past it the allocation fails cleanly. FAST_MAX bounds the pickle.
- The fast path only ever vouches for a file: on any error or limit it returns None and the
  opcode walk (torchpickle.py) judges the file and words the finding. The storages it finds are
  checked by the walk's own rules (_storage_ref).
"""
from __future__ import annotations

import contextlib
import io
import pickle
from typing import Any, Dict, Iterator, Optional, Tuple

from .torchpickle import MAX_ENTRIES, NotTorchSave, _Global, _storage_ref

FAST_MAX = 4 << 20  # torch writes ~150 bytes of data.pkl a tensor: 339 tensors ~ 50 KB
MAX_GLOBALS = 4096  # distinct names one data.pkl may use (a torch shard uses ~20)
MEMORY_PER_BYTE = 64  # objects the unpickler may build, per byte of data.pkl
MEMORY_BASE = 64 << 20  # and a margin for the allocator's own arenas


class _Stub:
    """What any global in data.pkl becomes: calling, building and filling it does nothing."""

    _pickle_name = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> "_Stub":
        return object.__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

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
    def __init__(self, data: bytes, limit: int) -> None:
        super().__init__(io.BytesIO(data))
        self.limit = limit
        self.refs: Dict[int, Tuple[str, Any]] = {}
        self.stubs: Dict[Tuple[str, str], type] = {}

    def find_class(self, module: str, name: str) -> type:
        key = (str(module), str(name))
        stub = self.stubs.get(key)
        if stub is None:
            if len(self.stubs) >= MAX_GLOBALS:
                raise NotTorchSave(f"data.pkl names more than {MAX_GLOBALS} globals")
            stub = _STUBS.get(key)
            if stub is None:  # made once per name and process: shards name the same ~20
                stub = type("Stub", (_Stub,), {"_pickle_name": f"{key[0]} {key[1]}"})
                if len(_STUBS) < MAX_GLOBALS:
                    _STUBS[key] = stub
            self.stubs[key] = stub
        return stub

    def persistent_load(self, pid: Any) -> _Stub:
        if not isinstance(pid, tuple):
            raise NotTorchSave("data.pkl uses a text persistent id; torch.save never does"
                               if isinstance(pid, str) else
                               f"data.pkl holds a persistent id that is not a torch storage: {pid!r:.120}")
        if len(pid) > 1 and isinstance(pid[1], type) and issubclass(pid[1], _Stub):
            pid = (pid[0], _Global(pid[1]._pickle_name)) + pid[2:]
        _storage_ref(pid, self.refs, self.limit)
        if len(self.refs) > self.limit:
            raise NotTorchSave(f"data.pkl references more than {self.limit} storages")
        return _Stub()


def storage_refs_fast(data: bytes, limit: int = MAX_ENTRIES) -> Optional[Dict[int, Tuple[str, Any]]]:
    """storage_refs (torchpickle.py) of a data.pkl held in memory, or None when this path
    cannot vouch for it (too big, not a pickle, a limit hit): the opcode walk then decides,
    and gives its error."""
    if len(data) > FAST_MAX:
        return None
    reader = _StubUnpickler(data, min(limit, MAX_ENTRIES))
    try:
        with _memory_bound(MEMORY_PER_BYTE * len(data) + MEMORY_BASE) as bounded:
            if not bounded:
                return None
            reader.load()
    except Exception:  # any failure at all: the walk judges the file
        return None
    return reader.refs


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
