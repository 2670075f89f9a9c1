"""prepare.py at any size in bounded memory: documents built, encoded and written a chunk at a time
across worker processes give the same arrays, byte for byte, as the single pass before them
(md5s of planted corpora taken with prepare.py at commit 1d6c8b7); the rank percentiles from counts
are numpy's; the split writer's late fields and widened dtypes; --max_programs and the settings that
refuse capped data. Run: python -m pytest -q tests/test_prepare_chunks.py"""
import collections
import glob
import hashlib
import json
import os

import numpy as np
import pytest

import prepare
from treerope import writer
from treerope.settings import preparation, refusal

HOSTILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile")
WORDS = ("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud "
         "market garden window letter number").split()


def plant_modules(folder, n=14):
    """n Python modules of top-level functions (3-9 statements) and a class, written by rule."""
    os.makedirs(folder, exist_ok=True)
    for m in range(n):
        lines = ["import os", "import sys", "from collections import Counter", ""]
        for f in range(3 + m % 4):
            w = WORDS[(m * 7 + f) % len(WORDS)]
            lines += [f"def {w}_{m}_{f}(items, limit={f + 2}):",
                      f'    """{w.title()} of the items, up to limit."""', "    seen = Counter()",
                      "    for i, x in enumerate(items):",
                      f"        if i > limit * {m + 1}:", "            break",
                      f"        seen[x] += len(os.path.join('{w}', str(x)))",
                      *[f"        total_{k} = seen[x] * {k} + {m}" for k in range(f % 3)],
                      "    return dict(seen)", ""]
        lines += [f"class Keeper{m}:", "    def __init__(self, size):", "        self.size = size",
                  "    def grow(self, by=1):", "        self.size += by",
                  "        return sys.maxsize - self.size", ""]
        with open(os.path.join(folder, f"mod_{m:02d}.py"), "w") as fh:
            fh.write("\n".join(lines))


def plant_pages(folder, n=10):
    """n HTML pages of six paragraphs (>= 128 tokens each); page 5 copies page 2 (a near duplicate)."""
    os.makedirs(folder, exist_ok=True)
    for p in range(n):
        q = 2 if p == 5 else p
        paras = [" ".join(f"{WORDS[(q * 3 + s + k) % len(WORDS)]}{(q * s + k) % 11}"
                          for k in range(14)).capitalize()
                 + ". " + " ".join(WORDS[(q + s + k) % len(WORDS)] for k in range(9)).capitalize() + "."
                 for s in range(6)]
        body = "".join(f"<p>{t}</p>\n" for t in paras)
        with open(os.path.join(folder, f"page_{p:02d}.html"), "w") as fh:
            fh.write(f"<html><body><main>{body}</main></body></html>")


