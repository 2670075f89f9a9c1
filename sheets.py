"""Workbooks as trees (the depth-perception appendix §4-§5): `sheet_doc`, raw .xlsx -> Doc or a
`Skip`, and the formula trees inside cells (trees.py holds Doc).
"""
import io
import re
import warnings
import zipfile

import numpy as np
import openpyxl

from trees import Doc, KIND_CELL_REF, KIND_COPIED, KIND_ROW_END, MAX_CELLS_READ, MAX_CELL_CHARS, MAX_DOC_CHARS, MAX_PART_BYTES, MAX_ZIP_BYTES, Skip, check_size, first_appearance


# ---------------------------------------------------------------------------------------------
# Spreadsheets: workbook -> sheet -> row -> cell -> literal or formula tree (appendix §4)
#
# Path levels 1-3 are the sheet index, absolute row and absolute column (0-based), not sibling
# ranks, since empty rows and cells are not stored. Deeper levels are sibling ranks inside the
# formula. Renders: 'values' writes each cell's content, 'addressed' writes 'G4:=E4+F4'; tabs
# separate cells, newlines rows, a blank line sheets (separators: no node). A reference's target
# (sheet, row, column) comes from its own text, so it is known even when the named cell comes later.
#
# The formula's tree is our reading. Appendix §4 calls it an expression tree, but §5 asks that "a
# token's node and path depend only on the document up to that token", and over infix text no
# precedence tree can do both: in =A1+B1 the operand A1 is a child of the '+' written after it. We
# keep §5: only brackets nest, since a bracket opens before its contents. A function call,
# parenthesis or array constant is a node (its opening token starts it; its separators and closing
# token belong to it) whose children are the operands and operators written inside it, as ordered
# siblings; outside every bracket they are children of the cell. =B3+C3*2 is five siblings; in
# =SUM(A1,B1)*2, A1 and B1 are children of SUM( and '*' is its next sibling. Precedence is left to
# the model, as in the text. It accepts exactly the formulas the precedence parser it replaced did
# (issue 23: all 3,592 of the real workbooks, 200,000 random ones).
# ---------------------------------------------------------------------------------------------
MAX_SHEET_ROWS = 10_000         # a documented limit: bigger sheets are skipped, not truncated
COPY_DISTANCE = 256             # "copied from the cell above across >= 256 tokens"
SYNTHETIC_CREATOR = "treerope synthetic workbook generator"   # prepare.py's generator signs its files
_A1 = re.compile(r"\$?([A-Za-z]{1,3})?\$?([0-9]+)?")
_OPENS = ("FUNC", "PAREN", "ARRAY")


def formula_tree(items):
    """openpyxl's token list of one formula -> (nodes, owner), read once in order: nodes as
    (parent, rank, token index), parent -1 for the cell; owner[i] the node emitting token i, -1
    for white space. Raises ValueError for a malformed formula (an operator without its operand,
    an unclosed bracket, two operands side by side outside brackets)."""
    nodes, owner = [], [-1] * len(items)
    # brackets open, the cell outermost: [node, children so far, state], the state saying what may
    # come next: 'operand' (at the start, after an operator: an operand), 'start' (after an
    # opening bracket or a separator: anything but an operator), 'after' (an operand just ended)
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
    import zipfile
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        sizes = [i.file_size for i in z.infolist()]
    check_size("a zip part", max(sizes, default=0), MAX_PART_BYTES, "bytes uncompressed")
    check_size("a zip", sum(sizes), MAX_ZIP_BYTES, "bytes uncompressed")


