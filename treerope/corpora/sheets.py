"""Workbooks as trees (the depth-perception appendix §4-§5): `sheet_doc`, raw .xlsx -> Doc or a
`Skip`, the formula trees inside cells, the SYNTHETIC workbook generator, and the two-corpus
web_sheets (web pages and workbooks in one corpus).

    python prepare.py sheets            # SYNTHETIC workbooks (no real corpus is reachable offline)
    python prepare.py sheets --src DIR  # .xlsx/.xlsm

The record rule: a record may start at a new row.
"""
import io
import os
import random
import re
import sys
import warnings
import zipfile

import numpy as np
import openpyxl
from openpyxl.workbook.defined_name import DefinedName

from treerope.corpora import Corpus, build, find_files, web
from trees import (
    KIND_CELL_REF,
    KIND_COPIED,
    KIND_ROW_END,
    MAX_CELL_CHARS,
    MAX_CELLS_READ,
    MAX_DOC_CHARS,
    MAX_PART_BYTES,
    MAX_ZIP_BYTES,
    Doc,
    Skip,
    check_size,
    first_appearance,
)

# ------------------------- spreadsheets: workbook -> sheet -> row -> cell -> literal or formula tree ----
MAX_SHEET_ROWS = 10_000         # a documented limit: bigger sheets are skipped, not truncated
SYNTHETIC_CREATOR = "treerope synthetic workbook generator"   # prepare.py's generator signs its files
_A1 = re.compile(r"\$?([A-Za-z]{1,3})?\$?([0-9]+)?")
_OPENS = ("FUNC", "PAREN", "ARRAY")


def formula_tree(items):
    """openpyxl's token list of one formula -> (nodes, owner), read once in order: nodes as
    (parent, rank, token index), parent -1 for the cell; owner[i] the node emitting token i, -1
    for white space. Raises ValueError for a malformed formula (an operator without its operand,
    an unclosed bracket, two operands side by side outside brackets).

    The tree is our reading. Appendix §4 calls it an expression tree, but §5 asks that "a token's
    node and path depend only on the document up to that token", and over infix text no
    precedence tree can do both: in =A1+B1 the operand A1 is a child of the '+' written after it.
    We keep §5: only brackets nest, since a bracket opens before its contents. A function call,
    parenthesis or array constant is a node (its opening token starts it; its separators and
    closing token belong to it) whose children are the operands and operators written inside it,
    as ordered siblings; outside every bracket they are children of the cell. =B3+C3*2 is five
    siblings; in =SUM(A1,B1)*2, A1 and B1 are children of SUM( and '*' is its next sibling.
    Precedence is left to the model, as in the text."""
    nodes, owner = [], [-1] * len(items)
    # open brackets, the cell outermost: [node, children so far, state]. 'operand': an operand must
    # come (start, after an operator); 'start': no operator (after ( or a separator); 'after': it ended
    open_ = [[-1, 0, "operand"]]
    for i, t in enumerate(items):
        if t.type == "WHITE-SPACE":
            continue
        node, state = open_[-1][0], open_[-1][2]
        inside = len(open_) > 1
        if t.type in ("OPERAND", "OPERATOR-PREFIX") or t.subtype == "OPEN" and t.type in _OPENS:
            ok = state != "after" or inside           # inside brackets, operands may stand side by side
        elif t.type in ("OPERATOR-INFIX", "OPERATOR-POSTFIX"):
            ok = state == "after"
        else:                                         # a separator or closing bracket: its bracket's own
            ok = (t.type == "SEP" or t.subtype == "CLOSE") and inside and state != "operand"
        if not ok:
            raise ValueError(f"unexpected {t.type} {t.value!r}")
        if t.type == "SEP" or t.subtype == "CLOSE":   # a bracket's own tokens
            owner[i] = node
            if t.type == "SEP":
                open_[-1][2] = "start"
            else:
                open_.pop()
                open_[-1][2] = "after"
            continue
        owner[i] = len(nodes)
        nodes.append((node, open_[-1][1], i))
        open_[-1][1] += 1
        open_[-1][2] = "operand" if t.type in ("OPERATOR-INFIX", "OPERATOR-PREFIX") else "after"
        if t.subtype == "OPEN":
            open_.append([owner[i], 0, "start"])
    if len(open_) > 1:
        raise ValueError("unclosed bracket")
    if open_[0][2] != "after":
        raise ValueError("formula ends early")
    return nodes, owner


