"""Real and hostile inputs never crash a run, and wrong runs never look right.

Covers: the hostile-input folders (every file kept or skipped with its reason, counts asserted),
inputs too large for the size policy (built here, a prepare run on them bounded in time and
memory), refused arguments (one line, no traceback), empty splits, resume with changed
settings, atomic output files. Run: pytest tests/test_reliability.py
"""
import collections
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest
import torch
from openpyxl.utils import get_column_letter

import analyze
import data
import evaluate
import prepare
import train
import trees
from corpora import paragraphs, web
from corpora import python as pycorpus

HOSTILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile")

EXPECTED = {   # tests/hostile/README.md, file by file
    "python": (3, {"syntax error": 1, "empty": 2, "binary (NUL bytes)": 1, "not utf-8": 1,
                   "too deeply nested": 1, "unreadable (No such file or directory)": 1}),
    "web": (4, {"truncated warc (records before the cut kept)": 1, "warc without html responses": 1,
                "binary (NUL bytes)": 1, "empty or unparsable html": 1, "no visible text": 1,
                "deeper than 22 levels": 1, "wider than 318 siblings": 1}),
    "sheets": (4, {"empty workbook": 1, "unreadable workbook (KeyError)": 1,
                   "malformed sheet (ParseError)": 1, "not a zip (not .xlsx)": 1, "corrupt zip": 1,
                   "OLE file: .xls or password-protected": 1}),
}


@pytest.mark.parametrize("corpus", sorted(EXPECTED))
def test_hostile_folder_every_file_kept_or_skipped_with_its_reason(corpus, tmp_path):
    d = prepare.main([corpus, "--src", os.path.join(HOSTILE, corpus), "--out", str(tmp_path), "--vocab",
                      "300", "--max_len", "64", "--workers", "1"])
    meta = json.load(open(os.path.join(d, "meta.json")))
    kept, skipped = EXPECTED[corpus]
    assert meta["skipped"] == skipped
    assert meta["documents"] == kept


def test_web_and_sheets_in_one_corpus(tmp_path):
    """prepare.py web_sheets reads both folders: each file kept or skipped as alone, every token
    tagged with its source (0 web, 1 workbook), web tokens with no reference target."""
    d = prepare.main(["web_sheets", "--src", os.path.join(HOSTILE, "web"),
                      "--src", os.path.join(HOSTILE, "sheets"), "--out", str(tmp_path), "--vocab", "300",
                      "--max_len", "64", "--workers", "1"])
    meta = json.load(open(os.path.join(d, "meta.json")))
    assert meta["documents"] == EXPECTED["web"][0] + EXPECTED["sheets"][0]
    assert meta["skipped"] == {**EXPECTED["web"][1], **EXPECTED["sheets"][1]}
    a = data.load_split(d, "train")
    src = np.asarray(a["source"])
    assert set(src.tolist()) == {0, 1} and (a["ref_path"][src == 0] == -1).all()
    cell = (src == 1) & (a["path"][:, 0] >= 0)           # workbook tokens with a node (not a tab or newline)
    assert cell.any() and (a["depth"][cell] >= 3).all()  # sit under sheet/row/column


SHEET_NS = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


# Peak memory of prepare.py and its workers: VmHWM for the process itself (ru_maxrss would carry
# over the pytest process's across exec), ru_maxrss for the forked workers
PEAK = ("import re, resource, sys, prepare; prepare.main(sys.argv[1:]); "
        "hwm = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)); "
        "print(max(hwm, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))")


