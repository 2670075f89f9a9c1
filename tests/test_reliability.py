"""Real and hostile inputs never crash a run, and wrong runs never look right.

Covers: the hostile-input folders (every file kept or skipped with its reason, counts asserted),
inputs too large for the size policy (built here, a prepare run on them bounded in time and
memory), refused arguments (one line, no traceback), empty splits, resume with changed
settings, atomic output files. Run: pytest tests/test_reliability.py
"""
import collections
import contextlib
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import zipfile

import numpy as np
import pytest
import torch
from conftest import one_line
from openpyxl.utils import get_column_letter

import analyze
import evaluate
import prepare
import sample
import study
import train
import trees
from treerope import batches, corpora, files, prepared, runs, statistics, tokenizer
from treerope.corpora import paragraphs, warc, web
from treerope.corpora import python as pycorpus

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
    a = prepared.load_split(d, "train")
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


WALKED = {"python": ".py", "programs": ".py", "code": ".py", "web": ".html", "webtext": ".html",
          "web_sheets": ".html", "sheets": ".xlsx", "prose": ".md", "chat": ".json", "json": ".json",
          "xml": ".xml", "markdown": ".md"}


@contextlib.contextmanager
def tripwire(path):
    """A FIFO at `path`, and a list that gets an entry each time anything opens it for reading (that
    open unblocks ours for writing, closed at once: a reader sees an empty file, never a hang)."""
    os.mkfifo(path)
    opened, done = [], []
    def writer():
        while True:
            os.close(os.open(path, os.O_WRONLY))
            if done:
                return
            opened.append(path)
    threading.Thread(target=writer, daemon=True).start()
    try:
        yield opened
    finally:
        done.append(True)
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))   # lets the writer go


PROGRAM = "def f(x):\n    y = x + 1\n    return y\n"
PLANTED = {   # issue 71's row: what it plants in --src (and a readable file beside it), what each corpus says
    "H1 a FIFO": (b"x", "not a regular file (a FIFO: never opened)"),
    "T4 a name with a non-UTF-8 byte": (b"name_\xff", None),
    "T5 a dangling link": (b"broken", "unreadable (No such file or directory)"),
    "S1 a symlinked folder": (b"linked", corpora.LINKED)}


@pytest.mark.parametrize("row", sorted(PLANTED))
def test_what_a_src_walk_cannot_read_is_a_counted_skip_and_a_fifo_is_never_opened(row, tmp_path):
    """Issue 71: a FIFO under --src hung prepare.py (read to hash the settings, or in `sources`), a name
    with a non-UTF-8 byte crashed the settings hash, a dangling link crashed prose, and a symlinked folder
    went unread with no count. One walk rule for every corpus: each is read (its name hashed), or a
    counted skip with its reason, and nothing is opened before os.stat says it is a regular file."""
    name, reason = PLANTED[row]
    for corpus, ext in WALKED.items():
        src = tmp_path / corpus
        os.makedirs(src / "sub")
        for e in set(WALKED.values()):   # a readable file of each kind (web_sheets reads two)
            (src / "sub" / f"ok{e}").write_text(PROGRAM)
        planted = os.path.join(os.fsencode(src), name + ext.encode())
        with contextlib.ExitStack() as stack:
            opened = []
            if row.startswith("H1"):
                opened = stack.enter_context(tripwire(planted))
            elif row.startswith("T4"):
                with open(planted, "w") as f:
                    f.write(PROGRAM)
            elif row.startswith("T5"):
                os.symlink(tmp_path / "missing", planted)
            else:
                os.makedirs(tmp_path / "elsewhere", exist_ok=True)
                (tmp_path / "elsewhere" / f"a{ext}").write_text(PROGRAM)
                os.symlink(tmp_path / "elsewhere", src / "linked")
            args, _ = prepare.parse([corpus, "--src", str(src), "--out", str(tmp_path / "out"),
                                     "--workers", "1"])
            entry = prepare.corpus(corpus)
            items, dirs = entry.sources(args)
            prepare.data_settings(args, entry, items, dirs, None)      # every source's content hashed
            reasons = {n.removeprefix("0/"): why   # programs: named <index of its --src>/<file>
                       for n, _, why in map(prepare.builder(args, entry), items)}
            assert not opened, f"{corpus}: the FIFO was opened"
        key = os.fsdecode(name) + (ext if not row.startswith("S1") else "")
        assert any(n.startswith(key) for n in reasons), (corpus, reasons)
        if reason:
            assert reasons[key] == reason, (corpus, reasons)
        assert not any(n.startswith("linked/") for n in reasons)


def test_hostile_python_files_keep_their_text():
    bom = open(os.path.join(HOSTILE, "python", "bom.py"), "rb").read()
    assert bom.startswith(b"\xef\xbb\xbf")
    # the BOM is dropped, nothing else
    assert pycorpus.python_doc(bom).text == pycorpus.python_doc(bom[3:]).text
    latin = pycorpus.python_doc(open(os.path.join(HOSTILE, "python", "latin1_cookie.py"), "rb").read())
    assert "'café'" in latin.text


def test_truncated_warc_keeps_the_records_before_the_cut():
    cut = []
    got = list(warc.warc_records(os.path.join(HOSTILE, "web", "truncated.warc.gz"), cut))
    assert [uri for uri, _ in got] == ["http://a.example/"] and len(cut) == 1
    assert web.web_doc(got[0][1]).text == "first record kept"


