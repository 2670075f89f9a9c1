"""Spreadsheets (depth-perception appendix §4, §5): workbook -> sheet/row/column paths, formula
trees, references with their targets, token kinds, both renders, bad files."""
import io
import json
import os
import re
import tempfile
import zipfile

import numpy as np
import openpyxl
import pytest
from openpyxl.formula.tokenizer import Tokenizer
from openpyxl.workbook.defined_name import DefinedName

import prepare
import trees
from treerope import fields, prepared, writer
from treerope.corpora import sheets


def xlsx(wb):
    b = io.BytesIO()
    wb.save(b)
    return b.getvalue()


def two_sheets():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Hours"
    ws.append(["Name", "Mon", "Tue", "Total"])
    ws.append(["Ann", 8, 7, "=SUM(B2:C2)"])
    ws.append(["Bob", 8, 7, "=B3+C3*2"])
    s2 = wb.create_sheet("My Sheet")
    s2["A1"] = "Grand"
    s2["B1"] = "=SUM(Hours!D2:D3)+'My Sheet'!B3"     # a cross-sheet range and a forward reference
    s2["C1"] = "=Rate*2"
    s2["B3"] = 5                                       # row 2 is blank: not stored
    wb.defined_names["Rate"] = DefinedName("Rate", attr_text="Hours!$B$2")
    return xlsx(wb)


def node_of(doc, s, nth=0):
    at = [m.start() for m in re.finditer(re.escape(s), doc.text)][nth]
    return doc.char_node[at]


def write_split(out_dir, split, recs):
    """One split's records as {split}_{field}.npy, as prepare.py writes them (writer.SplitWriter)."""
    w = writer.SplitWriter(out_dir, split)
    w.add(recs)
    w.close()


def test_two_sheet_workbook_hand_worked():
    doc = sheets.sheet_doc(two_sheets())
    assert doc.text == ("Name\tMon\tTue\tTotal\nAnn\t8\t7\t=SUM(B2:C2)\nBob\t8\t7\t=B3+C3*2\n\n"
                        "Grand\t=SUM(Hours!D2:D3)+'My Sheet'!B3\t=Rate*2\n5\n")
    depth, path = doc.node_coords()
    def p(s, nth=0):
        n = node_of(doc, s, nth)
        return path[n][:depth[n]].tolist()
    assert p("Ann") == [0, 1, 0, 0]                     # sheet 0, row 1, column 0, the literal
    assert p("5") == [1, 2, 1, 0]                       # absolute row 2 although row 1 is empty
    # =B3+C3*2 in D3: operands and operators are siblings in reading order (no precedence tree,
    # which would make B3's depth depend on the later '+'); the '=' belongs to the cell
    assert [p(s) for s in ("B3", "+", "C3", "*", "2\n")] == [[0, 2, 3, r] for r in range(5)]
    assert p("=B3") == [0, 2, 3]
    # a function's name, brackets and separators belong to the call; what it encloses are its
    # children; the '+' after it is its sibling
    assert p("SUM(H") == [1, 0, 1, 0] and p("Hours!") == [1, 0, 1, 0, 0]
    assert p("+'") == [1, 0, 1, 1] and p("'My") == [1, 0, 1, 2]
    # references: target sheet/row/column from their own text; ranges name their first cell;
    # cross-sheet, quoted, forward and defined-name references
    def ref(s):
        return doc.ref_path[node_of(doc, s)]
    assert ref("B2:C2") == [0, 1, 1] and ref("Hours!D2:D3") == [0, 1, 3]
    assert ref("'My Sheet'!B3") == [1, 2, 1] and ref("Rate") == [0, 1, 1]
    assert node_of(doc, "2\n") not in doc.ref_path                 # a number is not a reference
    # kinds: the newline after each of the 5 stored rows ends it (not the blank line between
    # sheets); reference characters are cell references
    ends = np.flatnonzero(doc.char_kind & trees.KIND_ROW_END)
    assert [doc.text[i] for i in ends] == ["\n"] * 5 and doc.text[ends[2] + 1] == "\n"
    refs = "".join(doc.text[i] for i in np.flatnonzero(doc.char_kind & trees.KIND_CELL_REF))
    assert refs == "B2:C2B3C3Hours!D2:D3'My Sheet'!B3Rate"
    assert (doc.char_node[[i for i, ch in enumerate(doc.text) if ch in "\t\n"]] == -1).all()