def _cell_ref(text, sheets, names, depth=0):
    """Target [sheet, row, col] of a reference's text (-1 for a whole row's column or a whole
    column's row), or None. Ranges name their first cell; defined names are resolved."""
    sheet = None
    if "!" in text:
        prefix, text = text.rsplit("!", 1)
        prefix = prefix[1:-1].replace("''", "'") if prefix.startswith("'") else prefix
        sheet = sheets.get(prefix.lower())
        if sheet is None:
            return None
    if text.lower() in names and depth == 0:
        return _cell_ref(names[text.lower()], sheets, names, 1)
    parts = text.split(":")
    if len(parts) > 2:
        return None
    m = _A1.fullmatch(parts[0])
    if not m or not (m.group(1) or m.group(2)) or (len(parts) == 1 and not (m.group(1) and m.group(2))):
        return None
    from openpyxl.utils import column_index_from_string
    try:
        col = column_index_from_string(m.group(1).upper()) - 1 if m.group(1) else -1
    except ValueError:
        return None
    row = int(m.group(2)) - 1 if m.group(2) else -1
    return [sheet if sheet is not None else -2, row, col]      # -2: the sheet the formula is on


def check_zip(raw):
    """Skip a zip (.xlsx, .xlsm) whose central directory declares parts over the caps, before
    anything is decompressed. The declaration binds: zipfile yields no more than a part's stated
    size (a part that inflates further fails its CRC check)."""
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        sizes = [i.file_size for i in z.infolist()]
    check_size("a zip part", max(sizes, default=0), MAX_PART_BYTES, "bytes uncompressed")
    check_size("a zip", sum(sizes), MAX_ZIP_BYTES, "bytes uncompressed")


def sheet_doc(raw, render="values", max_rows=MAX_SHEET_ROWS):
    """An .xlsx/.xlsm workbook (bytes) -> Doc. Formulas are read as written (not cached values).

    The tree is workbook -> sheet -> row -> cell -> literal or formula tree (appendix §4). Path
    levels 1-3 are the sheet index, absolute row and absolute column (0-based), not sibling
    ranks, since empty rows and cells are not stored; deeper levels are sibling ranks inside the
    formula (formula_tree). Renders: 'values' writes each cell's content, 'addressed' writes
    'G4:=E4+F4'; tabs separate cells, newlines rows, a blank line sheets (separators: no node). A
    reference's target (sheet, row, column) comes from its own text, so it is known even when
    the named cell comes later."""
    import openpyxl
    if raw[:4] == b"\xd0\xcf\x11\xe0":
        raise Skip("OLE file: .xls or password-protected")
    if raw[:2] != b"PK":
        raise Skip("not a zip (not .xlsx)")
    try:
        check_zip(raw)
        with warnings.catch_warnings():           # openpyxl warns about styles, print areas, extensions
            warnings.simplefilter("ignore")
            wb = openpyxl.load_workbook(io.BytesIO(raw), read_only=True, data_only=False)
    except zipfile.BadZipFile:
        raise Skip("corrupt zip")
    except Skip:
        raise
    except Exception as e:          # openpyxl raises many types on malformed parts
        raise Skip(f"unreadable workbook ({type(e).__name__})")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _workbook_doc(wb, render, max_rows)
    except Skip:
        raise
    except Exception as e:          # a truncated or malformed sheet part, read lazily by iter_rows
        raise Skip(f"malformed sheet ({type(e).__name__})")
    finally:
        wb.close()