@pytest.mark.parametrize("flag,value", [("--max_len", "0"), ("--max_len", "-5"), ("--max_len", "1"),
                                        ("--vocab", "100"), ("--workers", "0")])
def test_prepare_refuses_impossible_arguments(flag, value, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        prepare.main(["python", "--src", os.path.join(HOSTILE, "python"), "--out", str(tmp_path),
                      flag, value])
    assert e.value.code == 2
    said = capsys.readouterr().err
    assert f"{flag} must be at least" in said and said.strip().count("\n") == 0   # one line, no usage block


def tiny_args(data, out, *extra, config="seq_only", steps=2):
    return ["--corpus", "python", "--config", config, "--data", data, "--out", out, f"--steps={steps}",
            "--n_layer=1", "--max_len=64", "--docs_per_step=2", "--val_docs=2",
            "--test_docs=2", "--milestones=1", "--mb_tokens=128", "--compile=0", "--bf16=0", *extra]


@pytest.mark.parametrize("extra,message", [
    (["--config", "seq_nope"], "unknown --config 'seq_nope'"),
    (["--preset", "huge"], "unrecognized arguments: --preset huge"),   # the model's size is its flags
    (["--n_layer=six"], "argument --n_layer: invalid int value: 'six'"),
    (["--n_head=1.5"], "argument --n_head: invalid int value: '1.5'"),
    (["--compile=ture"], "argument --compile: 'ture' is not 1 or 0"),   # a typo is not False
    (["--rotary=seq_tree"], "unrecognized arguments: --rotary=seq_tree"),   # --config gives it
    (["--configuration=seq_tree"], "unrecognized arguments: --configuration"),
    (["--vocab_size=100"], "unrecognized arguments: --vocab_size=100"),     # the prepared data gives it
    (["--dropout_p=0.1"], "unrecognized arguments: --dropout_p"),
    (["--steps=0"], "--steps must be at least 1"),
    (["--depth_dropout=1.5"], "--depth_dropout must be in [0, 1], not 1.5"),
    (["--dropout=1.0"], "--dropout must be in [0, 1), not 1.0"),
    (["--weight_decay=nan"], "--weight_decay must be at least 0 and finite, not nan"),
    (["--patience=-3"], "--patience must be at least 0"),
    (["--passes=0.5"], "give the length as --steps or as --passes, not both"),   # tiny_args gives --steps
    (["--name", "."], "--name '.' must be a plain folder name"),
    (["--config", "seq_tree_depth", "--n_embd=100"], "planes"),   # 62 planes do not fit a 100-wide head
    (["--config", "two_corpus_shared"], "reads 'source'"),        # a web_sheets configuration on Python data
])
def test_train_refuses_bad_arguments_in_one_line(extra, message, tiny_python, tmp_path, capsys):
    args = tiny_args(tiny_python, str(tmp_path))
    if extra[0] == "--config":
        args[3] = extra[1]
        extra = extra[2:]
    with pytest.raises(SystemExit) as e:
        train.main(args + extra)
    said = capsys.readouterr().err if e.value.code == 2 else str(e.value)   # 2: argparse's, on stderr
    assert message in said and said.strip().count("\n") == 0


@pytest.mark.parametrize("given,message", [
    (["--seed", str(2 ** 63)], f"--seed must be in [0, 4,294,967,296), not {2 ** 63}"),   # issue 71 T1
    (["--seed", str(2 ** 32)], f"--seed must be in [0, 4,294,967,296), not {2 ** 32}"),   # the first outside
    (["--passes", "1e308"], "--passes 1e+308 is inf steps of"),                          # issue 71 T2
    (["--steps", str(2 ** 32)], f"--steps must be below 4,294,967,296, not {2 ** 32}")])
def test_an_integer_torch_cannot_take_is_refused_in_one_line(given, message, tiny_python, json_run, tmp_path):
    """Issue 71 T1, T2: `train.py --seed 9223372036854775808` (and sample.py's) was torch.manual_seed's
    ValueError, `--passes 1e308` an OverflowError in `plan`. A seed and a run's steps are below 2**32
    (settings.SEED_LIMIT: the step's generator takes seed * 1_000_003 + step); the same for study.py."""
    args = [a for a in tiny_args(tiny_python, str(tmp_path)) if not a.startswith("--steps")]
    one_line(lambda: train.main([*args, *given]), message)
    if given[0] == "--seed":
        one_line(lambda: train.main(study.arguments(["python", "seq_only", given[1], *args[4:]])), message)
        run = os.path.join(json_run["out"], json_run["run"])
        one_line(lambda: sample.main([run, "--seed", given[1], "--num_samples=1"]), message)


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
    runs.save_checkpoint(ck, os.path.join(run, "ckpt.pt"))
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


def test_a_finished_run_run_again_is_left_as_it_is(tiny_python, tmp_path, capsys):
    """A finished run given again with values a resume may change (the micro-batch, the data's path)
    was resumed, its config.json rewritten and its test loss scored again; now it is left alone, as
    study.py leaves it, and one given another value or precision is refused, with or without ckpt.pt."""
    run = train.main(tiny_args(tiny_python, str(tmp_path)))
    kept = {f: open(os.path.join(run, f), "rb").read() for f in ("config.json", "final.json", "log.jsonl")}
    again = train.main(tiny_args(tiny_python + os.sep, str(tmp_path), "--mb_tokens=300"))
    assert again == run and f"done: {run} is finished" in capsys.readouterr().out
    for given, said in (("--bf16=1", "analyze.py would not pair it"),
                        ("--lr=0.002", "finished with other values")):
        with pytest.raises(SystemExit, match=said):
            train.main(tiny_args(tiny_python, str(tmp_path), given))
    bench = train.main(tiny_args(tiny_python, str(tmp_path / "bench"), "--checkpoint=0"))   # no ckpt.pt
    with pytest.raises(SystemExit, match=r"finished with other values \(lr: "):
        train.main(tiny_args(tiny_python, str(tmp_path / "bench"), "--checkpoint=0", "--lr=0.002"))
    assert {f: open(os.path.join(run, f), "rb").read() for f in kept} == kept
    assert os.path.exists(os.path.join(bench, "final.json"))


def test_a_damaged_final_or_log_is_named_at_the_first_command(tiny_python, tmp_path, capsys):
    """Issue 71 M3: train.py and study.py said "done: ... finished" over a damaged final.json (a loss
    "x", a list, test_loss missing), and a run whose log.jsonl was deleted resumed, wrote final.json
    without one, and was refused by the next identical command. Each is one line naming the file at
    the first command (runs.read_final, runs.read_log), before anything is written."""
    args = tiny_args(tiny_python, str(tmp_path))
    run = train.main(args)
    final = os.path.join(run, "final.json")
    good = json.load(open(final))
    for damaged, said in (({**good, "val_loss": "x"}, "val_loss is 'x', not float"),
                          ([good], "not an object"),
                          ({k: v for k, v in good.items() if k != "test_loss"}, "test_loss is missing")):
        with open(final, "w") as f:
            json.dump(damaged, f)
        one_line(lambda: train.main(args), final, said)
        one_line(lambda: train.main(study.arguments(["python", "seq_only", "0", *args[4:]])), final, said)
    os.remove(final)
    os.remove(os.path.join(run, "log.jsonl"))
    one_line(lambda: train.main(args), os.path.join(run, "log.jsonl"), "--resume=0")
    assert not os.path.exists(final)


def test_evaluate_without_a_checkpoint_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no checkpoint at"):
        evaluate.main([str(tmp_path / "out" / "python" / "seq_only" / "seed0")])


def test_a_run_that_kept_no_weights_says_so(tiny_python, tmp_path):
    """Issue 71 M1: after a --checkpoint=0 run, evaluate.py and sample.py said "no checkpoint ...; train
    it first (python train.py ...)", while that train.py command answers "done: ... is finished"."""
    run = train.main(tiny_args(tiny_python, str(tmp_path), "--checkpoint=0"))
    for script in (evaluate, sample):
        one_line(lambda: script.main([run]), run, "trained with --checkpoint=0 and kept no weights",
                 "--resume=0")


def test_analyze_names_a_damaged_log(tiny_python, tmp_path):
    run = train.main(tiny_args(tiny_python, str(tmp_path)))
    with open(os.path.join(run, "log.jsonl"), "a") as f:
        f.write('{"step": 4, "val_lo')                          # a writer killed mid-line
    with pytest.raises(SystemExit, match="log.jsonl line 2 is not JSON"):
        analyze.main([str(tmp_path)])


def test_replacing_keeps_the_old_file_when_a_write_fails(tmp_path):
    path = str(tmp_path / "final.json")
    files.write_json({"ok": 1}, path)
    with pytest.raises(TypeError):
        files.write_json({"bad": object()}, path)           # fails half-way through json.dump
    assert json.load(open(path)) == {"ok": 1}
    assert os.listdir(tmp_path) == ["final.json"]             # no temporary left behind
    import numpy as np
    with files.replacing(str(tmp_path / "a.npz")) as tmp:
        np.savez(tmp, x=np.arange(3))                         # np.savez keeps a name ending in .npz
    assert np.load(tmp_path / "a.npz")["x"].tolist() == [0, 1, 2]


# ------------------------------------------------- nothing lost, nothing mixed (issue 51) ----
JSON_RUN = ["--corpus", "json", "--config", "seq_depth", "--steps=2", "--n_layer=1",
            "--n_embd=64", "--n_head=1", "--max_len=64", "--docs_per_step=2", "--val_docs=2", "--test_docs=2",
            "--milestones=1", "--mb_tokens=256", "--compile=0", "--bf16=0"]


@pytest.fixture(scope="module")
def json_run(tmp_path_factory):
    """60 small JSON documents prepared (300-entry BPE, records of at most 64 tokens) and a 2-step
    seq_depth run on them: a corpus train.py, evaluate.py and sample.py all read."""
    root = tmp_path_factory.mktemp("json_run")
    src = root / "src"
    src.mkdir()
    for i in range(60):
        (src / f"d{i:03d}.json").write_text(json.dumps(
            {"name": f"item {i}", "tags": ["a", "b", str(i)],
             "nested": {"k": "text " * (i % 9 + 1), "n": i}}))
    prepare.main(["json", "--src", str(src), "--out", str(root / "data"), "--vocab", "300", "--max_len", "64",
                  "--workers", "1"])
    run = train.main(JSON_RUN + ["--data", str(root / "data"), "--out", str(root / "out")])
    return {"src": str(src), "data": str(root / "data"), "out": str(root / "out"),
            "run": os.path.relpath(run, str(root / "out"))}


def copied(json_run, tmp_path):
    """(data root, train.py arguments, run folder): a copy of the fixture's data and run to damage."""
    shutil.copytree(json_run["data"], tmp_path / "data")
    shutil.copytree(json_run["out"], tmp_path / "out")
    args = JSON_RUN + ["--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")]
    return str(tmp_path / "data"), args, str(tmp_path / "out" / json_run["run"])


