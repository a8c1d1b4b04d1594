"""make verify-scripts compiles every bundle file it can: Python with py_compile, the launcher
and the bash parts it sources with bash -n, so a broken part is named on the prep box."""
from prep.bundle import compile_problems


def test_a_bash_part_that_does_not_parse_is_named(tmp_path):
    good, bad = tmp_path / "good.bash", tmp_path / "bad.bash"
    good.write_text("f() { echo ok; }\n")
    bad.write_text("f() { if true; then echo; }\n")
    problems = compile_problems([good, bad])
    assert len(problems) == 1 and problems[0].startswith(f"{bad}: bash -n fails")