def test_addressed_render():
    doc = sheets.sheet_doc(two_sheets(), "addressed")
    assert doc.text.startswith("A1:Name\tB1:Mon\tC1:Tue\tD1:Total\nA2:Ann")
    assert "D3:=B3+C3*2\n" in doc.text and "B3:5\n" in doc.text
    depth, path = doc.node_coords()
    n = node_of(doc, "D3:")
    assert path[n, :depth[n]].tolist() == [0, 2, 3]                # the address belongs to its cell


def wide_book(columns):
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["x"] * columns)
    ws.append(["x"] * columns)
    return xlsx(wb)


@pytest.mark.parametrize("columns,copied", [(300, True), (50, False)])
def test_copied_from_above_counts_only_across_256_tokens(columns, copied):
    doc = sheets.sheet_doc(wide_book(columns))
    ids = np.frombuffer(doc.text.encode(), np.uint8).astype(np.int64)     # one token per byte
    c = fields.token_coords(doc, ids, np.ones(256, np.int64))
    second_row = len(doc.text) // 2
    flagged = (c["kind"][second_row:] & trees.KIND_COPIED) > 0
    assert flagged.any() == copied
    assert not (c["kind"][:second_row] & trees.KIND_COPIED).any()         # the first row copies nothing


def test_no_lookahead_on_levels_references_and_kinds():
    """Cutting a workbook after k rows keeps every character's path, depth, reference target and
    kind (inside one formula: test_formula_prefix_keeps_coordinates)."""
    wb_bytes = []
    with tempfile.TemporaryDirectory() as d:              # a fresh set of synthetic workbooks
        sheets.synthetic_workbooks(d, 5, seed=3)
        for f in sorted(os.listdir(d)):
            wb_bytes.append(open(os.path.join(d, f), "rb").read())
    for raw in wb_bytes:
        full = sheets.sheet_doc(raw)
        wb = openpyxl.load_workbook(io.BytesIO(raw))
        first = wb.worksheets[0]
        k = max(2, first.max_row // 2)
        first.delete_rows(k + 1, first.max_row)
        for ws in wb.worksheets[1:]:
            wb.remove(ws)
        part = sheets.sheet_doc(xlsx(wb))
        n = len(part.text)
        assert full.text[:n] == part.text
        fd, fp = full.node_coords()
        pd, pp = part.node_coords()
        fn, pn = full.char_node[:n], part.char_node[:n]
        assert ((fn >= 0) == (pn >= 0)).all()
        has = pn >= 0
        assert (fp[fn[has]] == pp[pn[has]]).all() and (fd[fn[has]] == pd[pn[has]]).all()
        assert (full.char_kind[:n] == part.char_kind).all()
        for a, b in zip(fn[has], pn[has]):
            assert full.ref_path.get(a) == part.ref_path.get(b)


def doc_formulas(doc):
    """{(sheet, row, column): (text, per-character path below the cell)} of every parsed formula of
    a values-render Doc: its '=' is the only character a cell owns, and it runs to its last
    character below that cell (None: white space, no node)."""
    depth, path = doc.node_coords()
    node = doc.char_node
    out = {}
    for s in np.flatnonzero((node >= 0) & (depth[np.maximum(node, 0)] == 3)):
        cell, end = path[node[s], :3], s + 1
        for j in range(s + 1, len(doc.text)):
            if node[j] >= 0:
                if depth[node[j]] <= 3 or (path[node[j], :3] != cell).any():
                    break
                end = j + 1
        coords = [tuple(path[x, 3:depth[x]].tolist()) if x >= 0 else None for x in node[s + 1:end]]
        out[tuple(cell.tolist())] = (doc.text[s:end], coords)
    return out


def with_prefixes(formulas):
    """One workbook row per formula: the formula, then each of its prefixes from '=x' on, as
    written. Returns {formula: (its coordinates, {prefix: coordinates of those the reader parses})}."""
    wb = openpyxl.Workbook()
    for r, f in enumerate(formulas, 1):
        for k in range(len(f), 1, -1):
            wb.active.cell(r, len(f) - k + 1, f[:k])
    got = doc_formulas(sheets.sheet_doc(xlsx(wb)))
    out = {}
    for r, f in enumerate(formulas):
        assert got[(0, r, 0)][0] == f
        out[f] = (got[(0, r, 0)][1], {got[(0, r, c)][0]: got[(0, r, c)][1] for c in range(1, len(f) - 1)
                                      if (0, r, c) in got})
    return out


def test_formula_trees_by_hand():
    """Formulas a precedence tree would read wrongly: a later operator does not move an earlier
    token. Paths below the cell, per character after the '='."""
    got = with_prefixes(["=A1+B1", "=SUM(A1,B1)*2", "=-(1+2)%"])
    assert got["=A1+B1"][1]["=A1"] == [(0,)] * 2                    # depth 4 in the workbook, as alone
    assert got["=A1+B1"][0] == [(0,)] * 2 + [(1,)] + [(2,)] * 2     # A1 not under the later '+'
    assert got["=SUM(A1,B1)*2"][0] == [(0,)] * 4 + [(0, 0)] * 2 + [(0,)] + [(0, 1)] * 2 + [(0,), (1,), (2,)]
    assert got["=-(1+2)%"][0] == [(0,), (1,), (1, 0), (1, 1), (1, 2), (1,), (2,)]
    assert got["=SUM(A1,B1)*2"][1]["=SUM(A1,B1)"] == got["=SUM(A1,B1)*2"][0][:10]   # SUM( not under '*'


REAL_WORKBOOKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data",
                              "workbooks")