def overwrite_inside_a_tensor(path):
    """64 bytes of 0xFF (NaN as float32) written over the middle of the largest weight's stored bytes."""
    ck = torch.load(path, weights_only=False)
    name, t = max(ck["model"].items(), key=lambda kv: kv[1].numel())
    raw = bytearray(open(path, "rb").read())
    at = raw.find(t.numpy().tobytes()[:256])
    assert at > 0 and t.numel() * 4 > 256, name
    raw[at + 128:at + 192] = b"\xff" * 64
    open(path, "wb").write(bytes(raw))


def truncate(path, keep=0.5):
    raw = open(path, "rb").read()
    open(path, "wb").write(raw[:int(len(raw) * keep)] if keep < 1 else raw[:-10])


@pytest.mark.parametrize("damage", ["inside a tensor", "truncated"])
def test_a_damaged_checkpoint_is_one_line_from_evaluate_resume_and_sample(damage, json_run, tmp_path):
    """Item 8: a ckpt.pt with bytes overwritten inside a tensor loaded and scored "nan nats/token"
    into eval_test.json; truncated, it was a traceback. Its checksum now refuses it in all three."""
    import sample
    data_root, args, run = copied(json_run, tmp_path)
    ck = os.path.join(run, "ckpt.pt")
    evaluate.main([run, "--data", data_root, "--max_docs", "2"])
    before = open(os.path.join(run, "eval_test.json")).read()
    (overwrite_inside_a_tensor if damage == "inside a tensor" else truncate)(ck)
    os.remove(os.path.join(run, "final.json"))   # a run train.py resumes (a finished one it leaves alone)
    for call in (lambda: evaluate.main([run, "--data", data_root, "--max_docs", "2"]),
                 lambda: train.main(args),
                 lambda: sample.main([run, "--data", data_root, "--num_samples", "1"])):
        msg = one_line(call, ck)
        assert ("checksum" in msg) == (damage == "inside a tensor")
    assert open(os.path.join(run, "eval_test.json")).read() == before      # no score written


