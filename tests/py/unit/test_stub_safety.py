"""The data.pkl fast path's stubs (formats/torchstubs.py) on pickles that aim at what they are
built on: BaseException's constructor, its __setstate__ (which would set attributes), the
persistent ids judged only after the load, and the buffered reader the pickle is read through."""
import random
import struct

import pytest
import torchlike
from twgrpo.formats import torchpickle, torchstubs


def text(value: str) -> bytes:
    data = value.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def load(data: bytes):
    """The object the stub unpickler builds, and the persistent ids it kept."""
    ids = []
    return torchstubs._StubUnpickler(data, ids).load(), ids


STUB = b"\x80\x02cmod\nName\n)R"  # a stub instance, built by REDUCE
OTHER = b"cother\nThing\n"  # another stub class


@pytest.mark.parametrize("state", [
    b"}(" + text("__class__") + OTHER + text("args") + text("set") + text("__dict__") + b"}u",
    b"}}(" + text("__class__") + OTHER + text("args") + text("set") + b"u\x86",  # slot state
    b"}(K\x01K\x02" + text("__traceback__") + b"Nu",  # a key that is not a string
], ids=["dict state", "slot state", "non-string key"])
def test_build_sets_nothing_on_a_stub(state):
    data = STUB + state + b"b."
    built, _ = load(data)
    assert type(built).__name__ == "Stub" and built._pickle_name == "mod Name"
    assert built.args == () and built.__dict__ == {}  # BaseException's __setstate__ would set them
    assert torchstubs.storage_refs_fast(data) == {}


def test_build_on_a_stub_class_is_refused_and_sets_nothing():
    data = b"\x80\x02cmod\nTarget\n}(" + text("injected") + b"K\x01ub."
    assert torchstubs.storage_refs_fast(data) is None  # the walk judges it
    stub = torchstubs._STUBS[("mod", "Target")]
    assert not hasattr(stub, "injected")


def test_newobj_ex_and_obj_build_stubs_too():
    data = (b"\x80\x04cmod\nKw\n)}(" + text("k") + b"K\x01u\x92" +  # NEWOBJ_EX with kwargs
            b"(cmod\nObj\nK\x05o" +  # OBJ with one argument
            b"(cmod\nEmpty\no" + b"\x87.")  # OBJ without arguments: cls.__new__(cls)
    built, _ = load(data)
    assert [type(item).__name__ for item in built] == ["Stub"] * 3
    assert built[1].args == (5,)


def test_persistent_ids_are_kept_and_none_takes_their_place():
    data = torchlike.data_pkl([3, 5])
    _, ids = load(data)
    assert [pid[2] for pid in ids] == ["0", "1"] and all(len(pid) == 5 for pid in ids)
    built, ids = load(b"\x80\x02(X\x01\x00\x00\x00aQ\x85.")
    assert built == (None,) and ids == ["a"]


STORAGE = torchstubs._StubUnpickler(b"", []).find_class("torch", "FloatStorage")
BYTE = torchstubs._StubUnpickler(b"", []).find_class("torch", "ByteStorage")


def reference(ids, limit):
    """What persistent_load used to decide, one id at a time as the C unpickler met them."""
    refs = {}
    try:
        for pid in ids:
            if not isinstance(pid, tuple):
                return None
            if len(pid) > 1 and isinstance(pid[1], type) and issubclass(pid[1], torchstubs._Stub):
                pid = (pid[0], torchpickle._Global(pid[1]._pickle_name)) + pid[2:]
            torchpickle._storage_ref(pid, refs, limit)
            if len(refs) > limit:
                return None
    except torchpickle.NotTorchSave:
        return None
    return refs


