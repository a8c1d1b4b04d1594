"""The report's topology at scale, without a browser (test_report_browser.py renders it): node
cards from 5 to 64 nodes, a CPU-only head, ranks summarised per node, shared GPUs marked."""
import xml.etree.ElementTree as ET

from twgrpo.report import nodegrid

SVG = "{http://www.w3.org/2000/svg}"


def layout(nodes, gpus=8, cpu_head=True):
    workers, details, actors = [], [], []
    if cpu_head:
        workers.append({"ordinal": 0, "node_id": "h", "hostname": "head", "node_ip": "10.0.0.1",
                        "is_head": True, "gpu_node": False, "gpu_count": 0})
    for n in range(nodes):
        nid = f"n{n}"
        workers.append({"ordinal": len(workers), "node_id": nid, "hostname": f"gpu-{n}",
                        "node_ip": f"10.0.1.{n}", "is_head": False, "gpu_node": True,
                        "gpu_count": gpus})
        details.append({"node_id": nid, "gpu_query": {"gpus": [
            {"index": g, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{n}-{g}"} for g in range(gpus)]}})
        actors += [{"rank": n * gpus + g, "node_id": nid, "hostname": f"gpu-{n}", "nvml_dev": g,
                    "bus_id": f"{g}0", "nccl_transport": "IB"} for g in range(gpus)]
    return workers, details, actors


def cards(html):
    return ET.fromstring(f"<root>{html}</root>").findall(".//figure")


def test_64_nodes_of_8_gpus_get_one_card_each_with_their_ranks_as_a_span():
    workers, details, actors = layout(64)
    assert nodegrid.needs_grid(workers, [8])
    html = nodegrid.cards(workers, details, actors, "512 ranks · NCCL over InfiniBand")
    found = cards(html)
    assert len(found) == 65
    assert "CPU only" in "".join(found[0].itertext()) and "no GPU" in "".join(found[0].itertext())
    last = found[-1]
    assert "ranks 504–511" in "".join(last.itertext())
    assert len(last.findall(f".//{SVG}g")) == 8
    summary = nodegrid.ranks_summary(workers, actors)
    assert summary.count("<tr>") == 66 and "504–511" in summary


def test_small_runs_keep_the_single_picture():
    workers, _, _ = layout(2, gpus=2, cpu_head=False)
    assert not nodegrid.needs_grid(workers, [2, 2])


def test_a_gpu_two_nodes_report_or_two_ranks_share_is_marked_shared():
    workers, details, actors = layout(5, cpu_head=False)
    details[1]["gpu_query"]["gpus"][3]["uuid"] = "GPU-0-3"  # node 1's GPU 3 is node 0's GPU 3
    actors[16 + 5]["bus_id"] = actors[16 + 6]["bus_id"]  # two ranks of node 2 on one bus id
    html = nodegrid.cards(workers, details, actors, "")
    shared = [(card.get("data-hostname"), g.find(f"{SVG}text").text)
              for card in cards(html) for g in card.iter(f"{SVG}g") if "shared" in g.get("class")]
    assert shared == [("gpu-0", "GPU 3 ⇄"), ("gpu-1", "GPU 3 ⇄"), ("gpu-2", "GPU 5 ⇄"),
                      ("gpu-2", "GPU 6 ⇄")]


def test_hostile_names_are_escaped():
    workers, details, actors = layout(5)
    workers[1]["hostname"] = "<script>x</script>"
    html = nodegrid.cards(workers, details, actors, "")
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_2048_nodes_are_summarised_in_groups_with_the_outliers_drawn_first():
    workers, details, actors = layout(2048)
    odd = workers[1500]
    odd["gpu_count"] = 7  # one node lost a GPU: an outlier, drawn and named
    actors = [a for a in actors if a["rank"] != 1499 * 8 + 7]
    html = nodegrid.cards(workers, details, actors, "16383 ranks · NCCL over InfiniBand")
    found = cards(html)
    assert len(found) == nodegrid.MAX_CARDS
    hosts = [f.get("data-hostname") for f in found]
    assert "gpu-1499" in hosts and "head" in hosts
    told = html[:html.index('<div class="node-grid')]
    assert f"Drawn: {nodegrid.MAX_CARDS} of 2049 nodes" in told
    assert "2047 node(s): 8 GPU(s)" in told and "Outliers" in told and "gpu-1499" in told
    summary = nodegrid.ranks_summary(workers, actors)
    assert summary.count("<tr>") == 2050 and "16376–16383" in summary


def test_a_run_of_64_nodes_draws_all_and_says_so():
    workers, details, actors = layout(64)
    html = nodegrid.cards(workers, details, actors, "512 ranks")
    assert "Drawn: all 65 nodes." in html
