"""A sharded model (model.safetensors.index.json + shards) is checked shard by shard against its
index; SHA256SUMS must list every shard."""
import json
import struct

import pytest

from twgrpo.checks.inputs import weights
from twgrpo.checks.inputs.inputs import required_files
from twgrpo.formats import sums
from twgrpo.run.profile import load_profile, with_overrides

INDEX = "model.safetensors.index.json"


def write_shard(path, tensors):
    """A safetensors file of F32 tensors: name -> element count."""
    header, offset = {}, 0
    for name, count in tensors.items():
        header[name] = {"dtype": "F32", "shape": [count], "data_offsets": [offset, offset + 4 * count]}
        offset += 4 * count
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def sharded(folder, layout=None, index=None):
    layout = layout or {"model-00001-of-00002.safetensors": {"embed": 4, "layer.0": 2},
                        "model-00002-of-00002.safetensors": {"layer.1": 2, "lm_head": 4}}
    for shard, tensors in layout.items():
        write_shard(folder / shard, tensors)
    if index is None:
        index = {"metadata": {"total_size": 48},
                 "weight_map": {n: s for s, t in layout.items() for n in t}}
    (folder / INDEX).write_text(json.dumps(index))
    return folder


def test_a_whole_sharded_model_passes_with_every_shard_counted(tmp_path):
    evidence = {}
    assert weights.check_weights(sharded(tmp_path), INDEX, evidence) == []
    assert evidence["model_weights"] == {"index": INDEX, "shards": 2, "tensors": 4,
                                         "bytes": evidence["model_weights"]["bytes"]}


def test_a_shard_missing_a_tensor_its_index_places_there_is_named(tmp_path):
    folder = sharded(tmp_path)
    index = json.loads((folder / INDEX).read_text())
    index["weight_map"]["layer.1"] = "model-00001-of-00002.safetensors"  # wrong shard
    (folder / INDEX).write_text(json.dumps(index))
    found = weights.check_weights(folder, INDEX, {})
    assert [f.id for f in found] == ["INP-E072", "INP-E072"]
    assert "lacks 1 tensor(s) the index places there (layer.1)" in found[0].message
    assert found[0].obj.endswith("model-00001-of-00002.safetensors")
    assert "holds 1 tensor(s) the index places elsewhere or nowhere (layer.1)" in found[1].message


def test_a_truncated_shard_is_named_and_the_other_shards_still_checked(tmp_path):
    folder = sharded(tmp_path)
    shard = folder / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-3])
    found = weights.check_weights(folder, INDEX, {})
    assert [(f.id, f.obj) for f in found] == [("INP-E014", str(shard))]


@pytest.mark.parametrize("index,words", [
    ({"weight_map": {}}, "no weight_map"),
    ({"weight_map": {"embed": "../elsewhere.safetensors"}}, "not a .safetensors file name"),
    ([1, 2], "no weight_map"),
])
def test_an_index_that_cannot_be_used_is_a_finding(tmp_path, index, words):
    folder = sharded(tmp_path, index=index)
    found = weights.check_weights(folder, INDEX, {})
    assert [f.id for f in found] == ["INP-E071"] and words in found[0].message


def test_sha256sums_must_list_every_shard(tmp_path):
    folder = sharded(tmp_path)
    (folder / "config.json").write_text("{}")
    profile = with_overrides(load_profile(None), MODEL_WEIGHTS=INDEX)
    required = required_files(profile, "model", folder)
    assert required == ["config.json", INDEX, "model-00001-of-00002.safetensors",
                        "model-00002-of-00002.safetensors"]
    from twgrpo.formats import hashing
    listed = [n for n in required if n != "model-00002-of-00002.safetensors"]
    (folder / "SHA256SUMS").write_text("".join(f"{hashing.sha256_file(folder / n)}  {n}\n"
                                               for n in listed))
    _, problems = sums.check_folder(folder, required, label="model")
    assert [(p.kind, p.name) for p in problems] == [(sums.REQUIRED, "model-00002-of-00002.safetensors")]


def test_a_single_file_model_is_checked_as_before(tmp_path):
    write_shard(tmp_path / "model.safetensors", {"w": 3})
    evidence = {}
    assert weights.check_weights(tmp_path, "model.safetensors", evidence) == []
    assert evidence["model_weights"]["tensors"] == 1