def workbook(path, sheet_data, shared=1):
    """A minimal .xlsx: one sheet of `sheet_data` (<row> elements) and one shared string of
    `shared` characters, written 1 MB at a time: 200 MB of it deflates to a 195 KB file."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml",
                   '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                   '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
                   'relationships+xml"/>'
                   '<Default Extension="xml" ContentType="application/xml"/>'
                   + "".join(f'<Override PartName="/xl/{part}.xml" ContentType="application/vnd.'
                             f'openxmlformats-officedocument.spreadsheetml.{kind}+xml"/>' for part, kind in
                             (("workbook", "sheet.main"), ("worksheets/sheet1", "worksheet"),
                              ("sharedStrings", "sharedStrings"))) + "</Types>")
        z.writestr("_rels/.rels",
                   '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
                   f'<Relationship Id="rId1" Type="{RELS}/officeDocument" Target="xl/workbook.xml"/>'
                   '</Relationships>')
        z.writestr("xl/workbook.xml", f'<workbook {SHEET_NS} xmlns:r="{RELS}"><sheets>'
                   '<sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>')
        z.writestr("xl/_rels/workbook.xml.rels",
                   '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
                   f'<Relationship Id="rId1" Type="{RELS}/worksheet" Target="worksheets/sheet1.xml"/>'
                   f'<Relationship Id="rId2" Type="{RELS}/sharedStrings" Target="sharedStrings.xml"/>'
                   '</Relationships>')
        z.writestr("xl/worksheets/sheet1.xml",
                   f"<worksheet {SHEET_NS}><sheetData>{sheet_data}</sheetData></worksheet>")
        with z.open("xl/sharedStrings.xml", "w", force_zip64=True) as f:
            f.write(f"<sst {SHEET_NS}><si><t>".encode())
            for at in range(0, shared, 1 << 20):
                f.write(b"a" * min(1 << 20, shared - at))
            f.write(b"</t></si></sst>")


def shared_cells(n):
    """Row 1 with n cells, each showing shared string 0."""
    return '<row r="1">' + "".join(f'<c r="{get_column_letter(i + 1)}1" t="s"><v>0</v></c>'
                                   for i in range(n)) + "</row>"


BUILT = {   # tests/hostile/README.md "Built by the test": file -> expected skip
    "sheets/bomb.xlsx": "too large: a zip part over 64,000,000 bytes uncompressed",
    "sheets/long_cell.xlsx": "too large: a cell over 32,767 characters (Excel's own cap)",
    "sheets/repeated.xlsx": "too large: a document over 4,000,000 characters",
    "sheets/wide.xlsx": "too large: a workbook over 2,097,152 rows and cells read (empty ones included)",
    "web/giant_text.html": "too large: a text node over 1,000,000 characters",
    "web/giant_page.html": "too large: a page over 16,000,000 bytes",
    "web/sparse.html": "too large: a file over 64,000,000 bytes",
    "web/bomb.warc.gz": "too large: a warc record over 64,000,000 bytes (records before it kept)",
    "web/deep.html": "deeper than 22 levels",
}


def test_too_large_inputs_are_counted_skips_in_seconds_and_bounded_memory(tmp_path):
    """Each file breaches one cap of the size policy and is skipped with that cap's reason, before
    the work it would cost: prepare finishes in seconds, its peak resident memory (its own and its
    workers') under 1 GB."""
    for d in ("web", "sheets"):
        os.makedirs(tmp_path / d)
    shutil.copy(os.path.join(HOSTILE, "web", "ok.html"), tmp_path / "web")
    shutil.copy(os.path.join(HOSTILE, "sheets", "tablib-3.10.0__tests__files__xlsx_cell_values.xlsx"),
                tmp_path / "sheets")
    workbook(tmp_path / "sheets" / "bomb.xlsx", shared_cells(1), 200_000_000)
    workbook(tmp_path / "sheets" / "long_cell.xlsx", shared_cells(1), 40_000)
    workbook(tmp_path / "sheets" / "repeated.xlsx", shared_cells(150), 30_000)          # 4.5 M characters
    workbook(tmp_path / "sheets" / "wide.xlsx",                                         # openpyxl fills in
             "".join(f'<row r="{r}"><c r="XFD{r}"><v>1</v></c></row>' for r in range(1, 201)))  # 16,383 a row
    (tmp_path / "web" / "giant_text.html").write_bytes(b"<p>" + b"word " * 2_200_000)  # past lxml's 10 MB cap
    (tmp_path / "web" / "giant_page.html").write_bytes(b"<p>" + b"x" * 20_000_000)     # a 20 MB page
    (tmp_path / "web" / "deep.html").write_bytes(b"<div>" * 100_000 + b"x")
    with open(tmp_path / "web" / "sparse.html", "wb") as f:
        f.truncate(64_000_001)                                    # sparse: its size is all that is read
    with gzip.open(tmp_path / "web" / "bomb.warc.gz", "wb", compresslevel=1) as f:
        f.write(bytes(64_000_001))                                # one gzip member past the cap
    code = PEAK
    t0 = time.time()
    run = subprocess.run([sys.executable, "-c", code, "web_sheets", "--src", str(tmp_path / "web"), "--src",
                          str(tmp_path / "sheets"), "--out", str(tmp_path / "out"), "--vocab", "300",
                          "--max_len", "64", "--workers", "1"],
                         cwd=os.path.dirname(os.path.dirname(HOSTILE)), capture_output=True, text=True)
    wall = time.time() - t0
    assert run.returncode == 0, run.stderr[-2000:]
    meta = json.load(open(tmp_path / "out" / "web_sheets" / "meta.json"))
    assert meta["skipped"] == collections.Counter(BUILT.values()) and meta["documents"] == 2
    peak_kb = int(run.stdout.split()[-1])                         # ru_maxrss is in KB on Linux
    assert peak_kb < 1_000_000 and wall < 60, (peak_kb, wall)


GIANT = {   # corpus -> (file -> expected skip; None: kept), each value past lxml's 10 MB or the caps
    "json": {"ok.json": None, "giant_value.json": "too large: a json string over 1,000,000 characters",
             "giant_doc.json": "too large: a document over 4,000,000 characters"},
    "xml": {"ok.xml": None, "giant_text.xml": "too large: a text node over 1,000,000 characters",
            "giant_attribute.xml": "too large: a text node over 1,000,000 characters",
            "giant_page.xml": "too large: a page over 16,000,000 bytes"},
}


@pytest.mark.parametrize("corpus", sorted(GIANT))
def test_giant_json_and_xml_values_are_skips_in_seconds_and_bounded_memory(corpus, tmp_path):
    src = tmp_path / "src"
    os.makedirs(src)
    files = {"ok.json": b'{"a": [1, 2, {"b": "text"}]}',
             "giant_value.json": b'{"a": "' + b"x" * 3_000_000 + b'"}',
             "giant_doc.json": b"[" + b'"xxxxxxxx",' * 500_000 + b"1]",
             "ok.xml": b'<a b="c"><d>text</d></a>', "giant_text.xml": b"<a>" + b"word " * 2_200_000 + b"</a>",
             "giant_attribute.xml": b'<a b="' + b"x" * 2_000_000 + b'"/>',
             "giant_page.xml": b"<a>" + b"<b/>" * 5_000_000 + b"</a>"}
    for name in GIANT[corpus]:
        (src / name).write_bytes(files[name])
    code = PEAK
    t0 = time.time()
    run = subprocess.run([sys.executable, "-c", code, corpus, "--src", str(src), "--out",
                          str(tmp_path / "out"), "--vocab", "260", "--max_len", "64", "--workers", "1"],
                         cwd=os.path.dirname(os.path.dirname(HOSTILE)), capture_output=True, text=True)
    wall = time.time() - t0
    assert run.returncode == 0, run.stderr[-2000:]
    meta = json.load(open(tmp_path / "out" / corpus / "meta.json"))
    assert meta["skipped"] == collections.Counter(r for r in GIANT[corpus].values() if r) and \
        meta["documents"] == 1
    peak_kb = int(run.stdout.split()[-1])
    assert peak_kb < 1_000_000 and wall < 60, (peak_kb, wall)


@pytest.mark.parametrize("builder,raw,reason", [
    (pycorpus.python_doc, b"x = 1\n" * 200_000, "too large: Python source over 1,000,000 bytes"),
    (paragraphs.code_doc, b"x = 1\n\n" * 600_000, "too large: a document over 4,000,000 characters"),
    (paragraphs.prose_doc, b"Some words here.\n\n" * 250_000,
     "too large: a document over 4,000,000 characters"),
], ids=["python", "code", "prose"])
def test_too_large_text_is_a_skip_before_the_per_character_work(builder, raw, reason):
    with pytest.raises(trees.Skip, match=reason):
        builder(raw)


def test_too_many_tokens_is_a_counted_skip(tmp_path, monkeypatch):
    """The token cap is checked after encoding; lowered to 20 here, it keeps one of the three
    usable hostile Python files (12, 24 and 26 tokens)."""
    monkeypatch.setattr(trees, "MAX_DOC_TOKENS", 20)
    d = prepare.main(["python", "--src", os.path.join(HOSTILE, "python"), "--out", str(tmp_path),
                      "--vocab", "300", "--max_len", "64", "--workers", "1"])
    meta = json.load(open(os.path.join(d, "meta.json")))
    assert meta["skipped"]["too large: a document over 20 tokens"] == 2
    assert meta["documents"] == 1 and meta["splits"]["train"]["documents"] == 1


def test_hostile_python_files_keep_their_text():
    bom = open(os.path.join(HOSTILE, "python", "bom.py"), "rb").read()
    assert bom.startswith(b"\xef\xbb\xbf")
    # the BOM is dropped, nothing else
    assert pycorpus.python_doc(bom).text == pycorpus.python_doc(bom[3:]).text
    latin = pycorpus.python_doc(open(os.path.join(HOSTILE, "python", "latin1_cookie.py"), "rb").read())
    assert "'café'" in latin.text


def test_truncated_warc_keeps_the_records_before_the_cut():
    cut = []
    got = list(web.warc_records(os.path.join(HOSTILE, "web", "truncated.warc.gz"), cut))
    assert [uri for uri, _ in got] == ["http://a.example/"] and len(cut) == 1
    assert web.web_doc(got[0][1]).text == "first record kept"


@pytest.mark.parametrize("flag,value", [("--max_len", "0"), ("--max_len", "-5"), ("--max_len", "1"),
                                        ("--vocab", "100"), ("--workers", "0")])
def test_prepare_refuses_impossible_arguments(flag, value, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        prepare.main(["python", "--src", os.path.join(HOSTILE, "python"), "--out", str(tmp_path),
                      flag, value])
    assert e.value.code == 2
    assert f"{flag} must be at least" in capsys.readouterr().err


def tiny_args(data, out, *extra, config="seq_only", steps=2):
    return ["--corpus", "python", "--config", config, "--data", data, "--out", out, f"--steps={steps}",
            "--preset=cpu", "--n_layer=1", "--max_len=64", "--docs_per_step=2", "--val_docs=2",
            "--test_docs=2", "--milestones=1", "--mb_tokens=128", "--compile=0", "--bf16=0", *extra]


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
    # a checkpoint from before a setting existed ran under that setting's default: --pack off
    ck = torch.load(os.path.join(run, "ckpt.pt"), weights_only=False)
    del ck["run"]["pack"]
    data.save_checkpoint(ck, os.path.join(run, "ckpt.pt"))
    with pytest.raises(SystemExit, match=r"\(pack: False there, True now\)"):
        train.main(tiny_args(tiny_python, str(tmp_path), "--pack=1"))
    for args, key in ((tiny_args(tiny_python, str(tmp_path), steps=3), "(steps: 2 there, 3 now)"),
                      (tiny_args(tiny_python, str(tmp_path), "--lr=0.002"), "(lr: "),
                      (tiny_args(tiny_python, str(tmp_path), "--n_layer=2"), "(model.n_layer: ")):
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