def _workbook_doc(wb, render, max_rows):
    """The Doc of an open workbook (sheet_doc turns its failures into skips)."""
    w = _WorkbookWriter(wb)
    for si, ws in enumerate(wb.worksheets):
        w.sheet(si, ws, render, max_rows)
    synthetic = (wb.properties.creator or "") == SYNTHETIC_CREATOR
    if not w.parent or not w.text:
        raise Skip("empty workbook")
    return Doc("".join(w.text), np.asarray(w.char_node, np.int32), np.asarray(w.parent, np.int32),
               np.asarray(w.rank, np.int32), ref_path=w.ref_path, char_kind=np.asarray(w.char_kind, np.uint8),
               copied_from=np.asarray(w.copied_from, np.int64), label=first_appearance(w.kinds),
               notes={k: v for k, v in w.notes.items() if v},
               synthetic=synthetic)


class _WorkbookWriter:
    """The text and tree of one workbook, written a sheet, a row and a cell at a time."""

    def __init__(self, wb):
        self.sheets = {n.lower(): i for i, n in enumerate(wb.sheetnames)}
        self.names = {}
        for n, dn in getattr(wb, "defined_names", {}).items():
            if getattr(dn, "attr_text", None):
                self.names[n.lower()] = dn.attr_text.lstrip("=").split(",")[0]
        self.text, self.char_node, self.char_kind, self.copied_from = [], [], [], []
        self.parent, self.rank, self.kinds, self.ref_path = [], [], [], {}
        self.notes = {"formulas kept as text (parser rejected)": 0, "references to unknown targets": 0}
        self.at = self.read = 0

    def emit(self, s, node, kind=0):
        """Write s, its characters owned by `node` (-1: none) and flagged `kind`."""
        check_size("a document", self.at + len(s), MAX_DOC_CHARS)   # one shared string may fill many cells
        self.text.append(s)
        self.char_node.extend([node] * len(s))
        self.char_kind.extend([kind] * len(s))
        self.copied_from.extend([-1] * len(s))
        self.at += len(s)

    def add(self, p, r, kind):
        """A new node under p with rank r and label `kind`; returns its id."""
        self.parent.append(p)
        self.rank.append(r)
        self.kinds.append(kind)
        return len(self.parent) - 1

    def sheet(self, si, ws, render, max_rows):
        """Sheet si: its non-empty rows, a line each, after a blank line if a sheet came before."""
        sheet_id, above, rows_kept = self.add(-1, si, "sheet"), {}, 0
        if self.text:
            self.emit("\n", -1)                 # a blank line between sheets
        if hasattr(ws, "reset_dimensions"):
            ws.reset_dimensions()               # the stored dimension can be wrong (A1:AMJ1048576 for 4 rows)
        for row in ws.iter_rows():
            self.read += 1 + len(row)           # a 2 KB file can ask for hours of empty rows and cells
            check_size("a workbook", self.read, MAX_CELLS_READ, "rows and cells read (empty ones included)")
            cells = [c for c in row if getattr(c, "value", None) is not None and str(c.value) != ""]
            if not cells:
                continue                        # empty rows are not stored
            rows_kept += 1
            if rows_kept > max_rows:
                raise Skip(f"sheet with more than {max_rows:,} rows")
            row_id = self.add(sheet_id, cells[0].row - 1, "row")
            for ci, c in enumerate(cells):
                if ci:
                    self.emit("\t", -1)
                self.cell(c, self.add(row_id, c.column - 1, "cell"), si, render, above)
            self.emit("\n", -1, KIND_ROW_END)   # the newline is the token that ends a row

    def cell(self, c, cell_id, si, render, above):
        """One cell: a formula's tree, or a literal flagged where it repeats the cell above it."""
        if render == "addressed":
            self.emit(f"{c.coordinate}:", cell_id)
        v = c.value
        v = getattr(v, "text", v)       # an array formula ({=...} in Excel): its text, not the object's repr
        s = str(v)
        check_size("a cell", len(s), MAX_CELL_CHARS, "characters (Excel's own cap)")
        if isinstance(v, str) and v.startswith("=") and len(v) > 1:
            self.formula(cell_id, v, si)
            above.pop(c.column, None)
            return
        s = s.replace("\t", " ").replace("\n", " ")
        start = self.at
        self.emit(s, self.add(cell_id, 0, type(v).__name__))   # a literal: int, float, str, datetime...
        prev = above.get(c.column)
        if prev and prev[0] == c.row - 1 and prev[1] == s:      # equal to the cell directly above
            for k in range(len(s)):
                self.char_kind[start + k] |= KIND_COPIED
                self.copied_from[start + k] = prev[2] + k
        above[c.column] = (c.row, s, start)

    def formula(self, cell_id, f, sheet_i):
        """Formula f of a cell: its tree's nodes (formula_tree), or one literal node if rejected."""
        from openpyxl.formula.tokenizer import Tokenizer
        try:
            items = Tokenizer(f).items           # f includes its leading '='
            nodes, owner = formula_tree(items)
        except Exception:           # the tokenizer or the parser rejects it: one literal node
            self.notes["formulas kept as text (parser rejected)"] += 1
            self.emit(f, self.add(cell_id, 0, "unparsed formula"))
            return
        ids = []                    # a token belongs to the node emitting it
        for p, r, i in nodes:
            ids.append(self.add(cell_id if p < 0 else ids[p], r, f"{items[i].type} {items[i].subtype}"))
        self.emit("=", cell_id)
        for i, t in enumerate(items):
            nid = ids[owner[i]] if owner[i] >= 0 else -1
            if t.type == "OPERAND" and t.subtype == "RANGE":
                target = _cell_ref(t.value, self.sheets, self.names)
                if target is None:
                    self.notes["references to unknown targets"] += 1
                else:
                    self.ref_path[nid] = [sheet_i if target[0] == -2 else target[0]] + target[1:]
                self.emit(t.value, nid, KIND_CELL_REF)
            else:
                self.emit(t.value, nid)