def sheet_doc(raw, render="values", max_rows=MAX_SHEET_ROWS):
    """An .xlsx/.xlsm workbook (bytes) -> Doc. Formulas are read as written (not cached values)."""
    import zipfile
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
    from openpyxl.formula.tokenizer import Tokenizer
    sheets = {n.lower(): i for i, n in enumerate(wb.sheetnames)}
    names = {}
    for n, dn in getattr(wb, "defined_names", {}).items():
        if getattr(dn, "attr_text", None):
            names[n.lower()] = dn.attr_text.lstrip("=").split(",")[0]
    text, char_node, char_kind, copied_from = [], [], [], []
    parent, rank, kinds, ref_path = [], [], [], {}
    notes = {"formulas kept as text (parser rejected)": 0, "references to unknown targets": 0}
    at = read = 0

    def emit(s, node, kind=0):
        nonlocal at
        check_size("a document", at + len(s), MAX_DOC_CHARS)   # one shared string may fill many cells
        text.append(s)
        char_node.extend([node] * len(s))
        char_kind.extend([kind] * len(s))
        copied_from.extend([-1] * len(s))
        at += len(s)

    def add(p, r, kind):
        parent.append(p)
        rank.append(r)
        kinds.append(kind)
        return len(parent) - 1

    def formula(cell_id, f, sheet_i):
        try:
            items = Tokenizer(f).items           # f includes its leading '='
            nodes, owner = formula_tree(items)
        except Exception:           # the tokenizer or the parser rejects it: one literal node
            notes["formulas kept as text (parser rejected)"] += 1
            emit(f, add(cell_id, 0, "unparsed formula"))
            return
        ids = []                    # a token belongs to the node emitting it
        for p, r, i in nodes:
            ids.append(add(cell_id if p < 0 else ids[p], r, f"{items[i].type} {items[i].subtype}"))
        emit("=", cell_id)
        for i, t in enumerate(items):
            nid = ids[owner[i]] if owner[i] >= 0 else -1
            if t.type == "OPERAND" and t.subtype == "RANGE":
                target = _cell_ref(t.value, sheets, names)
                if target is None:
                    notes["references to unknown targets"] += 1
                else:
                    ref_path[nid] = [sheet_i if target[0] == -2 else target[0]] + target[1:]
                emit(t.value, nid, KIND_CELL_REF)
            else:
                emit(t.value, nid)

    for si, ws in enumerate(wb.worksheets):
        sheet_id, above, rows_kept = add(-1, si, "sheet"), {}, 0
        if text:
            emit("\n", -1)                       # a blank line between sheets
        if hasattr(ws, "reset_dimensions"):
            ws.reset_dimensions()                 # the stored dimension can be wrong (A1:AMJ1048576 for 4 rows)
        for row in ws.iter_rows():
            read += 1 + len(row)                  # a 2 KB file can ask for hours of empty rows and cells
            check_size("a workbook", read, MAX_CELLS_READ, "rows and cells read (empty ones included)")
            cells = [c for c in row if getattr(c, "value", None) is not None and str(c.value) != ""]
            if not cells:
                continue                          # empty rows are not stored
            rows_kept += 1
            if rows_kept > max_rows:
                raise Skip(f"sheet with more than {max_rows:,} rows")
            row_id = add(sheet_id, cells[0].row - 1, "row")
            for ci, c in enumerate(cells):
                if ci:
                    emit("\t", -1)
                cell_id = add(row_id, c.column - 1, "cell")
                if render == "addressed":
                    emit(f"{c.coordinate}:", cell_id)
                v = c.value
                v = getattr(v, "text", v)   # an array formula ({=...} in Excel): its formula text, not the object's repr
                s = str(v)
                check_size("a cell", len(s), MAX_CELL_CHARS, "characters (Excel's own cap)")
                if isinstance(v, str) and v.startswith("=") and len(v) > 1:
                    formula(cell_id, v, si)
                    above.pop(c.column, None)
                    continue
                s = s.replace("\t", " ").replace("\n", " ")
                start = at
                emit(s, add(cell_id, 0, type(v).__name__))   # a literal: int, float, str, datetime...
                prev = above.get(c.column)
                if prev and prev[0] == c.row - 1 and prev[1] == s:   # equal to the cell directly above
                    for k in range(len(s)):
                        char_kind[start + k] |= KIND_COPIED
                        copied_from[start + k] = prev[2] + k
                above[c.column] = (c.row, s, start)
            emit("\n", -1, KIND_ROW_END)         # the newline is the token that ends a row
    synthetic = (wb.properties.creator or "") == SYNTHETIC_CREATOR
    if not parent or not text:
        raise Skip("empty workbook")
    return Doc("".join(text), np.asarray(char_node, np.int32), np.asarray(parent, np.int32),
               np.asarray(rank, np.int32), ref_path=ref_path, char_kind=np.asarray(char_kind, np.uint8),
               copied_from=np.asarray(copied_from, np.int64), label=first_appearance(kinds),
               notes={k: v for k, v in notes.items() if v},
               synthetic=synthetic)