def test_a_damaged_checkpoint_exits_1_with_one_line_on_stderr(json_run, tmp_path):
    data_root, _, run = copied(json_run, tmp_path)
    overwrite_inside_a_tensor(os.path.join(run, "ckpt.pt"))
    r = subprocess.run([sys.executable, "evaluate.py", run, "--data", data_root], capture_output=True,
                       text=True, cwd=os.path.dirname(os.path.dirname(HOSTILE)), timeout=300)
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0
    assert "does not match its checksum" in r.stderr


def test_checkpoint_checksum_covers_every_tensor_and_value():
    """The checksum changes when any one tensor byte or logged value changes, and not on a re-save."""
    state = {"model": {"w": torch.arange(6, dtype=torch.float32)},
             "opt": {"state": {0: {"step": torch.tensor(3.)}}}, "step": 2, "log": [{"val_loss": 1.5}]}
    base = runs.checksum(state)
    assert runs.checksum({**state, "checksum": "x"}) == base
    w = state["model"]["w"].clone()
    w.view(torch.uint8)[5] ^= 1                                         # one bit of one weight
    assert runs.checksum({**state, "model": {"w": w}}) != base
    assert runs.checksum({**state, "opt": {"state": {0: {"step": torch.tensor(4.)}}}}) != base
    assert runs.checksum({**state, "log": [{"val_loss": 1.25}]}) != base


DAMAGED = {   # file in data/json -> (damage, the scripts that read it)
    "test_tokens.npy": (truncate, ("train", "evaluate")),
    "meta.json": (truncate, ("train", "evaluate", "sample")),
    "tokenizer.json": (truncate, ("train", "evaluate", "sample")),
}


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_a_damaged_data_file_is_one_line_naming_it_from_each_script(name, json_run, tmp_path):
    import sample
    data_root, args, run = copied(json_run, tmp_path)
    path = os.path.join(data_root, "json", name)
    damage, readers = DAMAGED[name]
    damage(path, keep=1)
    calls = {"train": lambda: train.main(args),
             "evaluate": lambda: evaluate.main([run, "--data", data_root, "--max_docs", "2"]),
             "sample": lambda: sample.main([run, "--data", data_root, "--num_samples", "1"])}
    for script in readers:
        one_line(calls[script], path)
    os.remove(path)                                                    # missing: one line too
    for script in readers:
        one_line(calls[script], "json")


