"""The command line names a run once (cli/runargs.py): --output-dir FOLDER, or --storage-root
with --run-id through RunFolder.at, the one RUN_ID rule; each refusal says what to do and
leaves the folders as they were."""
import pytest

from twgrpo.cli import main
from twgrpo.run.runfolder import RunFolder, runs_dir


def listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("phase", ["postflight", "report"])
def test_a_run_id_that_names_another_run_than_the_output_dir_is_refused(tmp_path, capsys, phase):
    folder = RunFolder.at(tmp_path, "exp-1").path
    folder.mkdir(parents=True)
    before = listing(tmp_path)
    assert main([phase, "--output-dir", str(folder), "--run-id", "exp-2"]) == 2
    err = capsys.readouterr().err
    assert "--run-id exp-2 and --output-dir" in err and "name two runs" in err
    assert listing(tmp_path) == before


def test_a_run_id_that_names_the_output_dir_is_the_same_run(tmp_path, capsys):
    folder = RunFolder.at(tmp_path, "exp-1").path
    folder.mkdir(parents=True)
    assert main(["report", "--output-dir", str(folder), "--run-id", "exp-1",
                 "--html", str(tmp_path / "page.html")]) == 0
    assert capsys.readouterr().out.startswith("run exp-1:")


@pytest.mark.parametrize("bad,said", [("../elsewhere", "must be letters, digits"),
                                      ("r" * 300, "RUN_ID is 300 characters long")])
def test_a_run_id_that_is_no_run_id_is_refused_by_the_one_rule(tmp_path, capsys, bad, said):
    for phase in ("postflight", "report"):
        assert main([phase, "--storage-root", str(tmp_path), "--run-id", bad]) == 2
        assert said in capsys.readouterr().err
        assert main([phase, "--output-dir", str(tmp_path / "x"), "--run-id", bad]) == 2
        assert said in capsys.readouterr().err
    assert not runs_dir(tmp_path).exists() and listing(tmp_path) == []