# corpus: (its flags, chunk_tokens forcing >= 3 chunks); each covers a path of the writer: contiguous splits
# and record-rebased ranks (programs), p1_cap and the p statistics (code), fields some records lack and
# counted skips (web_sheets), the near-duplicate filter and the 128-token minimum (webtext); empty splits
RUNS = {
    "programs": (["--src", "{py}", "--split", "contiguous", "--units", "record", "--max_len", "48"], 2000),
    "code": (["--src", "{py}", "--max_len", "48"], 2000),
    "web_sheets": (["--src", f"{HOSTILE}/web", "--src", f"{HOSTILE}/sheets", "--max_len", "64"], 40),
    "webtext": (["--src", "{web}", "--max_len", "64"], 800),
}
# md5 (first 12 hex digits) of every array, from the single-pass prepare.py at 1d6c8b7, --vocab 300
MD5 = {
    "programs": {
        "test_depth": "7ae29824c44d", "test_doc_start": "e8fa7c0d92b1", "test_grid": "ad8c3f6a7fb1",
        "test_kind": "196fb39cca8c", "test_label": "9e214e52f027", "test_path": "dcc638c9fc38",
        "test_pos": "64e7c2764c7c", "test_record_doc": "01ea9165a137", "test_ref_path": "60f0ee1474fa",
        "test_symbol": "aa7435563c16", "test_tokens": "0a98af932306", "test_within": "c69358a0a441",
        "train_depth": "2bdbc91dfe97", "train_doc_start": "ab95f1bd10d9", "train_grid": "710770db0140",
        "train_kind": "fd01d60af936", "train_label": "2a1c29130cb3", "train_path": "f7352df443a7",
        "train_pos": "2119644ce005", "train_record_doc": "62a9b6ab1c38", "train_ref_path": "2e5a0c6a5d15",
        "train_symbol": "08bb4eb3dcda", "train_tokens": "2f06c1a27f25", "train_within": "a789cc1cdd1b",
        "val_depth": "f9f11bcb345b", "val_doc_start": "fa1e41da127a", "val_grid": "4823bbecf584",
        "val_kind": "a92b366f231e", "val_label": "1dc447a6e9dc", "val_path": "afc1927f6705",
        "val_pos": "89d0a0717b16", "val_record_doc": "0f4cb55ab393", "val_ref_path": "ca42ac259b2e",
        "val_symbol": "492a4c0fcb9e", "val_tokens": "56543037793b", "val_within": "ed2fdce2a39c",
    },
    "code": {
        "test_doc_start": "cf634b3731aa", "test_pos": "fd54501d1006", "test_record_doc": "fd54501d1006",
        "test_tokens": "f276ba2210b5", "train_depth": "06e345ce430e", "train_doc_start": "cf522c0b4d02",
        "train_kind": "26f9c78fc225", "train_p": "09b727881da9", "train_path": "f679a0870a3d",
        "train_pos": "ea2c0cae69c9", "train_record_doc": "a878754325f2", "train_tokens": "7408bf0e9295",
        "train_within": "9e4a58f365ab", "val_depth": "fbaf06beee3a", "val_doc_start": "c09fe66df68e",
        "val_kind": "38204f06229a", "val_p": "9eeb661d6f04", "val_path": "3d7c6cb4bcd6",
        "val_pos": "e807bba9eb72", "val_record_doc": "0a37a7544187", "val_tokens": "1e8b6f646efd",
        "val_within": "4f4cdc506b32",
    },
    "web_sheets": {
        "test_doc_start": "cf634b3731aa", "test_pos": "fd54501d1006", "test_record_doc": "fd54501d1006",
        "test_tokens": "f276ba2210b5", "train_depth": "d4ddd1b6e812", "train_doc_start": "98e93451f6f7",
        "train_kind": "b6db7d495a30", "train_label": "b5634ba739eb", "train_path": "9b148dd7672b",
        "train_pos": "ed07787defa7", "train_record_doc": "548cd2fdb5f5", "train_ref_path": "6bccbb2d9f79",
        "train_source": "8767a9622b16", "train_tokens": "8f16700b1ca0", "train_within": "d14d59de50c5",
        "val_depth": "c53c7dc681c9", "val_doc_start": "9048d82de91b", "val_kind": "15e9adfe8528",
        "val_label": "5bfd6f45f8c1", "val_path": "a8fe0a555e09", "val_pos": "5efe72684d75",
        "val_record_doc": "8511c93b74be", "val_ref_path": "ff00cc6f088c", "val_source": "8ab4d6186218",
        "val_tokens": "f5da6d70431c", "val_within": "725547517ea1",
    },
    "webtext": {
        "test_depth": "630129a2d540", "test_doc_start": "838c62251cf3", "test_kind": "a78096233394",
        "test_p": "ba3e03aa7066", "test_path": "ffe3955195de", "test_pos": "ccb8197c0ba7",
        "test_record_doc": "7f35b8faf374", "test_tokens": "db3696adbe72", "test_within": "4135626c9879",
        "train_depth": "dd6bc6be1651", "train_doc_start": "55c0192715b2", "train_kind": "ac40653e776a",
        "train_p": "075a56582b50", "train_path": "8e1563422f2e", "train_pos": "b7a6ac695ee8",
        "train_record_doc": "28ab2f7e1880", "train_tokens": "0ec57a43a98b", "train_within": "43e272a41bd2",
        "val_doc_start": "cf634b3731aa", "val_pos": "fd54501d1006", "val_record_doc": "fd54501d1006",
        "val_tokens": "f276ba2210b5",
    },
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("planted")
    plant_modules(str(root / "py"))
    plant_pages(str(root / "web"))
    return {"py": str(root / "py"), "web": str(root / "web")}


def md5s(folder):
    return {os.path.basename(p)[:-4]: hashlib.md5(open(p, "rb").read()).hexdigest()[:12]
            for p in sorted(glob.glob(os.path.join(folder, "*.npy")))}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_chunks_across_workers_write_the_single_pass_arrays_byte_for_byte(name, planted, tmp_path):
    flags, chunk = RUNS[name]
    d = prepare.main([name, *[f.format(**planted) for f in flags], "--vocab", "300", "--out", str(tmp_path),
                      "--workers", "2", "--chunk_tokens", str(chunk)])
    run = json.load(open(os.path.join(d, "meta.json")))["run"]
    assert run["chunks"] >= 3 and run["workers"] == 2
    assert md5s(d) == MD5[name]
    assert not glob.glob(os.path.join(str(tmp_path), "*.tmp*"))          # no staging or scratch file left


def test_rank_percentiles_from_counts_are_numpys():
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 10, 101, 1000):
        a = rng.integers(0, 40, n)
        for q in (0, 1, 50, 95, 99, 100):
            assert prepare.percentile_of_counts(collections.Counter(a.tolist()), q) == np.percentile(a, q)
    assert prepare.rank_summary(collections.Counter()) == {"p99": 0.0, "max": 0}