def test_out_of_range_token_ids_are_one_line(json_run, tmp_path):
    data_root, args, run = copied(json_run, tmp_path)
    path = os.path.join(data_root, "json", "test_tokens.npy")
    tokens = np.load(path)
    tokens[3] = 4000                                                   # the tokeniser has 300 entries
    np.save(path, tokens)
    one_line(lambda: train.main(args), "test_tokens.npy", "token id 4,000")
    one_line(lambda: evaluate.main([run, "--data", data_root]), "test_tokens.npy", "token id 4,000")


def test_unwritable_output_folders_are_one_line(json_run, tmp_path):
    """A file where the output folder belongs (root ignores permissions, not that)."""
    data_root, args, run = copied(json_run, tmp_path)
    (tmp_path / "blocked").write_text("a file")
    blocked = str(tmp_path / "blocked")
    one_line(lambda: train.main(args[:-1] + [blocked]), blocked)
    assert open(blocked).read() == "a file"
    one_line(lambda: analyze.main([str(tmp_path / "out"), "--figures", os.path.join(blocked, "f")]), blocked)
    shutil.copytree(run, str(tmp_path / "run"))
    os.remove(tmp_path / "run" / "final.json")
    with open(tmp_path / "run" / "final.json", "w") as f:      # analyze: a truncated final.json is one line
        f.write('{"step": 2, "val_lo')
    one_line(lambda: analyze.main([str(tmp_path / "run")]), "final.json")


@pytest.mark.parametrize("name", ["../../../escape", "a/b", ".."])
def test_a_name_is_a_plain_folder_name(name, json_run, tmp_path):
    """Item 2: --name ../../../escape --resume=0 wrote (and would have removed) a folder outside --out."""
    data_root, args, _ = copied(json_run, tmp_path)
    out = tmp_path / "deep" / "er" / "out"
    one_line(lambda: train.main(args[:-1] + [str(out), "--name", name, "--resume=0"]), "--name", "plain")
    assert not os.path.exists(tmp_path / "escape") and not os.path.exists(out)


def test_evaluate_refuses_data_prepared_again_with_another_max_len(json_run, tmp_path):
    """Item 6: the same documents and tokeniser, records cut at 32 tokens instead of 64: evaluate
    scored the other records and overwrote eval_test.json; it now names what differs, before scoring.
    A resume and sample.py refuse it too."""
    import sample
    data_root, args, run = copied(json_run, tmp_path)
    prepare.main(["json", "--src", json_run["src"], "--out", data_root, "--vocab", "300", "--max_len", "32",
                  "--workers", "1"])
    now = os.path.join(data_root, "json")                             # the same tokeniser: not what differs
    assert prepared.fingerprint(now) == json.load(open(os.path.join(run, "config.json")))["run"]["tokenizer"]
    one_line(lambda: evaluate.main([run, "--data", data_root]), "max_len: 64 there, 32 now")
    assert not os.path.exists(os.path.join(run, "eval_test.json"))
    one_line(lambda: train.main(args), "data max_len: 64 there, 32 now", "--resume=0")
    one_line(lambda: sample.main([run, "--data", data_root]), "max_len: 64 there, 32 now")


def test_evaluate_refuses_a_paragraph_mode_before_scoring(json_run, tmp_path):
    """Item 11: --boundary/--hubs/--probe on a corpus without paragraphs ran the whole evaluation and
    overwrote eval_test_tokens.npz, then refused."""
    data_root, _, run = copied(json_run, tmp_path)
    for mode in ("--boundary", "--hubs", "--probe", "--paragraphs", "--hub_contributions"):
        one_line(lambda: evaluate.main([run, "--data", data_root, mode]), mode, "paragraph coordinates")
    assert not [f for f in os.listdir(run) if f.startswith(("eval_", "attention_", "boundary_", "hub"))]


def test_the_context_note_counts_what_is_never_read():
    """Records of 10, 40 and 100 tokens against a context of 32: 2 of 3 longer (67%), and
    1 − (10 + 32 + 32) / 150 = 51% of the tokens never read."""
    note = batches.context_note(np.array([10, 40, 100]), 32, "scored test", "are scored", "json")
    assert "67% of the scored test records are longer than the context (32)" in note
    assert "only their first 32 tokens are scored, 51% of the split's tokens never" in note
    assert batches.context_note(np.array([10, 32]), 32, "training", "train", "json") is None


# analyze.py pairs only runs that trained alike (item 4) and evaluations of the same records (item 5)
def planted(root, config, seed, val, name=None, log_extra=None, evaluation=None, **run):
    """A finished run: config.json (lr 1.2e-3, fp32 eager, one data identity unless `run` says
    otherwise), log.jsonl (validation loss `val` at step 30) and final.json; optionally eval_test.json."""
    d = root / "web" / (name or config) / f"seed{seed}"
    os.makedirs(d)
    r = {"corpus": "web", "config": config, "name": name, "seed": seed, "steps": 30, "lr": 1.2e-3,
         "bf16": False, "compile": False, "data_identity": {"tokenizer": "t", "max_len": 256, "meta": "m1"},
         "depth_dropout": 0.0, **run}
    (d / "config.json").write_text(json.dumps({"run": r, "model": {"n_layer": 2, "n_embd": 128, "n_head": 2,
                                                                    "max_len": 256, "rotary": config}}))
    (d / "log.jsonl").write_text(json.dumps({"step": 30, "val_loss": val, "bf16": r["bf16"],
                                             "compile": r["compile"], **(log_extra or {})}) + "\n")
    (d / "final.json").write_text(json.dumps({"step": 30, "val_loss": val, "test_loss": val}))
    if evaluation:
        (d / "eval_test.json").write_text(json.dumps(evaluation))


