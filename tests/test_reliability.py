"""Real and hostile inputs never crash a run, and wrong runs never look right (issue 15).

Covers: the hostile-input folders (every file kept or skipped with its reason, counts asserted),
refused arguments (one line, no traceback), empty splits, resume with changed settings, atomic
output files. Run: pytest tests/test_reliability.py
"""
import json
import os

import numpy as np
import pytest

import analyze
import data
import evaluate
import prepare
import train

HOSTILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile")

EXPECTED = {   # tests/hostile/README.md, file by file
    "python": (3, {"syntax error": 1, "empty": 2, "binary (NUL bytes)": 1, "not utf-8": 1,
                   "too deeply nested": 1, "unreadable (No such file or directory)": 1}),
    "web": (4, {"truncated warc (records before the cut kept)": 1, "warc without html responses": 1,
                "binary (NUL bytes)": 1, "empty or unparsable html": 1, "no visible text": 1,
                "deeper than 22 levels": 1, "wider than 318 siblings": 1}),
    "sheets": (4, {"empty workbook": 1, "unreadable workbook (KeyError)": 1, "malformed sheet (ParseError)": 1,
                   "not a zip (not .xlsx)": 1, "corrupt zip": 1, "OLE file: .xls or password-protected": 1}),
}


@pytest.mark.parametrize("corpus", sorted(EXPECTED))
def test_hostile_folder_every_file_kept_or_skipped_with_its_reason(corpus, tmp_path):
    d = prepare.main([corpus, "--src", os.path.join(HOSTILE, corpus), "--out", str(tmp_path), "--vocab", "300",
                      "--max_len", "64", "--workers", "1"])
    meta = json.load(open(os.path.join(d, "meta.json")))
    kept, skipped = EXPECTED[corpus]
    assert meta["skipped"] == skipped
    assert meta["documents"] == kept


def test_web_and_sheets_in_one_corpus(tmp_path):
    """prepare.py web_sheets reads both folders: each file kept or skipped as alone, every token
    tagged with its source (0 web, 1 workbook), web tokens with no reference target."""
    d = prepare.main(["web_sheets", "--src", os.path.join(HOSTILE, "web"), "--src", os.path.join(HOSTILE, "sheets"),
                      "--out", str(tmp_path), "--vocab", "300", "--max_len", "64", "--workers", "1"])
    meta = json.load(open(os.path.join(d, "meta.json")))
    assert meta["documents"] == EXPECTED["web"][0] + EXPECTED["sheets"][0]
    assert meta["skipped"] == {**EXPECTED["web"][1], **EXPECTED["sheets"][1]}
    a = data.load_split(d, "train")
    src = np.asarray(a["source"])
    assert set(src.tolist()) == {0, 1} and (a["ref_path"][src == 0] == -1).all()
    cell = (src == 1) & (a["path"][:, 0] >= 0)                  # workbook tokens with a node (not a tab or newline)
    assert cell.any() and (a["depth"][cell] >= 3).all()          # sit under sheet/row/column


def test_hostile_python_files_keep_their_text():
    import trees
    bom = open(os.path.join(HOSTILE, "python", "bom.py"), "rb").read()
    assert bom.startswith(b"\xef\xbb\xbf")
    assert trees.python_doc(bom).text == trees.python_doc(bom[3:]).text     # the BOM is dropped, nothing else
    latin = trees.python_doc(open(os.path.join(HOSTILE, "python", "latin1_cookie.py"), "rb").read())
    assert "'café'" in latin.text


def test_truncated_warc_keeps_the_records_before_the_cut():
    import trees
    cut = []
    got = list(trees.warc_records(os.path.join(HOSTILE, "web", "truncated.warc.gz"), cut))
    assert [uri for uri, _ in got] == ["http://a.example/"] and len(cut) == 1
    assert trees.web_doc(got[0][1]).text == "first record kept"


@pytest.mark.parametrize("flag,value", [("--max_len", "0"), ("--max_len", "-5"), ("--max_len", "1"),
                                        ("--vocab", "100"), ("--workers", "0")])
