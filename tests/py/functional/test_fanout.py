"""In-job postflight spreads the shard checks over a real Ray cluster (a local head here; the
multi-host test cluster runs the launcher with it): a damaged shard is reported with the node
that read it, the verdicts equal the local check's, and without a cluster the check runs here."""
import socket
import sys

import torchlike
from twgrpo.checks.checkpoint import fanout, shards


def test_slices_balance_bytes_largest_first(tmp_path):
    sizes = {tmp_path / f"f{i}": size for i, size in enumerate([100, 90, 50, 40, 10, 5])}
    parts = fanout.slices(sizes, 2)
    assert [sum(sizes[p] for p in part) for part in parts] == [150, 145]
    assert fanout.slices(sizes, 10) and len(fanout.slices(sizes, 10)) == 6


def test_a_damaged_shard_is_reported_with_the_node_that_read_it(ray_head, tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", ray_head)
    paths = []
    for rank in range(4):
        path = tmp_path / f"model_world_size_4_rank_{rank}.pt"
        torchlike.write_shard(path, [256] * 8)
        paths.append(path)
    data = bytearray(paths[2].read_bytes())
    data[len(data) // 2] ^= 0xFF
    paths[2].write_bytes(bytes(data))
    said = []
    try:
        found = fanout.check_files(paths, log=said.append, timeout=300)
    finally:
        import ray
        ray.shutdown()
    assert "spread over 1 Ray node(s)" in said[0]
    local = shards.check_files(paths)
    assert [p for p in paths if found[p]] == [paths[2]] == [p for p in paths if local[p]]
    assert found[paths[2]] == (local[paths[2]][0],
                               f"{local[paths[2]][1]} (checked on node {socket.gethostname()})")


def test_without_ray_the_shards_are_checked_here(tmp_path, monkeypatch):
    path = tmp_path / "model_world_size_1_rank_0.pt"
    torchlike.write_shard(path, [64])
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    said = []
    assert fanout.check_files([path], log=said.append) == {path: None}
    assert said == ["postflight: no Ray cluster to spread the shard checks over (ModuleNotFoundError); "
                    "checking them here"]


def test_a_pickletools_planted_on_the_workers_pythonpath_is_never_imported(ray_head, tmp_path, monkeypatch):
    # The job's PYTHONPATH names folders on the shared volume; a planted module there that
    # passes every pickle must not stand in for the standard library's on the worker.
    planted = tmp_path / "planted"
    planted.mkdir()
    marker = tmp_path / "planted-ran"
    (planted / "pickletools.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nmarkobject = object()\n"
        "def genops(pickle):\n    return iter(())\n")
    path = tmp_path / "model_world_size_1_rank_0.pt"
    torchlike.write_shard(path, [256] * 8)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    import ray
    ray.init(address=ray_head, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(planted)}})
    said = []
    try:
        found = fanout.check_files([path], log=said.append, timeout=300)
    finally:
        ray.shutdown()
    assert not marker.exists()
    assert "spread over 1 Ray node(s)" in said[0] and len(said) == 1
    assert found[path] is not None and found[path][0] == shards.check_files([path])[path][0]