# --------------------------------------------------------------- spreadsheets (synthetic) ----
# No real spreadsheet corpus is reachable offline: `prepare.py sheets` without --src writes SYNTHETIC ones.
NAMES = ["Ann", "Bob", "Carla", "Dev", "Elif", "Femi", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lena", "Mo",
         "Nia", "Omar", "Pia", "Quinn", "Rosa", "Sam", "Tara", "Uma", "Vic", "Wen", "Xavi", "Yara", "Zed"]
GOODS = ["bolts", "nuts", "washers", "hinges", "screws", "brackets", "rivets", "springs", "clamps", "pins",
         "gears", "valves", "seals", "pipes", "fuses", "cables"]


def _timesheet(wb, rng):
    ws = wb.active
    ws.title = "Hours"
    days = ["Mon", "Tue", "Wed", "Thu", "Fri"]
    ws.append(["Name"] + days + ["Total"])
    n = rng.randint(6, 40)
    for r in range(2, n + 2):
        ws.append([rng.choice(NAMES) + f" {r}"] + [8 if rng.random() < 0.7 else rng.choice([0, 4, 6, 9, 10])
                                                   for _ in days] + [f"=SUM(B{r}:F{r})"])
    ws.append([])                                           # a blank row before the totals
    ws.append(["Total"] + [f"=SUM({c}2:{c}{n + 1})" for c in "BCDEFG"])
    s = wb.create_sheet("Summary")
    s.append(["Total hours", f"=Hours!G{n + 3}"])
    s.append(["Average per person", f"=AVERAGE(Hours!G2:G{n + 1})"])
    s.append(["People over 40h", f'=COUNTIF(Hours!G2:G{n + 1},">40")'])
    s.append(["Overtime rate", 1.5])
    s.append(["Overtime cost", "=IF(B3>0,B3*B4*Rate,0)"])
    wb.defined_names["Rate"] = DefinedName("Rate", attr_text=f"Summary!$B${rng.choice([4, 4, 2])}")