@pytest.mark.parametrize("differ,shown", [
    ({"data_identity": {"tokenizer": "t", "max_len": 512, "meta": "m2"}}, "data_identity (m1 | m2)"),
    ({"lr": 2e-3}, "lr (0.0012 | 0.002)"),
    ({"bf16": True, "compile": True}, "precision ([[false, false]] | [[true, true]])"),
], ids=["data", "lr", "precision"])
def test_analyze_pairs_only_runs_trained_alike(differ, shown, tmp_path, capsys):
    """Item 4: seq_depth trained on other data, at another lr, or in bf16 + compile was paired with
    seq_only (Δ −0.1 here); it now goes to its own table, and one line says what differs."""
    for seed in (0, 1):
        planted(tmp_path, "seq_only", seed, 3.0)
        planted(tmp_path, "seq_depth", seed, 2.9, **differ)
        planted(tmp_path, "seq_tree", seed, 2.95)                       # trained alike: still paired
    runs = statistics.load_runs(str(tmp_path / "web"))
    assert len(runs) == 2 and shown in capsys.readouterr().out
    rows = statistics.compare(runs, "seq_only", "val")
    assert [(r["config"], r["n"], round(r["delta"], 6)) for r in rows] == [("seq_tree", 2, -0.05)]


def test_precision_changed_on_resume_is_part_of_what_a_run_trained_with(tmp_path, capsys):
    """A run resumed in bf16 after an fp32 start (its milestones record both) differs from an fp32 run."""
    for seed in (0, 1):
        planted(tmp_path, "seq_only", seed, 3.0)
        planted(tmp_path, "seq_depth", seed, 2.9, bf16=True, log_extra={"bf16": False} if seed else None)
    runs = statistics.load_runs(str(tmp_path / "web"))
    assert "[[false, false], [true, false]]" in capsys.readouterr().out
    assert statistics.compare(runs, "seq_only", "val") == [] and len(runs) == 3


def test_a_named_variant_and_a_configurations_exception_still_pair(tmp_path):
    """What a named variant's flags change (depth dropout 0.3, given with --name) and what the setting's
    per_config gives a configuration (web_large: lr 1.5e-4 for no_position) do not stop pairing with
    seq_only; the same lr on a configuration without that exception, or the same depth dropout on a
    run without a name, does."""
    for seed in (0, 1):
        planted(tmp_path, "seq_only", seed, 3.0, setting="web_large")
        planted(tmp_path, "seq_depth", seed, 2.9, name="seq_depth_dropout", depth_dropout=0.3,
                given=["config", "depth_dropout", "name", "seed"], setting="web_large")
        planted(tmp_path, "no_position", seed, 3.2, lr=1.5e-4, setting="web_large")
        planted(tmp_path, "seq_tree", seed, 2.95, lr=1.5e-4, setting="web_large")
        planted(tmp_path, "seq_tree_depth", seed, 2.85, depth_dropout=0.3, given=["depth_dropout"],
                setting="web_large")
    runs = statistics.load_runs(str(tmp_path / "web"))
    rows = statistics.compare(runs, "seq_only", "val")
    assert sorted((r["config"], round(r["delta"], 6)) for r in rows) == [("no_position", 0.2),
                                                                          ("seq_depth_dropout", -0.1)]
    # a run that may vary a value joins every group it agrees with outside it: both tables
    assert sorted(sorted(configs) for configs in runs.values()) == [
        ["no_position", "seq_depth_dropout", "seq_only"], ["no_position", "seq_tree"],
        ["seq_depth_dropout", "seq_tree_depth"]]


def test_analyze_compares_evaluations_only_over_the_same_records(tmp_path, capsys):
    """Item 5: per-kind and shuffled scores of evaluations over 32 records against 64 were paired.
    Seed 0: the same records, Δ −0.01 (shuffled +0.49); seed 1: other records, Δ +0.5: left out."""
    def ev(nll, ids):
        kinds = {"all": {"nll": nll, "tokens": 100}}
        return {"split": "test", "records": 32 if ids == "a" else 64, "record_ids": ids, "data": "m1",
                "kinds": kinds, "interventions": {"shuffle": {"all": {"nll": nll + 0.5, "tokens": 100}}}}
    for seed, ids in ((0, "a"), (1, "b")):
        planted(tmp_path, "seq_only", seed, 3.0, evaluation=ev(3.0, "a"))
        planted(tmp_path, "seq_depth", seed, 2.9, evaluation=ev(2.99 + 0.51 * seed, ids))
    runs = statistics.load_runs(str(tmp_path / "web"))
    (row,) = statistics.compare_kinds(runs, "seq_only")
    assert row["n"] == 1 and row["delta"] == pytest.approx(-0.01)
    assert "evaluated on other records at seed(s) 1" in capsys.readouterr().out
    (row,) = statistics.compare_intervened(runs, "seq_only")
    assert row["n"] == 1 and row["delta"] == pytest.approx(0.49)