CASES = {
    "none": [],
    "in order": [("storage", STORAGE, str(k), "cpu", k + 1) for k in range(5)],
    "out of order": [("storage", BYTE, "1", "cpu", 8), ("storage", STORAGE, "0", "cpu", 2)],
    "referenced twice alike": [("storage", STORAGE, "0", "cpu", 2)] * 2,
    "referenced twice otherwise": [("storage", STORAGE, "0", "cpu", 2), ("storage", STORAGE, "0", "cpu", 3)],
    "a leading zero": [("storage", STORAGE, "01", "cpu", 2), ("storage", STORAGE, "0", "cpu", 2)],
    "a key past the limit": [("storage", STORAGE, str(k), "cpu", 1) for k in range(9)],
    "a non-ASCII digit": [("storage", STORAGE, "\u0663", "cpu", 2)],
    "a key of 12 digits": [("storage", STORAGE, "1" * 12, "cpu", 2)],
    "an int key": [("storage", STORAGE, 0, "cpu", 2)],
    "another head": [("storage!", STORAGE, "0", "cpu", 2)],
    "a list, not a tuple": [["storage", STORAGE, "0", "cpu", 2]],
    "four fields": [("storage", STORAGE, "0", "cpu")],
    "a text id": ["storage"],
    "a text storage type": [("storage", "FloatStorage", "0", "cpu", 2)],
    "a stub as element count": [("storage", STORAGE, "0", "cpu", STORAGE())],
}


@pytest.mark.parametrize("name", CASES)
def test_ids_judged_after_the_load_as_one_by_one(name):
    ids = CASES[name]
    judged, wanted = torchstubs._judge(ids, 8), reference(ids, 8)
    assert judged == wanted
    assert (judged is None) == (name in {"referenced twice otherwise", "a key past the limit",
                                         "a non-ASCII digit", "a key of 12 digits", "an int key",
                                         "another head", "a list, not a tuple", "four fields",
                                         "a text id"})


def test_ids_judged_alike_on_random_mixes():
    parts = {"head": ["storage", "storag", b"storage", 0], "kind": [STORAGE, BYTE, "x", None],
             "key": ["0", "1", "2", "00", "7", "8", "-1", "", " 1", "1.0", 1], "numel": [0, 4, 4.0, True, None]}
    rng = random.Random(5)
    for _ in range(3000):
        ids = [tuple(rng.choice(parts[p]) for p in ("head", "kind", "key")) + ("cpu", rng.choice(parts["numel"]))
               for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.1:
            ids.append(rng.choice([("storage",), ["storage", STORAGE, "0", "cpu", 1], "0"]))
        assert torchstubs._judge(ids, 8) == reference(ids, 8), ids


def mutants(data: bytes, count: int, seed: int):
    rng = random.Random(seed)
    for _ in range(count):
        changed = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            changed[rng.randrange(len(changed))] = rng.randrange(256)
        yield bytes(changed)


@pytest.mark.parametrize("numels", [[3, 5, 7], [64] * 12], ids=len)
def test_on_damaged_pickles_the_fast_path_vouches_only_for_what_the_walk_accepts(numels):
    for data in mutants(torchlike.data_pkl(numels), 300, len(numels)):
        fast = torchstubs.storage_refs_fast(data, limit=len(numels))
        try:
            walked = torchpickle.storage_refs(data, limit=len(numels))
        except torchpickle.NotTorchSave:
            assert fast is None, data
            continue
        if fast is not None:  # element counts the walk could not follow it leaves unknown
            assert fast.keys() == walked.keys(), data
            for key, (kind, numel) in fast.items():
                assert walked[key][0] == kind, data
                assert walked[key][1] == numel or not isinstance(walked[key][1], int), data


def test_a_length_past_the_end_read_through_the_buffer_is_refused():
    for opcode, size in ((b"\x8e", 1 << 40), (b"\x8d", 1 << 33), (b"B", 0x7FFFFFF0)):
        data = b"\x80\x04" + opcode + struct.pack("<Q" if opcode != b"B" else "<I", size) + b"xy."
        assert torchstubs.storage_refs_fast(data) is None