def _budget(wb, rng):
    ws = wb.active
    ws.title = "Budget"
    ws.append(["Category", "Planned", "Actual", "Difference", "Status"])
    cats = rng.sample(["Rent", "Salaries", "Travel", "Software", "Hardware", "Marketing", "Training",
                       "Utilities", "Insurance", "Legal", "Catering", "Office"], rng.randint(5, 12))
    for r, c in enumerate(cats, 2):
        plan = rng.choice([500, 1000, 1500, 2000, 5000, 12000])
        ws.append([c, plan, round(plan * rng.uniform(0.7, 1.3), 2), f"=C{r}-B{r}",
                   f'=IF(D{r}>0,"over","ok")'])
    n = len(cats) + 1
    ws.append(["Total", f"=SUM(B2:B{n})", f"=SUM(C2:C{n})", f"=C{n + 1}-B{n + 1}"])
    q = wb.create_sheet("Quarters")
    q.append(["Quarter", "Share", "Planned"])
    for i, share in enumerate([0.25, 0.25, 0.25, 0.25], 2):
        q.append([f"Q{i - 1}", share, f"=B{i}*Budget!$B${n + 1}"])


def _invoice(wb, rng):
    p = wb.active
    p.title = "Prices"
    goods = rng.sample(GOODS, rng.randint(5, len(GOODS)))
    for g in goods:
        p.append([g, round(rng.uniform(0.1, 40), 2)])
    p["E1"] = rng.choice([0.07, 0.19, 0.2])
    wb.defined_names["TaxRate"] = DefinedName("TaxRate", attr_text="Prices!$E$1")
    ws = wb.create_sheet("Invoice")
    ws.append(["Item", "Qty", "Price", "Amount"])
    n = rng.randint(3, 25)
    for r in range(2, n + 2):
        ws.append([rng.choice(goods), rng.randint(1, 50),
                   f"=VLOOKUP(A{r},Prices!$A$1:$B${len(goods)},2,FALSE)", f"=B{r}*C{r}"])
    ws.append([])
    ws.append(["Subtotal", None, None, f"=SUM(D2:D{n + 1})"])
    ws.append(["Tax", None, None, f"=D{n + 3}*TaxRate"])
    ws.append(["Total", None, None, f"=D{n + 3}+D{n + 4}"])


def _gradebook(wb, rng):
    ws = wb.active
    ws.title = "Grades"
    ws.append(["Student", "HW1", "HW2", "HW3", "HW4", "Exam", "Final", "Grade"])
    n = rng.randint(8, 35)
    for r in range(2, n + 2):
        ws.append([rng.choice(NAMES)] + [rng.choice([100, 100, 90, 80, 70, 60]) for _ in range(4)] +
                  [rng.randint(40, 100), f"=0.4*AVERAGE(B{r}:E{r})+0.6*F{r}",
                   f'=IF(G{r}>=90,"A",IF(G{r}>=80,"B",IF(G{r}>=70,"C","F")))'])
    at = wb.create_sheet("Attendance")        # a wide register: the cell above is a row (~300 tokens) back
    lessons = rng.randint(120, 160)
    at.append(["Student"] + [f"L{i + 1}" for i in range(lessons)])
    for r in range(2, n + 2):
        at.append([ws.cell(r, 1).value] + ["P" if rng.random() < 0.85 else "A" for _ in range(lessons)])
    st = wb.create_sheet("Stats")
    st.append(["Column", "Mean", "Max"])
    for c in "BCDEFG":
        st.append([f"=Grades!{c}1", f"=AVERAGE(Grades!{c}2:{c}{n + 1})", f"=MAX(Grades!{c}:{c})"])


