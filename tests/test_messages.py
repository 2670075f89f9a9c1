"""What a new user typed gets one line back, naming it: no traceback, no advice that ignores it.
Run: python -m pytest -q tests/test_messages.py"""
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import one_line

import analyze
import prepare
import train
from tests.test_ownership import ROOT, pages, script


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("web")
    out = str(tmp / "data")
    assert script("prepare.py", "web", "--src", pages(tmp), "--out", out, "--vocab", "300",
                  "--workers", "1").returncode == 0
    return out


def test_heads_that_do_not_divide_the_width_are_one_line(web, tmp_path):
    with pytest.raises(SystemExit, match="n_embd 128 is not a multiple of n_head 3"):
        train.main(["--config", "seq_only", "--data", web, "--out", str(tmp_path), "--n_head=3", "--steps=1"])


def test_ctrl_c_is_one_line_that_says_how_to_resume(web, tmp_path):
    p = subprocess.Popen([sys.executable, "train.py", "--config", "seq_only", "--data", web, "--out",
                          str(tmp_path), "--steps=100000", "--compile=0", "--bf16=0"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))   # as a terminal
    started = tmp_path / "web" / "seq_only" / "seed0" / "config.json"   # written as training begins
    for _ in range(600):
        if started.exists() or p.poll() is not None:
            break
        time.sleep(0.2)
    time.sleep(1)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 1 and "Traceback" not in err and "resumes from the last milestone" in err


def test_an_unfinished_run_is_scored_only_when_asked_and_a_stale_score_is_left_out(web, tmp_path, capsys):
    import json
    import os

    import evaluate
    from treerope import statistics
    run = train.main(["--config", "seq_only", "--data", web, "--out", str(tmp_path), "--steps=2",
                      "--val_docs=2", "--test_docs=2", "--compile=0", "--bf16=0"])
    final = json.load(open(os.path.join(run, "final.json")))
    os.rename(os.path.join(run, "final.json"), os.path.join(run, "final.bak"))   # as if stopped mid-way
    with pytest.raises(SystemExit, match="has not finished training .* step 2.* --unfinished"):
        evaluate.main([run, "--max_docs", "2"])
    result = evaluate.main([run, "--max_docs", "2", "--unfinished"])
    assert result["checkpoint_step"] == 2 and result["unfinished"]
    json.dump({**final, "step": 4}, open(os.path.join(run, "final.json"), "w"))   # resumed, finished later
    capsys.readouterr()
    runs = statistics.load_runs(os.path.dirname(os.path.dirname(run)))
    assert "left out" in capsys.readouterr().out
    assert all("eval" not in r for configs in runs.values() for seeds in configs.values()
               for r in seeds.values())


def test_python_wider_than_the_web_limit_is_kept_and_said(tmp_path, capsys):
    """Web pages past 318 siblings are skipped; Python keeps them (the paper drops nothing), and says so."""
    import json
    import os
    import shutil

    import prepare
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "table.py").write_text("X = [" + ", ".join(map(str, range(400))) + "]\n")
    # 500 top-level statements: ranks among the module's children, which sibling_rank_max leaves out
    (tmp_path / "src" / "flat.py").write_text("".join(f"x{i} = {i}\n" for i in range(500)))
    for p in sorted(glob_stdlib("json")):
        shutil.copy(p, tmp_path / "src")
    out = prepare.main(["python", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "data"),
                        "--vocab", "300", "--workers", "1"])
    assert "the widest table.py, rank 399" in capsys.readouterr().out
    meta = json.load(open(os.path.join(out, "meta.json")))
    assert meta["wider_than_web_limit"] == {"documents": 1, "widest": {"file": "table.py", "rank": 399}}
    assert meta["sibling_rank_max"] == 399           # the note and the statistic count the same ranks


def glob_stdlib(package):
    import glob
    import os
    return glob.glob(os.path.join(os.path.dirname(os.__file__), package, "*.py"))


def test_analyze_after_the_quickstart_says_what_to_train(web, tmp_path, capsys):
    """One configuration under out/web: not silence, but what would pair it."""
    import analyze
    train.main(["--config", "seq_depth", "--data", web, "--out", str(tmp_path), "--steps=1",
                "--val_docs=2", "--test_docs=2", "--compile=0", "--bf16=0"])
    capsys.readouterr()
    analyze.main([str(tmp_path / "web")])
    out = capsys.readouterr().out
    assert "no paired table" in out and "train seq_only at the same seeds" in out


def test_not_prepared_names_the_data_typed(tmp_path):
    with pytest.raises(SystemExit, match=f"prepare.py json --out {tmp_path}"):
        train.main(["--corpus", "json", "--config", "seq_only", "--data", str(tmp_path)])


def test_prepare_says_what_the_splits_hold_and_a_short_bpe(tmp_path, capsys):
    """--long drop loses long pages: the tokens line is what the records hold, beside the documents';
    a BPE that cannot reach --vocab says so, and meta.json keeps both numbers."""
    import json
    import os

    import prepare
    src = tmp_path / "src"
    src.mkdir()
    for i in range(40):
        words = " ".join(f"w{i}x{j}" for j in range(400 if i % 4 == 0 else 20))
        (src / f"p{i}.html").write_text(f"<html><body><p>{words}</p></body></html>")
    out = prepare.main(["web", "--src", str(src), "--out", str(tmp_path / "data"), "--vocab", "100000",
                        "--long", "drop", "--workers", "1"])
    printed = capsys.readouterr().out
    meta = json.load(open(os.path.join(out, "meta.json")))
    held = sum(meta["splits"][s]["tokens"] for s in ("train", "val", "test"))
    assert held < meta["tokens"] and f"hold {held:,} of the documents' {meta['tokens']:,} tokens" in printed
    assert f"the BPE stopped at {meta['tokenizer']['vocab']:,} entries of the 100,000 asked" in printed
    assert meta["tokenizer"]["vocab_asked"] == 100000 and meta["tokenizer"]["vocab"] < 100000