def test_table2_holds_no_order_where_the_losses_tie():
    """Item 12: four losses agreeing to 1e-5 (all print 5.3958) printed "1/1 seeds" in order and
    "non-overlapping: yes"; closer than TIE (5e-5) they are tied. Steps of 0.001 are an order."""
    tied = np.array([[5.39581], [5.39582], [5.39583], [5.39584]])
    assert statistics.substitution_order(tied) == (0, 1)
    assert not any(c["disjoint"] for c in statistics.substitution_overlap(tied))
    apart = np.array([[5.395, 5.396], [5.397, 5.398], [5.399, 5.400], [5.401, 5.402]])
    assert statistics.substitution_order(apart) == (2, 2)
    assert all(c["disjoint"] for c in statistics.substitution_overlap(apart[:, :1]))


def test_sample_refuses_what_it_cannot_do_and_says_how_far_a_run_trained(json_run, tmp_path, capsys):
    """Misleading sample.py: a negative temperature, 0 tokens and 0 samples ("0/0 samples parse") were
    accepted; a prompt that cannot begin a document was continued ("</close>" on XML: a traceback);
    an interrupted run read "trained 2 steps" where its checkpoint holds 1."""
    import sample
    data_root, _, run = copied(json_run, tmp_path)
    for bad in (["--temperature", "-1"], ["--temperature", "nan"], ["--max_new_tokens", "0"],
                ["--num_samples", "0"], ["--top_k", "0"]):
        with pytest.raises(SystemExit) as e:
            sample.main([run, "--data", data_root, *bad])
        assert e.value.code == 2
    one_line(lambda: sample.main([run, "--data", data_root, "--prompt", "abc"]), "cannot begin a json")
    model, _, _ = sample.load(run, "cpu", data_root)
    enc = tokenizer.load(os.path.join(data_root, "json"))
    one_line(lambda: sample.sample(model, "xml", {}, enc, tokenizer.token_lengths(enc), "<a></a></c>", 2, 1.0,
                                   None, torch.Generator()), "cannot begin a xml document")
    ck = torch.load(os.path.join(run, "ckpt.pt"), weights_only=False)
    runs.save_checkpoint({**ck, "step": 1}, os.path.join(run, "ckpt.pt"))   # as if stopped at step 1 of 2
    os.remove(os.path.join(run, "final.json"))
    capsys.readouterr()
    sample.main([run, "--data", data_root, "--num_samples", "1", "--max_new_tokens", "2"])
    assert "trained 1 steps of 2 records, of the 2 planned (unfinished" in capsys.readouterr().out


def test_sample_serves_a_position_only_model_on_any_corpus(tiny_python, tmp_path, capsys):
    """seq_only reads no tree: sample.py refused it on Python ("its text does not determine its tree")."""
    import sample
    run = train.main(tiny_args(tiny_python, str(tmp_path), steps=1))
    one_line(lambda: sample.main([run]), "give --prompt")
    texts = sample.main([run, "--prompt", "def", "--num_samples", "2", "--max_new_tokens", "5"])
    assert len(texts) == 2 and all(t.startswith("def") for t in texts)
    assert "2 samples (python: not checked as documents" in capsys.readouterr().out
    seq_tree = train.main(tiny_args(tiny_python, str(tmp_path), config="seq_tree", steps=1))
    one_line(lambda: sample.main([seq_tree, "--prompt", "def"]), "cannot serve seq_tree on the python corpus")


def test_analyze_of_tree_and_hrope_corpora_keeps_both_baselines(tmp_path, capsys):
    """Misleading: a folder of web (seq_only) and code (flat) runs took seq_only as the one baseline and
    left out the Δ-vs-flat tables in silence. Each setting now takes its own default baseline."""
    for seed in (0, 1):
        for config, val in (("seq_only", 3.0), ("seq_depth", 2.9)):
            planted(tmp_path, config, seed, val)
        for config, val in (("flat", 4.0), ("hrope_axial", 3.8)):
            planted(tmp_path / "c", config, seed, val, corpus="code")
    os.rename(tmp_path / "c" / "web", tmp_path / "code")
    analyze.main([str(tmp_path)])
    out = capsys.readouterr().out
    assert "## against flat: code" in out and "## against seq_only: web" in out
    assert "| hrope_axial | -0.2000 |" in out and "| seq_depth | -0.1000 |" in out
    analyze.main([str(tmp_path / "code"), "--baseline", "seq_only"])
    assert "or pass --baseline with one of them" in capsys.readouterr().out


def test_json_out_of_range_numbers_and_duplicate_keys_are_counted_skips(tmp_path):
    """Item 9: {"a":1e400} became the text {"a":Infinity}, not JSON (NaN and Infinity literals were
    already refused); {"a":1,"a":2} silently became {"a":2}. Each is now a skip with its reason."""
    src = tmp_path / "src"
    src.mkdir()
    files = {"ok.json": b'{"a": [1, 2.5, {"b": "text"}], "c": 1e300}', "inf.json": b'{"a": 1e400}',
             "neg.json": b'[-1E999]', "dup.json": b'{"a": 1, "a": 2}',
             "deep_dup.json": b'[{"b": {"a": 1, "a": 1}}]'}
    for name, raw in files.items():
        (src / name).write_bytes(raw)
    d = prepare.main(["json", "--src", str(src), "--out", str(tmp_path / "out"), "--vocab", "260",
                      "--max_len", "64", "--workers", "1"])
    meta = json.load(open(os.path.join(d, "meta.json")))
    assert meta["skipped"] == {"invalid json (a number out of range)": 2, "invalid json (a duplicate key)": 2}
    assert meta["documents"] == 1