def test_the_split_writer_fills_late_fields_and_widens_late_values(tmp_path):
    """A field first met in the third chunk is -1 on every earlier token; a path rank past int16 in
    the last chunk makes the whole array int32; token ids stay uint16. By hand: three records."""
    def rec(n, doc, **extra):
        return {"tokens": np.arange(n, dtype=np.int64), "pos": np.arange(n, dtype=np.int32), "doc": doc,
                "path": np.zeros((n, 22), np.int64), "node": np.zeros(n, np.int64), **extra}
    w = writer.SplitWriter(str(tmp_path), "train")
    w.add([rec(2, 0)])
    w.add([rec(3, 1)])
    w.add([rec(1, 2, source=np.array([1], np.int32))])
    big = rec(2, 3)
    big["path"][1, 0] = 40_000
    w.add([big])
    assert w.close() == (4, 8)
    a = {k: np.load(tmp_path / f"train_{k}.npy") for k in ("tokens", "pos", "doc_start", "record_doc", "path",
                                                           "source")}
    assert a["source"].tolist() == [-1] * 5 + [1, -1, -1] and a["source"].dtype == np.int32
    assert a["path"].dtype == np.int32 and a["path"][7, 0] == 40_000 and a["path"].shape == (8, 22)
    assert a["tokens"].dtype == np.uint16 and a["tokens"].tolist() == [0, 1, 0, 1, 2, 0, 0, 1]
    assert a["doc_start"].tolist() == [0, 2, 5, 6, 8] and a["record_doc"].tolist() == [0, 1, 2, 3]
    assert not glob.glob(str(tmp_path / "*.part")) and not os.path.exists(tmp_path / "train_node.npy")


def test_max_programs_samples_and_is_recorded(planted, tmp_path, capsys):
    d = prepare.main(["programs", "--src", planted["py"], "--vocab", "300", "--out", str(tmp_path / "a"),
                      "--workers", "1", "--max_programs", "10"])
    meta = json.load(open(os.path.join(d, "meta.json")))
    assert "a sample of 10 of the 75 programs" in capsys.readouterr().out
    assert meta["settings"]["max_programs"] == 10 and meta["documents"] + meta["skipped_total"] == 10
    d = prepare.main(["programs", "--src", planted["py"], "--vocab", "300", "--out", str(tmp_path / "b"),
                      "--workers", "1", "--max_programs", "0"])
    meta = json.load(open(os.path.join(d, "meta.json")))
    assert meta["settings"]["max_programs"] == 0 and meta["documents"] + meta["skipped_total"] == 75


def test_capped_programs_never_pass_for_the_python_setting():
    shape = {**preparation("python"), "corpus": "programs"}
    assert refusal("python", shape) is None
    capped = {**shape, "max_programs": 30000}
    assert "--max_programs 30000 where the setting has 0" in refusal("python", capped)
    older = {k: v for k, v in shape.items() if k != "max_programs"}      # prepared before the flag: capped
    assert "--max_programs 30000" in refusal("python", older)
    assert "--max_programs 0 where the setting has 30000" in refusal(
        "cpu_programs", {**preparation("cpu_programs"), "corpus": "programs", "max_programs": 0})