def test_formula_prefix_keeps_coordinates():
    """No look-ahead inside formulas (appendix §5), on every formula of the real workbooks in
    ../shared/data/workbooks (where present) and of 25 synthetic ones: each character prefix that
    is itself a formula, read in a cell of its own, gives the shared characters the path and depth
    they have in the whole formula. Brackets still nest (a token sits one level below its cell per
    bracket open around it), and every formula the former precedence parser read is still read."""
    books = []
    if os.path.isdir(REAL_WORKBOOKS):
        books += [("real", open(os.path.join(REAL_WORKBOOKS, f), "rb").read())
                  for f in sorted(os.listdir(REAL_WORKBOOKS))]
    with tempfile.TemporaryDirectory() as d:
        sheets.synthetic_workbooks(d, 25, seed=0)
        books += [("synthetic", open(os.path.join(d, f), "rb").read()) for f in sorted(os.listdir(d))]
    parsed, formulas = {"real": 0, "synthetic": 0}, set()
    for source, raw in books:
        try:
            doc = sheets.sheet_doc(raw)
        except trees.Skip:
            continue
        assert not doc.notes.get("formulas kept as text (parser rejected)")
        got = [f for f, _ in doc_formulas(doc).values()]
        parsed[source] += len(got)
        formulas.update(got)
    # as many as the precedence parser this replaced read (commit 4e6e245): all of them, plus the
    # 8 array formulas that were written as the object's repr before they were read as formulas
    assert parsed["synthetic"] == 978 and parsed["real"] in (0, 3592 + 8)
    for f, (coords, prefixes) in with_prefixes(sorted(formulas)).items():
        for p, c in prefixes.items():
            assert c == coords[:len(c)], (f, p)
        level, at = 0, 0                             # brackets open before each token
        for t in Tokenizer(f).items:
            own = t.type == "SEP" or t.subtype == "CLOSE"     # its bracket's token, at its depth
            assert coords[at] is None or len(coords[at]) == level + (not own), f
            level += (t.subtype == "OPEN") - (t.subtype == "CLOSE")
            at += len(t.value)


def corrupt_zip():
    raw = bytearray(two_sheets())
    raw[200:400] = b"\0" * 200
    return bytes(raw)


