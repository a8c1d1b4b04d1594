"""The collective probe's judgement (checks/rounds/collective.py) from rank reports as collective_rank
returns them: a wrong sum, IB at TCP speed, NCCL's own lines picked from a long debug file, a
stale progress file of another run ignored. The probe itself runs for real over Gloo on the
multi-host test cluster (test_multihost_faults.py) and with NCCL on the GPU machine."""
import json

from test_preflight_checks import context
from twgrpo.checks.rounds import collective
from twgrpo.run.profile import with_overrides


def done(rank, world, **extra):
    return {"rank": rank, "ordinal": rank, "stage": "done", "small_sum": float(world),
            "gloo_sum": float(world), "big_ok": True, "bus_gbps": 20.0, **extra}


def test_ranks_that_summed_right_pass_and_the_slowest_bandwidth_is_recorded(tmp_path):
    ctx = context(tmp_path)
    found = collective.judge(ctx, {0: done(0, 2), 1: done(1, 2, bus_gbps=12.5)}, tmp_path, 30)
    assert found == [] and ctx.collective["bus_gbps"] == 12.5


def test_a_wrong_sum_is_named_on_its_rank(tmp_path):
    ctx = context(tmp_path)
    found = collective.judge(ctx, {0: done(0, 2), 1: done(1, 2, small_sum=1.0)}, tmp_path, 30)
    assert [(f.id, f.obj) for f in found] == [("PRE-E072", "node 1 (worker node-1 10.0.0.11) rank 1")]


def test_an_ib_profile_at_tcp_speed_is_a_warning_and_a_socket_profile_is_not(tmp_path):
    ctx = context(tmp_path)
    slow = {0: done(0, 2, bus_gbps=0.9), 1: done(1, 2, bus_gbps=1.1)}
    assert collective.judge(ctx, slow, tmp_path, 30) == []
    ctx.profile = with_overrides(ctx.profile, NCCL_TRANSPORT="ib")
    [warning] = collective.judge(ctx, slow, tmp_path, 30)
    assert warning.id == "PRE-W016" and "0.9 GB/s" in warning.message


def test_a_late_rank_is_named_with_its_stage_and_ncclss_interface_lines(tmp_path):
    ctx = context(tmp_path)
    noise = "node-1:7:7 [0] NCCL INFO cudaDriverVersion 12080\n" * 20000  # ~1 MB before the tail
    (tmp_path / "nccl-1.log").write_text(
        noise + "node-1:7:7 [0] NCCL INFO NET/Socket : Using [0]eth1:10.232.0.11<0>\n"
        "node-1:7:9 [0] NCCL WARN socketProgress: Connection closed by remote peer 10.0.0.10\n")
    (tmp_path / "rank-1.json").write_text(json.dumps({"token": "exp-001 token", "stage": "initialised"}))
    late = collective._progress(tmp_path, 1, "exp-001 token")
    [found] = collective.judge(ctx, {0: done(0, 2), 1: {"rank": 1, "ordinal": 1, "late": True, **late}},
                               tmp_path, 30)
    assert found.id == "PRE-E071"
    assert found.message.startswith("had not finished the collective probe when it stopped waiting "
                                    "(30 s): its last stage was initialised; NCCL: node-1:7:9 [0] "
                                    "NCCL WARN socketProgress")
    assert "NET/Socket : Using [0]eth1:10.232.0.11<0>" in found.message and "cudaDriver" not in found.message


def test_a_progress_file_of_another_run_is_not_taken_for_this_ranks(tmp_path):
    (tmp_path / "rank-0.json").write_text(json.dumps({"token": "old run", "stage": "done"}))
    assert collective._progress(tmp_path, 0, "exp-001 token") == {}
    (tmp_path / "rank-0.json").write_text("not json")
    assert collective._progress(tmp_path, 0, "exp-001 token") == {}
