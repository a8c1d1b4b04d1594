"""Rank placement from a log scan (checks/placement/placement.py), on scans built here: the usual
rank judged without a set, and each rank that is not usual judged as before: a START logged twice
by one process is no fault and places the rank, two processes or a missing line are, and one
process may hold one rank only. Ranks that name one set of IB devices list it sorted."""
from twgrpo.checks.placement.placement import place_ranks
from twgrpo.formats.rankevidence import InitEvent, Transport
from twgrpo.formats.trainlines import LogScan

WORLD, COMM = 4, "0xabc"
DEVICES = frozenset({"mlx5_1:1/IB", "mlx5_0:1/IB"})
PREFLIGHT = {"status": "passed", "workers": [
    {"hostname": f"node-{n}", "node_id": f"id{n}", "node_ip": f"10.0.0.{n}"} for n in range(2)]}


def event(rank, pid=None, cuda=None, line=1):
    return InitEvent(f"node-{rank // 2}", 100 + rank if pid is None else pid,
                     rank % 2 if cuda is None else cuda, rank % 2, f"{rank:02x}", WORLD, None, line)


def healthy_scan():
    scan = LogScan()
    for rank in range(WORLD):
        start, complete = event(rank), event(rank, line=2)
        scan.inits[(COMM, rank)] = {"START": [start], "COMPLETE": [complete]}
        scan.gloo[(start.pid, rank)] = {(WORLD - 1, WORLD - 1)}
        scan.transport[(start.host, start.pid)] = Transport(["0"], networks=frozenset({"IB"}),
                                                            ib_devices=DEVICES)
    return scan


def placed(scan):
    found, record = place_ranks(scan, PREFLIGHT, WORLD, 2, 2, "ib")
    return sorted((f.id, f.obj) for f in found), record


def test_the_usual_ranks_are_placed_and_list_their_devices_sorted():
    scan = healthy_scan()
    scan.transport[("node-1", 103)] = Transport(["0"], networks=frozenset({"IB"}),
                                                ib_devices={"mlx5_9:1/IB", "mlx5_2:1/IB"})
    found, record = placed(scan)
    assert found == []
    assert [row["rank"] for row in record["actors"]] == list(range(WORLD))
    assert [row["ib_devices"] for row in record["actors"]] == [["mlx5_0:1/IB", "mlx5_1:1/IB"]] * 3 + [
        ["mlx5_2:1/IB", "mlx5_9:1/IB"]]
    assert record["node_counts"] == {"id0": 2, "id1": 2}


def test_a_start_logged_twice_by_one_process_places_the_rank_from_its_first():
    scan = healthy_scan()
    scan.inits[(COMM, 2)]["START"].append(event(2, line=9))
    found, record = placed(scan)
    assert found == []
    assert [row["pid"] for row in record["actors"]] == [100, 101, 102, 103]


def test_a_rank_claimed_by_two_processes_or_missing_a_line_is_named():
    scan = healthy_scan()
    scan.inits[(COMM, 1)]["COMPLETE"] = [event(1, cuda=7)]
    del scan.inits[(COMM, 3)]["START"]
    found, record = placed(scan)
    assert found == [("POST-E008", f"commId {COMM} rank 3"), ("POST-E009", f"commId {COMM} rank 1")]
    assert "actors" not in record


def test_two_ranks_in_one_process_are_named():
    scan = healthy_scan()
    for phase in ("START", "COMPLETE"):
        scan.inits[(COMM, 1)][phase] = [event(1, pid=100)]  # rank 0's process, another device
    found, _ = placed(scan)
    assert found == [("POST-E009", f"commId {COMM}")]