def _inventory(wb, rng):
    ws = wb.active
    ws.title = "Stock"
    ws.append(["SKU", "Item", "Qty", None, "Reorder level", "Reorder?", "Warehouse"])   # a blank column D
    n = rng.randint(8, 50)
    site = rng.choice(["North", "South", "East"])
    for r in range(2, n + 2):
        if rng.random() < 0.3:
            site = rng.choice(["North", "South", "East"])   # long runs of the value above
        ws.append([f"SKU-{rng.randint(1000, 9999)}", rng.choice(GOODS), rng.randint(0, 500), None,
                   rng.choice([50, 100, 100, 200]), f'=IF(C{r}<E{r},"yes","no")', site])
    ws.append([])
    ws.append(["Items to reorder", None, f'=COUNTIF(F2:F{n + 1},"yes")'])


WORKBOOKS = 600   # synthetic workbooks written without --src (prepare.py --workbooks)


def synthetic_workbooks(out_dir, n, seed=0):
    """Write n SYNTHETIC .xlsx workbooks (deterministic per seed) into out_dir: realistic shapes
    (timesheets, budgets, invoices, grade books, inventories; several sheets, cross-sheet
    formulas, SUM/AVERAGE/IF/VLOOKUP/COUNTIF, a defined name, blank rows and columns), saved as
    real .xlsx and read back through the same openpyxl path as user files. Every file is signed
    SYNTHETIC_CREATOR; meta.json says synthetic."""
    rng = random.Random(seed)
    kinds = [_timesheet, _budget, _invoice, _gradebook, _inventory]
    os.makedirs(out_dir, exist_ok=True)
    for i in range(n):
        wb = openpyxl.Workbook()
        wb.properties.creator = SYNTHETIC_CREATOR
        kind = kinds[i % len(kinds)]
        kind(wb, rng)
        wb.save(os.path.join(out_dir, f"{kind.__name__[1:]}_{i:04d}.xlsx"))
    return out_dir


def sheets_sources(args):
    dirs = args.src
    if not dirs:
        n = args.workbooks or WORKBOOKS
        dirs = [synthetic_workbooks(os.path.join(args.out, "sheets_synthetic_src"), n)]
        print(f"no --src given: using {n} SYNTHETIC workbooks written to {dirs[0]} "
              "(no real spreadsheet corpus is available offline; pass --src for real .xlsx files)")
    items = find_files(dirs, (".xlsx", ".xlsm", ".xls"), bool(args.src))
    if not items:
        sys.exit(f"error: no .xlsx/.xlsm files under {dirs}")
    return items, dirs


def web_sheets_sources(args):
    """Web pages and workbooks in one corpus (appendix, the two-corpus precursor): the HTML and
    the .xlsx files under --src, or python3-doc's pages and the SYNTHETIC workbooks."""
    pages, web_dirs = web.web_sources(args)
    books, sheet_dirs = sheets_sources(args)
    return pages + books, web_dirs + sheet_dirs


def build_sheets(item, render="values"):
    return build(item, lambda raw: sheet_doc(raw, render))


def build_web_sheets(item, render="values", blocks="space"):
    is_sheet = item[0].lower().endswith((".xlsx", ".xlsm", ".xls"))
    name, doc, reason = build_sheets(item, render) if is_sheet else web.build_web(item, blocks)
    if doc is not None:
        doc.source = int(is_sheet)
    return name, doc, reason


def rows(c, doc):
    """Where a record may start: a new row."""
    return np.r_[True, (c["kind"][:-1] & KIND_ROW_END) > 0]


def rows_or_text_blocks(c, doc):
    return rows(c, doc) if doc.source == 1 else web.text_blocks(c, doc)


CORPORA = {
    "sheets": Corpus(sheets_sources, build_sheets, rows, options=("render",), root_ranks=True,
                     attention=("cells",), reads=(("workbooks", False),)),
    "web_sheets": Corpus(web_sheets_sources, build_web_sheets, rows_or_text_blocks,
                         options=("render", "blocks"), reads=(("workbooks", False),)),
}