def test_prepare_refuses_impossible_arguments(flag, value, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        prepare.main(["python", "--src", os.path.join(HOSTILE, "python"), "--out", str(tmp_path), flag, value])
    assert e.value.code == 2
    assert f"{flag} must be at least" in capsys.readouterr().err


def tiny_args(data, out, *extra, config="seq_only", steps=2):
    return ["--corpus", "python", "--config", config, "--data", data, "--out", out, f"--steps={steps}",
            "--preset=cpu", "--n_layer=1", "--max_len=64", "--docs_per_step=2", "--val_docs=2", "--test_docs=2",
            "--milestones=1", "--mb_tokens=128", "--compile=0", "--bf16=0", *extra]


@pytest.mark.parametrize("extra,message", [
    (["--config", "seq_nope"], "unknown --config 'seq_nope'"),
    (["--preset", "huge"], "unknown --preset 'huge'"),
    (["--n_layer=six"], "--n_layer=six must be int"),
    (["--n_head=1.5"], "--n_head=1.5 must be int"),
    (["--rotary=seq_tree"], "--rotary cannot be overridden"),
    (["--vocab_size=100"], "--vocab_size cannot be overridden"),
    (["--dropout_p=0.1"], "unknown option --dropout_p"),
    (["--steps=0"], "--steps must be at least 1"),
    (["--depth_dropout=1.5"], "--depth_dropout and --min_lr must lie in [0, 1]"),
    (["--dropout=1.0"], "--dropout in [0, 1)"),
    (["--config", "seq_tree_depth", "--n_embd=100"], "planes"),   # 62 planes do not fit a 100-wide head
    (["--config", "two_corpus_shared"], "reads 'source'"),        # a web_sheets configuration on Python data
])
def test_train_refuses_bad_arguments_in_one_line(extra, message, tiny_python, tmp_path):
    args = tiny_args(tiny_python, str(tmp_path))
    if extra[0] == "--config":
        args[3] = extra[1]
        extra = extra[2:]
    with pytest.raises(SystemExit) as e:
        train.main(args + extra)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_empty_split_is_an_error_not_a_zero_score(tmp_path):
    """Three hostile Python files leave val and test empty: training must refuse, not report 0.0."""
    prepare.main(["python", "--src", os.path.join(HOSTILE, "python"), "--out", str(tmp_path / "data"),
                  "--vocab", "300", "--max_len", "64", "--workers", "1"])
    with pytest.raises(SystemExit, match="has no val records"):
        train.main(tiny_args(str(tmp_path / "data"), str(tmp_path / "out")))
    assert not os.path.exists(tmp_path / "out" / "python" / "seq_only" / "seed0" / "final.json")


def test_resume_refuses_changed_settings_unless_started_over(tiny_python, tmp_path):
    run = train.main(tiny_args(tiny_python, str(tmp_path)))
    for args, key in ((tiny_args(tiny_python, str(tmp_path), steps=3), "(steps)"),
                      (tiny_args(tiny_python, str(tmp_path), "--lr=0.002"), "(lr)"),
                      (tiny_args(tiny_python, str(tmp_path), "--n_layer=2"), "(model.n_layer)")):
        with pytest.raises(SystemExit) as e:
            train.main(args)
        assert key in str(e.value) and "--resume=0" in str(e.value)
    assert json.load(open(os.path.join(run, "config.json")))["run"]["steps"] == 2   # nothing rewritten
    train.main(tiny_args(tiny_python, str(tmp_path), "--resume=0", steps=3))
    assert json.load(open(os.path.join(run, "config.json")))["run"]["steps"] == 3
    assert json.load(open(os.path.join(run, "final.json")))["step"] == 3
    assert [e["step"] for e in map(json.loads, open(os.path.join(run, "log.jsonl")))] == [3]   # one schedule


def test_evaluate_without_a_checkpoint_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no checkpoint at"):
        evaluate.main([str(tmp_path / "out" / "python" / "seq_only" / "seed0")])


def test_analyze_names_a_damaged_log(tiny_python, tmp_path):
    run = train.main(tiny_args(tiny_python, str(tmp_path)))
    with open(os.path.join(run, "log.jsonl"), "a") as f:
        f.write('{"step": 4, "val_lo')                          # a writer killed mid-line
    with pytest.raises(SystemExit, match="log.jsonl line 2 is not JSON"):
        analyze.main([str(tmp_path)])


def test_replacing_keeps_the_old_file_when_a_write_fails(tmp_path):
    path = str(tmp_path / "final.json")
    data.write_json({"ok": 1}, path)
    with pytest.raises(TypeError):
        data.write_json({"bad": object()}, path)           # fails half-way through json.dump
    assert json.load(open(path)) == {"ok": 1}
    assert os.listdir(tmp_path) == ["final.json"]             # no temporary left behind
    import numpy as np
    with data.replacing(str(tmp_path / "a.npz")) as tmp:
        np.savez(tmp, x=np.arange(3))                         # np.savez keeps a name ending in .npz
    assert np.load(tmp_path / "a.npz")["x"].tolist() == [0, 1, 2]
