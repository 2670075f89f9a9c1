"""Every one-call GPU stage of reproduce_gpu.sh dry-runs on CPU (`--dry`: the same code at toy size):
it prepares, times the study's own first steps and states its seeds (study.py --budget), trains them,
evaluates, leaves exactly its three files under $OUT (log, table, runs tarball without checkpoints)
and prints the paired table last, so a stage cannot fail on the device for a reason the CPU could have
shown. Slow: a paper-size model trains a few steps on CPU.
Run: python -m pytest -q -m slow tests/test_reproduce_gpu.py"""
import os
import subprocess
import tarfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = os.path.isdir("/usr/share/doc/python3-doc/html")

STAGES = {   # stage arguments: (name of its files, corpus, the configurations it trains)
    ("python_table",): ("python_table", "programs", ["seq_only", "tree_only", "tree_within", "seq_tree",
                                                     "seq_depth"]),
    ("web_table",): ("web_table", "web", ["seq_only", "tree_only", "tree_within", "seq_tree", "seq_depth"]),
    ("sheets_table",): ("sheets_table", "sheets", ["seq_only", "seq_grid", "seq_tree", "seq_depth"]),
    ("hrope_table", "code"): ("hrope_table_code", "code", ["flat", "hrope_axial"]),
    ("hrope_table", "prose", "3"): ("hrope_table_prose", "prose", ["flat", "rand_axial", "period_axial"]),
}