def huge_dimension():
    """A sheet that declares a million rows and holds a few (tablib's bad_dimensions.xlsx)."""
    src = zipfile.ZipFile(io.BytesIO(two_sheets()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "xl/worksheets/sheet1.xml":
                data = re.sub(rb'<dimension ref="[^"]*"', b'<dimension ref="A1:D1048576"', data)
            z.writestr(item, data)
    return out.getvalue()


@pytest.mark.parametrize("raw,reason", [
    (b"hello, not a workbook", "not a zip (not .xlsx)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100, "OLE file: .xls or password-protected"),
    (b"PK\x03\x04garbage", "corrupt zip"),
    (corrupt_zip(), None),
    (xlsx(openpyxl.Workbook()), "empty workbook"),
])
def test_bad_workbooks_are_counted_skips(raw, reason):
    with pytest.raises(trees.Skip) as e:
        sheets.sheet_doc(raw)
    assert reason is None or e.value.reason == reason


def test_row_limit_counts_rows_read_not_the_declared_dimension():
    assert sheets.sheet_doc(huge_dimension()).text == sheets.sheet_doc(two_sheets()).text
    sheets.sheet_doc(two_sheets(), max_rows=3)                         # "Hours" holds 3 rows
    with pytest.raises(trees.Skip, match="sheet with more than 2 rows"):
        sheets.sheet_doc(two_sheets(), max_rows=2)


def test_rejected_formula_is_kept_as_text_and_counted():
    wb = openpyxl.Workbook()
    wb.active.append(["a", "=(1+2", "=SUM(A1", "=Nowhere!A1+1"])
    doc = sheets.sheet_doc(xlsx(wb))
    assert doc.text == "a\t=(1+2\t=SUM(A1\t=Nowhere!A1+1\n"
    assert doc.notes == {"formulas kept as text (parser rejected)": 2, "references to unknown targets": 1}


def test_prepare_sheets_synthetic(tmp_path, capsys):
    d = prepare.main(["sheets", "--workbooks", "10", "--out", str(tmp_path), "--vocab", "300",
                      "--max_len", "256", "--workers", "1"])
    assert "SYNTHETIC" in capsys.readouterr().out
    meta = json.load(open(os.path.join(d, "meta.json")))
    assert meta["synthetic"] and meta["documents"] == 10 and meta["references"] > 0
    a = prepared.load_split(d, "train")
    is_ref = (a["kind"] & trees.KIND_CELL_REF) > 0
    assert (a["ref_path"][is_ref, 0] >= 0).mean() > 0.9              # references carry their target
    assert (a["ref_path"][~is_ref, 0] < 0).all()
    assert (a["depth"][a["path"][:, 0] >= 0] >= 3).all()             # cell tokens sit under sheet/row/col
    # a reference merged into a token of its neighbour is lost
    refs = writer.reference_stats(d)
    assert 0 < refs["references"] <= meta["references"] and 0 < refs["other_level1"] < refs["references"]


def test_an_array_formula_is_written_as_its_formula():
    """openpyxl gives an array formula ({=SUM(A1:A2*2)} in Excel) as an object: its text is the
    formula and is parsed as one, not the object's repr (which held a memory address)."""
    import io

    import openpyxl
    from openpyxl.worksheet.formula import ArrayFormula
    wb = openpyxl.Workbook()
    wb.active["A1"], wb.active["A2"] = 1, 2
    wb.active["B1"] = ArrayFormula("B1:B1", "=SUM(A1:A2*2)")
    buf = io.BytesIO()
    wb.save(buf)
    d = sheets.sheet_doc(buf.getvalue())
    assert d.text == "1\t=SUM(A1:A2*2)\n2\n"
    depth = d.node_coords()[0]
    assert depth[d.char_node[d.text.index("SUM(")]] == 4 and depth[d.char_node[d.text.index("A1:A2")]] == 5


def test_reference_statistics_on_a_planted_workbook(tmp_path, capsys):
    """analyze.py --references (appendix §5: 17.25% of references name another sheet), one byte a
    token. Sheet A: A1 1, B1 =A1+2, C1 =C1 (a reference to its own cell), A2 =SUM(A1:B1); sheet B:
    A1 =A!A1*2, B1 =A1. Five references, one to another sheet (20%); their tokens A1 C1 A1:B1 A!A1
    A1 are 2 + 2 + 5 + 4 + 2 = 15 of the 37 characters; C1's rotation changes no level (its target
    is its own sheet, row and column), so 13 are affected. A reference sits at depth 4 (5 inside
    SUM) and its target at 3: whole-path overwrite shortens all five, by 1 + 1 + 2 + 1 + 1 = 6 levels."""
    import analyze
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "A"
    ws["A1"], ws["B1"], ws["C1"], ws["A2"] = 1, "=A1+2", "=C1", "=SUM(A1:B1)"
    s2 = wb.create_sheet("B")
    s2["A1"], s2["B1"] = "=A!A1*2", "=A1"
    doc = sheets.sheet_doc(xlsx(wb))
    assert doc.text == "1\t=A1+2\t=C1\n=SUM(A1:B1)\n\n=A!A1*2\t=A1\n"
    ids = np.frombuffer(doc.text.encode(), np.uint8).astype(np.int64)
    rec = {**fields.token_coords(doc, ids, np.ones(256, np.int64)), "tokens": ids, "doc": 0}
    write_split(str(tmp_path), "train", [rec])
    assert writer.reference_stats(str(tmp_path)) == {"tokens": 37, "reference_tokens": 15, "affected": 13,
                                                   "references": 5, "other_level1": 1, "shorter": 5,
                                                   "lost_shorter": 6, "lost": 6}
    analyze.main(["--references", str(tmp_path)])
    assert "| 37 | 40.54% | 35.14% | 5 | 20.00% | 100.00% | 1.20 / 1.20 |" in capsys.readouterr().out
    # two records cut between the two B1 tokens of A2's range: the reference counts once in each
    rec2 = [{k: v[s:e] for k, v in rec.items() if k != "doc"} | {"doc": 0} for s, e in ((0, 20), (20, 37))]
    write_split(str(tmp_path), "train", rec2)
    assert writer.reference_stats(str(tmp_path))["references"] == \
        writer.reference_stats(str(tmp_path), chunk=1)["references"] == 6