def test_programs_names_are_unique_and_unreadable_modules_are_counted(tmp_path):
    """Item 10: program names repeat where a module defines a name twice (rich/repr.py::auto), so
    meta.json counted more documents than the arrays hold; modules that cannot be read (Python 2,
    binary, not UTF-8, a broken link) vanished uncounted, and so did .pyi stubs (and .rst files for
    markdown) given in --src."""
    src = tmp_path / "src"
    shutil.copytree(os.path.join(HOSTILE, "python"), src, symlinks=True)
    body = "    x = 1\n    y = x + 1\n    return y\n"
    (src / "twice.py").write_text("def auto():\n" + body + "\n\ndef auto():\n" + body.replace("1", "2"))
    (src / "stub.pyi").write_text("def f() -> int: ...\n")
    d = prepare.main(["programs", "--src", str(src), "--out", str(tmp_path / "out"), "--vocab", "260",
                      "--max_len", "64", "--workers", "1"])
    meta = json.load(open(os.path.join(d, "meta.json")))
    for reason in ("syntax error", "binary (NUL bytes)", "not utf-8",
                   "unreadable (No such file or directory)", "a type stub (.pyi), not a module"):
        assert meta["skipped"].get(reason) == 1, meta["skipped"]
    held = sum(len(np.unique(np.load(os.path.join(d, f"{s}_record_doc.npy")))) for s in prepared.SPLITS)
    assert meta["documents"] == held == sum(meta["splits"][s]["documents"] for s in prepared.SPLITS)
    assert meta["documents"] >= 2                                    # both programs named auto
    md = tmp_path / "md"
    md.mkdir()
    (md / "a.md").write_text("# Title\n\nSome text here.\n")
    (md / "b.rst").write_text("Title\n=====\n")
    d = prepare.main(["markdown", "--src", str(md), "--out", str(tmp_path / "out"), "--vocab", "260",
                      "--max_len", "64", "--workers", "1"])
    skipped = json.load(open(os.path.join(d, "meta.json")))["skipped"]
    assert skipped == {"reStructuredText (.rst), not markdown": 1}


def test_a_full_disk_while_training_is_one_line(json_run, tmp_path):
    """`ulimit -f` (a full disk, as a process sees it): train.py's checkpoint write failed in a traceback."""
    data_root, args, _ = copied(json_run, tmp_path)
    r = subprocess.run(["bash", "-c", 'ulimit -f 40; exec "$@"', "_", sys.executable, "train.py", *args[:-1],
                        str(tmp_path / "fresh")], capture_output=True, text=True, timeout=300,
                       cwd=os.path.dirname(os.path.dirname(HOSTILE)))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "error: cannot write" in r.stderr and "ckpt.pt (the write failed" in r.stderr


def test_a_non_finite_score_is_an_error_and_nothing_is_written(json_run, tmp_path):
    """Weights that went non-finite (a checkpoint that passes its checksum): evaluate stops before it
    writes eval_test.json or the per-token file."""
    data_root, _, run = copied(json_run, tmp_path)
    ck = torch.load(os.path.join(run, "ckpt.pt"), weights_only=False)
    ck["model"]["wte.weight"].fill_(float("nan"))                  # in place: lm_head shares it
    runs.save_checkpoint(ck, os.path.join(run, "ckpt.pt"))
    one_line(lambda: evaluate.main([run, "--data", data_root]), "nats/token", "nothing was written")
    assert not [f for f in os.listdir(run) if f.startswith("eval_")]


def test_a_run_records_what_analyze_pairs_on(json_run):
    """config.json holds the data's identity (records cut at 64, the split counts meta.json gives) and
    every milestone bf16 and compile, so a resume under another precision stays on the record."""
    run = os.path.join(json_run["out"], json_run["run"])
    cfg = json.load(open(os.path.join(run, "config.json")))["run"]
    meta = json.load(open(os.path.join(json_run["data"], "json", "meta.json")))
    assert cfg["data_identity"]["max_len"] == 64 and cfg["data_identity"]["tokenizer"] == cfg["tokenizer"]
    assert cfg["data_identity"]["records"] == {s: meta["splits"][s]["records"] for s in prepared.SPLITS}
    (entry,) = [json.loads(line) for line in open(os.path.join(run, "log.jsonl"))]
    assert (entry["bf16"], entry["compile"]) == (False, False)


def test_evaluate_says_when_records_are_longer_than_the_context(json_run, tmp_path, capsys):
    """Item 11: evaluate scored only a record's first tokens where records are longer than the
    context, without the note train.py prints. A 16-token model on records of up to 64 tokens."""
    args = [a if a != "--max_len=64" else "--max_len=16" for a in JSON_RUN]
    run = train.main(args + ["--data", json_run["data"], "--out", str(tmp_path)])
    lengths = np.diff(np.load(os.path.join(json_run["data"], "json", "test_doc_start.npy")))
    capsys.readouterr()
    evaluate.main([run])
    share = f"{(lengths > 16).mean():.0%} of the scored test records are longer than the context (16)"
    assert (lengths > 16).any() and share in capsys.readouterr().out