def dry(args, tmp_path, **limits):
    """`bash scripts/reproduce_gpu.sh ARGS --dry` with its own $OUT and $WORK under tmp_path (and any
    limit planted): (the finished process, $OUT)."""
    out, work = tmp_path / f"out_{args[0]}", tmp_path / f"work_{args[0]}"
    env = {**os.environ, "OUT": str(out), "WORK": str(work), "OMP_NUM_THREADS": "1", **limits}
    return subprocess.run(["bash", "scripts/reproduce_gpu.sh", *args, "--dry"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900), out


@pytest.mark.slow
@pytest.mark.parametrize("args", list(STAGES), ids=["_".join(a) for a in STAGES])
def test_a_stage_dry_runs_to_its_table_and_three_files(args, tmp_path):
    name, corpus, configs = STAGES[args]
    if not PAGES and corpus in ("web", "prose"):
        pytest.skip("needs python3-doc's pages")
    run, out = dry(args, tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert sorted(os.listdir(out)) == [f"{name}.log", f"{name}_runs.tar.gz", f"{name}_table.md"]
    table = (out / f"{name}_table.md").read_text()
    assert run.stdout.rstrip().endswith(table.rstrip())                    # the table, printed last
    assert "steps of" in run.stdout and "training seed 0 of 1 at 1 steps" in run.stdout   # study.py --budget
    for config in configs[1:]:                                             # a paired row per configuration
        assert any(config in line and line.startswith("|") for line in table.splitlines()), table
    with tarfile.open(out / f"{name}_runs.tar.gz") as tar:
        names = tar.getnames()
    for config in configs:
        assert f"runs/{corpus}/{config}/seed0/final.json" in names
        assert f"runs/{corpus}/{config}/seed0/eval_test.json" in names
    assert not any(n.endswith(".pt") for n in names)
    if corpus == "sheets":
        assert "SYNTHETIC" in run.stdout


@pytest.mark.slow
def test_the_speed_stages_dry_run_to_their_files(tmp_path):
    """speed_check runs the kernel's and the study's tests and the rotation benchmark; study_bench
    prepares the Python setting, times 2 runs as one study alone, then 2 and 1 runs batched beside
    separate processes, its estimate printed before any step."""
    for stage, files, said in (("speed_check", ["rotation.txt", "speed_check.log"], "passed"),
                               ("study_bench", ["study_bench.log", "study_bench.txt",
                                                "study_bench_runs.tar.gz"], "M 1  path separate")):
        run, out = dry([stage], tmp_path)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert sorted(os.listdir(out)) == files and said in run.stdout, run.stdout[-3000:]
    rows = [line for line in (out / "study_bench.txt").read_text().splitlines() if line.startswith("M ")]
    assert [r.split("  ")[:2] for r in rows] == [["M 2", "path study"], ["M 2", "path study"],
                                                 ["M 2", "path separate"], ["M 1", "path study"],
                                                 ["M 1", "path separate"]]
    assert run.stdout.index("estimate: prepare ~45 s") < run.stdout.index("-- prepare")
    with tarfile.open(out / "study_bench_runs.tar.gz") as tar:   # every measurement's logs, no checkpoint
        names = tar.getnames()
    for kept in ("compiled/M2_study", "eager/M2_study", "eager/M2_separate", "eager/M1_separate"):
        assert f"bench/{kept}/programs/seq_only/seed0/log.jsonl" in names
    assert not any(n.endswith(".pt") for n in names)


@pytest.mark.slow
def test_a_benchmark_killed_at_its_limit_keeps_the_rows_it_finished(tmp_path):
    """study_bench --dry with the eager comparison's limit planted at 2 s: the compiled study's row,
    measured first, is in $OUT/study_bench.txt; the stage exits non-zero, naming the step it lost."""
    run, out = dry(["study_bench"], tmp_path, LIMIT_BENCH="2")
    assert run.returncode != 0
    rows = (out / "study_bench.txt").read_text()
    assert "M 2  path study  runs 2  tokens/s" in rows and "path separate" not in rows
    with tarfile.open(out / "study_bench_runs.tar.gz") as tar:   # the finished measurement's logs, kept
        names = tar.getnames()
    kept = "bench/compiled/M2_study/"
    assert kept + "programs/seq_depth/seed0/log.jsonl" in names and kept + "output.txt" in names
    assert not any(n.endswith(".pt") for n in names)
    last = (out / "study_bench.log").read_text().rstrip().splitlines()[-1]
    assert last.startswith("== study_bench FAILED at: 2. bench.py study") and "ran past its 2 s limit" in last


@pytest.mark.slow
def test_a_step_past_its_limit_ends_the_stage_named_with_its_rows_kept(tmp_path):
    """speed_check --dry with the rotation's limit planted at 2 s (its imports alone take longer): the
    tests' rows are already in $OUT's log, the stage exits non-zero, and its last line names the step."""
    run, out = dry(["speed_check"], tmp_path, LIMIT_ROTATION="2")
    assert run.returncode != 0
    log = (out / "speed_check.log").read_text()
    assert " passed" in log and "plan: tests <= " in log.splitlines()[1]
    assert log.rstrip().splitlines()[-1].startswith("== speed_check FAILED at: 2. a study's rotation")
    assert "ran past its 2 s limit" in log.rstrip().splitlines()[-1]


@pytest.mark.slow
def test_a_table_stage_past_its_scoring_limit_keeps_its_table_and_runs(tmp_path):
    """python_table --dry with evaluate.py's limit planted at 2 s: the paired table (final.json's
    losses) was written before scoring and the runs tarball on exit, so both are in $OUT; the stage exits
    non-zero, naming the scoring step."""
    run, out = dry(["python_table"], tmp_path, LIMIT_SCORE="2")
    assert run.returncode != 0
    assert sorted(os.listdir(out)) == ["python_table.log", "python_table_runs.tar.gz",
                                       "python_table_table.md"]
    table = (out / "python_table_table.md").read_text().splitlines()
    assert any("seq_depth" in line and line.startswith("|") for line in table)
    with tarfile.open(out / "python_table_runs.tar.gz") as tar:
        assert "runs/programs/seq_depth/seed0/final.json" in tar.getnames()
    last = (out / "python_table.log").read_text().rstrip().splitlines()[-1]
    assert last.startswith("== python_table FAILED at: evaluate.py on every run") and "2 s limit" in last