def test_prepare_counts_the_documents_it_splits(tmp_path, capsys):
    """--long split (python's and sheets' settings, the CPU scale's) departs from appendix §4's "No document
    is split across steps": meta.json counts the documents cut into several records and prepare.py says
    so. 40 pages, every fourth (10) 40 blocks of 30 words, far past 256 tokens; the rest one block of 3
    words. Split: 10 cut; crop keeps one record of each: 0."""
    import json
    import os

    import prepare
    src = tmp_path / "src"
    src.mkdir()
    for i in range(40):
        blocks = 40 if i % 4 == 0 else 1
        body = "".join("<p>" + " ".join(f"w{j}" for j in range(30 if blocks > 1 else 3)) + "</p>"
                       for _ in range(blocks))
        (src / f"p{i}.html").write_text(f"<html><body>{body}</body></html>")
    for long, cut in (("split", 10), ("crop", 0)):
        out = prepare.main(["web", "--src", str(src), "--out", str(tmp_path / long), "--long", long,
                            "--vocab", "300", "--workers", "1"])
        assert json.load(open(os.path.join(out, "meta.json")))["documents_split"] == cut
        assert ("note: 10 of the 40 documents are longer than --max_len 256, each cut into records"
                in capsys.readouterr().out) == bool(cut)


def test_scripts_refuse_what_they_cannot_run():
    for cmd, said in ((["bash", "scripts/reproduce_cpu.sh", "tne"], "unknown stage 'tne'"),
                      (["bash", "scripts/sweep.sh"], "usage: bash scripts/sweep.sh CORPUS")):
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert out.returncode == 2 and said in out.stderr and out.stderr.count("\n") == 1


def test_a_second_sweep_leaves_a_run_in_training_alone(tmp_path):
    # another sweep's train.py holds seed0's lock: this sweep must not truncate its train.log
    run = tmp_path / "web" / "seq_only" / "seed0"
    run.mkdir(parents=True)
    (run / "train.log").write_text("step 41 of the other sweep\n")
    (tmp_path / "web" / "seq_only" / "seed0.lock").write_text(str(os.getpid()))
    out = subprocess.run(["bash", "scripts/sweep.sh", "web", "seq_only", "0"], capture_output=True, text=True,
                         cwd=ROOT, timeout=60, env={**os.environ, "OUT": str(tmp_path)})
    assert out.returncode == 0 and f"skipped: {run} (being trained by process {os.getpid()})" in out.stdout
    assert (run / "train.log").read_text() == "step 41 of the other sweep\n"


def test_two_sweeps_at_once_train_a_run_once_and_out_is_the_callers(tmp_path):
    """Misleading: a second sweep started before the first's train.py took its lock exited 123
    "failed ... being written by process N", and its train.py truncated the first's train.log; run from
    another folder, sweep.sh put OUT (and --data) inside the repository. Here another sweep holds the
    run's flock: this one skips it, and a relative OUT lands in the folder it is run from."""
    import fcntl
    run = tmp_path / "rel" / "web" / "seq_only" / "seed0"
    run.mkdir(parents=True)
    (run / "train.log").write_text("step 41 of the other sweep\n")
    with open(run / ".sweep.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        out = subprocess.run(["bash", os.path.join(ROOT, "scripts", "sweep.sh"), "web", "seq_only", "0"],
                             capture_output=True, text=True, cwd=tmp_path, timeout=60,
                             env={**os.environ, "OUT": "rel"})
    assert out.returncode == 0
    assert "skipped: rel/web/seq_only/seed0 (another sweep is training it)" in out.stdout
    assert (run / "train.log").read_text() == "step 41 of the other sweep\n"
    assert not os.path.exists(os.path.join(ROOT, "rel"))


def test_an_unknown_corpus_is_named_not_sent_to_prepare(tmp_path):
    with pytest.raises(SystemExit) as e:
        train.main(["--corpus", "nope", "--data", str(tmp_path)])
    assert "unknown --corpus 'nope'; known: python" in str(e.value) and "prepare.py nope" not in str(e.value)


def test_evaluate_refusals_name_what_was_typed(web, tmp_path, capsys):
    import evaluate
    run = train.main(["--config", "seq_only", "--data", web, "--out", str(tmp_path), "--steps=1",
                      "--val_docs=2", "--test_docs=2", "--compile=0", "--bf16=0"])
    with pytest.raises(SystemExit, match=f"{tmp_path}/missing/web is not prepared"):
        evaluate.main([run, "--data", str(tmp_path / "missing")])
    with pytest.raises(SystemExit):
        evaluate.main([run, "--max_docs", "0"])
    assert "--max_docs must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--demo is paper 004's Fig. 1: it needs paragraph coordinates"):
        evaluate.main([run, "--demo"])


def test_a_path_that_holds_nothing_is_named_as_given(tmp_path):
    """Issue 71 M5: `analyze.py /tmp/nonexistent` said "no runs under" it (not that no such folder exists),
    and `prepare.py chat --src EMPTYDIR` "no usable documents in [] (skipped: {})", naming no folder."""
    missing = str(tmp_path / "nonexistent")
    assert one_line(lambda: analyze.main([missing])) == f"error: no such folder: {missing}"
    os.makedirs(tmp_path / "empty")
    msg = one_line(lambda: prepare.main(["chat", "--src", str(tmp_path / "empty"), "--out", str(tmp_path),
                                         "--workers", "1"]))
    assert msg == f"error: no .json files under ['{tmp_path / 'empty'}']"
