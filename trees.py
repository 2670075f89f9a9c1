"""Documents become trees: one builder per corpus, each `source -> Doc` or a `Skip`. Here: Doc,
the size limits, and the builders of Python and web pages; sheets.py (workbooks), paragraphs.py
(paper 004's paragraph corpora) and formats.py (JSON, XML, Markdown) build on the same Doc.

A Doc is the text a model reads plus, for every character, the tree node that emitted it.
Per node we keep its parent, sibling rank and depth; the path (ranks from the root down) is
derived. Glossary terms follow the depth-perception appendix (§3): path, sibling rank, level,
depth, within-node index; hRoPE coordinates p1/p2/p3 follow the paragraph-boundaries paper §3.1.

No look-ahead (appendix §5): every builder walks its document in reading order, so a node's
rank, path, renaming and reference depend only on what precedes it.
"""
import ast
import io
import itertools
import re
import tokenize
from dataclasses import dataclass, field

import numpy as np

FORMAT = 5   # what prepare.py writes; a data folder of another format is rebuilt (4: p1 in its document;
             # 5: formula trees without look-ahead, after_leaf)
LEVELS = 22  # path levels encoded (appendix §5: tree planes are 22 levels x {fast, slow})

# token-kind flags (evaluate.py breaks the loss down by these)
KIND_AFTER_CLOSE = 1   # Python: first token right after a subtree of 2+ nodes closes
KIND_NEW_BLOCK = 2     # web: first token of a new text block
KIND_ROW_END = 4       # sheets: end of a row
KIND_COPIED = 8        # sheets: a value equal to the cell directly above, >= 256 tokens back
KIND_CELL_REF = 16     # sheets: part of a cell reference
KIND_AFTER_LEAF = 32   # Python: first token of a node whose predecessor is its sibling, a leaf
KIND_NAMES = {KIND_AFTER_CLOSE: "after_close", KIND_NEW_BLOCK: "new_block", KIND_ROW_END: "row_end",
              KIND_COPIED: "copied_above", KIND_CELL_REF: "cell_ref", KIND_AFTER_LEAF: "after_leaf"}


class Skip(Exception):
    """A document we cannot use; `reason` is counted in meta.json."""
    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


# ----------------------------------------------------------------------------- size policy ----
# Every reader works inside these caps, so prepare's memory and time stay a bounded multiple of
# the largest allowed document whatever the input (a 195 KB workbook can hold a 200 MB cell; a
# 3.4 M-character page, near the caps, prepares in 14 s at 0.53 GB). A breach skips the document
# with its own counted reason, "too large: ...", never truncates it. Each cap sits far above the
# largest real input on this machine (in brackets: the standard library, python3-doc's pages and
# sources, 126 real workbooks), so nothing real is skipped; records and --long are unaffected.
MAX_FILE_BYTES = 64_000_000     # a file read whole (2.6 MB page; a workbook with pictures can pass 20 MB)
MAX_PAGE_BYTES = 16_000_000     # HTML: lxml builds ~130 bytes per element, 16 MB of <br> is 0.5 GB (2.6 MB)
MAX_PYTHON_BYTES = 1_000_000    # Python source: parsing and writing it costs ~70 bytes per byte (757 KB)
MAX_PART_BYTES = 64_000_000     # one zip part, uncompressed, as the central directory declares it (1.2 MB)
MAX_ZIP_BYTES = 256_000_000     # a zip's parts together, uncompressed (2.5 MB)
MAX_CELL_CHARS = 32_767         # a cell's value or formula: Excel's own cap (2,685)
MAX_CELLS_READ = 2_097_152      # rows and cells openpyxl yields for a workbook, filling in every empty row up to
                                # the last (Excel: 1,048,576) and cell up to the last column: 2 full sheets (1,049,609)
MAX_TEXT_CHARS = 1_000_000      # one text node of a page: lxml keeps it with huge_tree (6,586)
MAX_DOC_CHARS = 4_000_000       # a document's text: ~4,000 records of 1,024 tokens (467,342)
MAX_DOC_TOKENS = 1_000_000      # a document's tokens (267,201 with a 512-entry BPE)


def too_large(what, cap, unit="characters"):
    """The Skip of a breached cap: one reason per cap, so meta.json counts them together."""
    return Skip(f"too large: {what} over {cap:,} {unit}")


def check_size(what, n, cap, unit="characters"):
    """Skip when n is over cap."""
    if n > cap:
        raise too_large(what, cap, unit)


def source_text(raw):
    """Bytes of a text file -> str, or Skip. A UTF-8 byte-order mark is dropped and a Python
    coding cookie (PEP 263) honoured, as Python itself reads source; NUL bytes mean binary."""
    if isinstance(raw, str):
        text = raw
    elif b"\0" in raw[:8192]:
        raise Skip("binary (NUL bytes)")
    else:
        try:
            text = raw.decode(tokenize.detect_encoding(io.BytesIO(raw).readline)[0])
        except (SyntaxError, LookupError, UnicodeDecodeError):
            raise Skip("not utf-8")
    check_size("a document", len(text), MAX_DOC_CHARS)   # before the per-character work
    return text


@dataclass
class Doc:
    text: str
    char_node: np.ndarray          # int32 per character: emitting node, -1 = none (separators)
    parent: np.ndarray             # int32 per node, -1 = child of the root
    rank: np.ndarray               # int32 per node: sibling rank (or absolute row/col on sheets)
    ref: np.ndarray = None         # int32 per node: node whose coordinates a reference takes, -1
    ref_path: dict = None          # node -> explicit target path (sheets: targets may not exist yet)
    symbol: np.ndarray = None      # int32 per node: variable id by order of first mention, -1
    char_kind: np.ndarray = None   # uint8 per character: KIND_* flags of a token starting there
    char_p: np.ndarray = None      # int32 (n_chars, 3): hRoPE p1, p2, p3 (p3 filled per token later)
    char_chat: np.ndarray = None   # int32 (n_chars, 2): chat exchange, speaker (position: per token later)
    copied_from: np.ndarray = None  # int64 per character: same character of the cell above, -1
    label: np.ndarray = None       # int32 per node: its type's id by first appearance in the document
    stmt: np.ndarray = None        # int32 per node (Python): its innermost enclosing statement, -1
    source: int = -1               # web_sheets: 0 a web page, 1 a workbook (-1: a one-corpus Doc)
    notes: dict = None             # counted oddities kept in the document (meta.json sums them)
    synthetic: bool = False

    def node_coords(self):
        """Per node: depth (levels below the root; children of the root have depth 1) and the
        (n_nodes, LEVELS) path of sibling ranks, -1 where a level is absent. Nodes deeper than
        LEVELS keep their true depth and their first LEVELS ranks (appendix §4: nothing dropped)."""
        n = len(self.parent)
        depth = np.ones(n, np.int32)
        path = np.full((n, LEVELS), -1, np.int64)
        for i, p in enumerate(self.parent):    # parents precede children in every builder
            if p >= 0:
                path[i] = path[p]
                depth[i] = depth[p] + 1
            if depth[i] <= LEVELS:
                path[i, depth[i] - 1] = self.rank[i]
        return depth, path


def first_appearance(names):
    """Per node, its label as the order in which that name first appears in the document (0, 1,
    ...): the same causal numbering as symbol identity. 'Depth with a label' reads it (this
    repository's reading: the label is the node's type — Python AST class, the tag of the element
    holding a web text, a spreadsheet content kind)."""
    ids = {}
    return np.array([ids.setdefault(n, len(ids)) for n in names], np.int32)


def parents_from_depth(depths):
    """Appendix §5 'Depth and the tree': in a pre-order serialisation a node's parent is the
    nearest preceding node one level shallower. Returns the reconstructed parent of each node."""
    last_at = {}
    out = []
    for i, d in enumerate(depths):
        out.append(last_at.get(d - 1, -1) if d > 1 else -1)
        last_at[d] = i
    return out


# ---------------------------------------------------------------------------------------------
# Python: compact pre-order serialisation of the syntax tree (appendix §4)
#
# Nodes in pre-order, parent first, separated by one space; no brackets, no indentation, no
# newlines. Each node is self-delimiting:
#     [=...]Type scalar scalar ...     any node (the type fixes how many scalars follow)
#     [=...]identifier                 a Name (written `Name id` when id is an ast class name)
#     [=...].attr  :name  @key         an Attribute, an arg (parameter), a keyword (@ alone: **)
#     [=...]Add  Not  And  Lt          a BinOp, UnaryOp, BoolOp, one-operator Compare: the operator
#     [=...]literal                    a Constant: its repr ('a b', b'x', 12, 1.5, True, ...) with
#                                      raw newlines for \n, u'x' for a u-string, `Constant inf`
#                                      when repr is no literal
#     [=...]~                          an absent child inside a list (Dict.keys, kw_defaults)
# The marker `=` x k says the node is in its parent's child field k (0-based); it is written only
# where the field differs from the previous sibling's (the first child: from field 0). The
# nesting lives only in the depths, so decoding needs the text plus each node's depth
# (decode_python). The root Module is implicit. Operators are scalars of their parent
# (BinOp Add); expression contexts (Load/Store) are dropped, since ast.unparse does not read them.
# ---------------------------------------------------------------------------------------------

_IDENT_LISTS = {("Global", "names"), ("Nonlocal", "names"), ("MatchClass", "kwd_attrs")}
_SCALARS = {"name", "id", "arg", "attr", "module", "asname", "level", "conversion", "simple",
            "is_async", "rest", "kind"}
_DROPPED = {"ctx", "type_comment", "type_ignores"}
_OPS = {"op", "ops"}
# Comprehensions are written generators-first so every comprehension variable is defined
# before it is used in the stream ("every definition precedes its uses", appendix §5).
_ORDER = {"ListComp": ("generators", "elt"), "SetComp": ("generators", "elt"),
          "GeneratorExp": ("generators", "elt"), "DictComp": ("generators", "key", "value")}


_CONSTANTS = {("Constant", "value"), ("MatchSingleton", "value")}


def _is_scalar(type_name, f):
    return (type_name, f) in _IDENT_LISTS or (type_name, f) in _CONSTANTS or f in _SCALARS or f in _OPS


def _fields(type_name):
    fs = [f for f in getattr(ast, type_name)._fields if f not in _DROPPED]
    scalars = [f for f in fs if _is_scalar(type_name, f)]
    children = list(_ORDER.get(type_name, [f for f in fs if not _is_scalar(type_name, f)]))
    return scalars, children


_FIELDS = {}


def fields(type_name):
    if type_name not in _FIELDS:
        _FIELDS[type_name] = _fields(type_name)
    return _FIELDS[type_name]


def _scalar_text(type_name, f, v):
    if f in _OPS:
        return ",".join(type(o).__name__ for o in v) if isinstance(v, list) else type(v).__name__
    if (type_name, f) in _IDENT_LISTS:
        return ",".join(v) if v else "-"
    if (type_name, f) in _CONSTANTS:
        return "..." if v is Ellipsis else repr(v)
    return str(v)   # identifiers, ints, None


def _scalar_value(type_name, f, s):
    if f in _OPS:
        ops = [getattr(ast, o)() for o in s.split(",")]
        return ops if f == "ops" else ops[0]
    if (type_name, f) in _IDENT_LISTS:
        return [] if s == "-" else s.split(",")
    if (type_name, f) in _CONSTANTS:
        if s == "...":
            return Ellipsis
        try:
            return ast.literal_eval(s)
        except ValueError:          # inf, nan, infj: repr is not a literal
            return complex(s) if s.endswith("j") else float(s)
    if s == "None":
        return None
    return int(s) if f in {"level", "conversion", "simple", "is_async"} else s


_AST_NAMES = {n for n in dir(ast) if isinstance(getattr(ast, n), type) and issubclass(getattr(ast, n), ast.AST)}
_STRING = re.compile(r"""[bBuU]?(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")   # a str/bytes repr


def _word(text, pos):
    """The scalar or head starting at `pos`: a string literal whole (it may hold spaces), else up
    to the next space. Returns (word, end)."""
    m = _STRING.match(text, pos)
    if m:
        return m.group(), m.end()
    end = text.find(" ", pos)
    end = len(text) if end < 0 else end
    return text[pos:end], end


_ESCAPE = re.compile(r"\\.")             # one escape sequence of a repr
_OP_OWNER = {**{o: "BinOp" for o in ("Add", "Sub", "Mult", "MatMult", "Div", "Mod", "Pow", "LShift", "RShift",
                                      "BitOr", "BitXor", "BitAnd", "FloorDiv")},
             **{o: "UnaryOp" for o in ("Invert", "Not", "UAdd", "USub")}, "And": "BoolOp", "Or": "BoolOp",
             **{o: "Compare" for o in ("Eq", "NotEq", "Lt", "LtE", "Gt", "GtE", "Is", "IsNot", "In", "NotIn")}}
_SIGIL = {"Attribute": ".", "arg": ":", "keyword": "@"}   # .attr, :x0 (a parameter), @key (key=...)
_FROM_SIGIL = {v: k for k, v in _SIGIL.items()}


def _next_field(t, children, fi):
    """The field the next child is expected in: a single-valued field holds one child, so the
    next child moves on; a list field may hold more, so it stays."""
    return fi if _LIST_FIELD.get((t, children[fi]), False) else min(fi + 1, len(children) - 1)


def _node_text(node, t, values):
    """A node's own text: a bare identifier for a Name, a bare literal for a Constant, else its
    type and scalars."""
    if t == "Name" and values[0] not in _AST_NAMES:
        return values[0]
    if t in _SIGIL:                    # one pre-token with the code pattern (tokenizer.CODE_PAT)
        return _SIGIL[t] + (values[0] if values[0] != "None" else "")
    if t in ("BinOp", "UnaryOp", "BoolOp") or (t == "Compare" and "," not in values[0]):
        return values[0]                  # the operator alone: Add, Not, And, Lt (each names one type)
    if t == "Constant":
        r = values[0]
        if _STRING.fullmatch(r):          # newlines stay raw: repr never writes one, so it is reversible
            return ("u" if node.kind == "u" else "") + _ESCAPE.sub(lambda m: "\n" if m.group() == "\\n" else m.group(), r)
        if r in ("True", "False", "None", "...") or (r[0].isdigit() and _is_literal(r)):
            return r
    return " ".join([t] + values)


def _is_literal(r):
    try:
        ast.literal_eval(r)
        return True
    except (ValueError, SyntaxError):
        return False


@dataclass
class _Scope:
    """A renaming scope: a function, lambda or comprehension (class bodies and the module are
    not: their names are attributes and the module's API)."""
    kind: str                                   # 'function', 'comprehension', 'class'
    names: dict = field(default_factory=dict)   # original -> variable id
    frozen: set = field(default_factory=set)    # names that must keep their original spelling


class _PythonWriter:
    """Walks the tree once, in serialisation order, emitting lines and deciding renames.

    Locals (renamed x0, x1, ... by order of definition, one counter per outermost function):
    parameters; Name targets of assignment, augmented/annotated assignment, for, with, walrus,
    del and comprehensions; except-handler, match-capture and match-rest names; names of
    functions and classes defined inside a function; `import a as b`/`import a` inside a
    function. Not locals: module-level and class-body names, attributes, names declared
    `global`. `nonlocal x` takes the enclosing function's name. A name whose first mention in
    a scope is a use (a global, a builtin, or a local used before its binding in reading order)
    keeps its spelling in that scope and its enclosing scopes, so a renaming never depends on
    later text.
    """

    def __init__(self, rename):
        self.rename = rename
        self.nodes, self.parent, self.rank = [], [], []     # node texts, in pre-order
        self.type_names, self.stmt = [], []                 # per node: AST class, innermost statement
        self.ref, self.symbol = [], []
        self.scopes = []          # stack of _Scope
        self.counter = 0          # the next local's number in its outermost function (x0, x1, ...)
        self.var_def = {}         # variable id (unique in the document) -> defining node
        self.var_name = {}        # variable id -> its number n in the spelling xn
        self.var_symbol = {}      # variable id -> symbol id (order of first mention in the document)

    # -- scopes ------------------------------------------------------------------------------
    def _function_scopes(self):
        return [s for s in self.scopes if s.kind != "class"]

    def _resolve(self, name):
        """Variable id a use of `name` refers to, or None (global / builtin / frozen)."""
        for i, s in enumerate(reversed(self.scopes)):
            if s.kind == "class":      # a class body sees its own names; its methods skip them
                if i == 0 and name in s.frozen:
                    return None
                continue
            if name in s.frozen:
                return None
            if name in s.names:
                return s.names[name]
        return None

    def _freeze(self, name):
        for s in self._function_scopes():
            if name not in s.names:
                s.frozen.add(name)

    def _bind(self, name, node_id, scope=None):
        """A binding occurrence; returns the spelling to write."""
        scope = scope or (self.scopes[-1] if self.scopes else None)
        if not self.rename or scope is None:
            return name
        if scope.kind == "class":      # class attributes keep their names
            scope.frozen.add(name)
            return name
        if name in scope.frozen:
            return name
        if name not in scope.names:
            v = scope.names[name] = len(self.var_def)
            self.var_def[v], self.var_name[v] = node_id, self.counter
            self.counter += 1
        return self._note(scope.names[name], node_id, is_def=True)

    def _use(self, name, node_id):
        if not self.rename:
            return name
        v = self._resolve(name)
        if v is None:
            self._freeze(name)
            return name
        return self._note(v, node_id, is_def=False)

    def _note(self, v, node_id, is_def):
        self.var_symbol.setdefault(v, len(self.var_symbol))
        self.symbol[node_id] = self.var_symbol[v]
        if not is_def:
            self.ref[node_id] = self.var_def[v]
        return f"x{self.var_name[v]}"   # spellings restart per outermost function; ids do not

    # -- emission ----------------------------------------------------------------------------
    def emit(self, node, parent, rank, field_index, previous_field):
        nid = len(self.nodes)
        self.parent.append(parent)
        self.rank.append(rank)
        self.ref.append(-1)
        self.symbol.append(-1)
        self.nodes.append(None)
        self.type_names.append(type(node).__name__)
        self.stmt.append(nid if isinstance(node, ast.stmt) else self.stmt[parent] if parent >= 0 else -1)
        marker = "=" * (field_index - previous_field)     # fields skipped since the expected one
        if node is None:                       # a None inside a list (Dict.keys, kw_defaults)
            self.nodes[nid] = marker + "~"
            return
        t = type(node).__name__
        scalars, children = fields(t)
        pushed = self._open_scope(node, t, nid, parent)
        values = [_scalar_text(t, f, self._rename_scalar(node, t, f, nid, getattr(node, f)))
                  for f in scalars if f != "kind"]
        self.nodes[nid] = marker + _node_text(node, t, values)
        r, expected = 0, 0
        for fi, f in enumerate(children):
            v = getattr(node, f)
            for child in (v if isinstance(v, list) else [v] if v is not None else []):
                outer = self._outer_field(t, f)
                if outer:
                    saved = self.scopes.pop()
                self.emit(child, nid, r, fi, expected)
                if outer:
                    self.scopes.append(saved)
                r, expected = r + 1, _next_field(t, children, fi)
        if pushed:
            self.scopes.pop()

    def _open_scope(self, node, t, nid, parent):
        if t in ("FunctionDef", "AsyncFunctionDef", "ClassDef"):
            if self.scopes:                    # a def inside a function binds a local name
                node.name = self._bind(node.name, nid)
            if not self._function_scopes():
                self.counter = 0               # renaming restarts at each outermost function
            self.scopes.append(_Scope("class" if t == "ClassDef" else "function"))
            return True
        if t == "Lambda":
            self.scopes.append(_Scope("function"))
            return True
        if t in _ORDER and self._function_scopes():
            self.scopes.append(_Scope("comprehension"))
            return True
        return False

    def _outer_field(self, t, f):
        """Fields evaluated in the enclosing scope: decorators, annotations, defaults, bases."""
        return ((t in ("FunctionDef", "AsyncFunctionDef", "ClassDef")
                 and f in ("decorator_list", "returns", "bases", "keywords"))
                or (t == "arguments" and f in ("defaults", "kw_defaults"))
                or (t == "arg" and f == "annotation")) and bool(self.scopes)

    def _rename_scalar(self, node, t, f, nid, v):
        if not self.rename or v is None:
            return v
        if t == "Name" and f == "id":
            if isinstance(node.ctx, ast.Store):
                scope = None
                if getattr(node, "_walrus", False):   # := binds in the enclosing function
                    fs = [s for s in self.scopes if s.kind == "function"]
                    scope = fs[-1] if fs else None
                    if scope is None:
                        return v
                return self._bind(v, nid, scope)
            return self._use(v, nid)
        if (t == "arg" and f == "arg") or (t == "ExceptHandler" and f == "name") or \
           (t in ("MatchAs", "MatchStar") and f == "name") or (t == "MatchMapping" and f == "rest"):
            return self._bind(v, nid)
        if t == "alias" and self._function_scopes() and self.scopes[-1].kind != "class":
            if f == "name" and node.asname is None and "." not in v and v != "*":
                new = self._bind(v, nid)
                if new != v:            # `import a` becomes `import a as x3`
                    node.asname, node._bound = new, True
                return v
            if f == "asname" and not getattr(node, "_bound", False):
                return self._bind(v, nid)
            if f == "name" and "." in v and node.asname is None:
                self._freeze(v.split(".")[0])
        if t == "Nonlocal" and f == "names":
            out = []
            for name in v:
                self.scopes[-1].frozen.discard(name)
                outer = self.scopes.pop()
                resolved = self._resolve(name)
                self.scopes.append(outer)
                if resolved is None:
                    self._freeze(name)
                    out.append(name)
                else:
                    outer.names[name] = resolved
                    out.append(self._note(resolved, nid, is_def=False))
            return out
        if t == "Global" and f == "names":
            for name in v:
                if self.scopes:
                    self.scopes[-1].frozen.add(name)
        return v


def _mark_walrus(tree):
    for n in ast.walk(tree):
        if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
            n.target._walrus = True


def python_doc(source, rename=True):
    """Python source (str or bytes) -> Doc. Raises Skip for unusable input."""
    check_size("Python source", len(source), MAX_PYTHON_BYTES, "bytes")
    source = source_text(source)
    if not source.strip():
        raise Skip("empty")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        raise Skip("syntax error")
    except (RecursionError, MemoryError):
        raise Skip("too deeply nested")
    if not tree.body:
        raise Skip("empty")
    _mark_walrus(tree)
    w = _PythonWriter(rename)
    try:
        for i, stmt in enumerate(tree.body):
            w.emit(stmt, -1, i, 0, 0)
    except RecursionError:
        raise Skip("too deeply nested")
    pieces = [w.nodes[0]] + [" " + n for n in w.nodes[1:]]   # a node owns the space before it
    text = "".join(pieces)
    lengths = np.fromiter((len(p) for p in pieces), np.int64, len(pieces))
    char_node = np.repeat(np.arange(len(pieces), dtype=np.int32), lengths)
    parent = np.asarray(w.parent, np.int32)
    doc = Doc(text, char_node, parent, np.asarray(w.rank, np.int32),
              ref=np.asarray(w.ref, np.int32), symbol=np.asarray(w.symbol, np.int32),
              label=first_appearance(w.type_names), stmt=np.asarray(w.stmt, np.int32))
    # The appendix (§2, "Where the gain lands") names "tokens right after a subtree closes" and
    # defines it no further. Our reading: a node shallower than its predecessor, so the subtree
    # the predecessor ended had 2+ nodes (after_close). A node as deep as its predecessor follows
    # a leaf sibling, a one-node subtree, counted apart (after_leaf). A node deeper than its
    # predecessor is its child: nothing closed. Each depends only on the node and its predecessor.
    depth = doc.node_coords()[0]
    kind = np.zeros(len(text), np.uint8)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    kind[starts[1:][depth[1:] < depth[:-1]]] = KIND_AFTER_CLOSE
    kind[starts[1:][depth[1:] == depth[:-1]]] = KIND_AFTER_LEAF
    doc.char_kind = kind
    return doc


def python_programs(source, min_lines=3, max_lines=60):
    """Small programs cut from one module, in the spirit of the appendix's Python corpus (§4:
    423,111 programs; sibling rank p99 7): each top-level function or class of min_lines to
    max_lines lines, preceded by the module's top-level imports, as [(qualname, source)]. A
    module that does not parse gives none (python_doc counts it when read whole)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = source.splitlines()
    imports = [ast.unparse(s) for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    out = []
    for s in tree.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([s.lineno] + [d.lineno for d in s.decorator_list])
            if min_lines <= s.end_lineno - first + 1 <= max_lines:
                out.append((s.name, "\n".join(imports + lines[first - 1:s.end_lineno]) + "\n"))
    return out


def canonical_python(source, rename=True):
    """The reference the round trip reproduces: ast.unparse of the parsed tree, with locals
    renamed exactly as the serialisation renames them when `rename` is set."""
    doc = python_doc(source, rename)   # applies the renaming to a fresh tree
    return ast.unparse(decode_python(doc.text, doc.node_coords()[0].tolist()))


def decode_python(text, depths):
    """Serialisation text + each node's depth -> ast.Module (parents from depth alone)."""
    parents = parents_from_depth(depths)
    module = ast.Module(body=[], type_ignores=[])
    nodes, expected, pos = [], {}, 0
    for i, p in enumerate(parents):
        if i:
            if text[pos:pos + 1] != " ":
                raise ValueError(f"node {i}: expected a space at character {pos}")
            pos += 1
        k = 0
        while text.startswith("=", pos):      # field marker: fields skipped
            k, pos = k + 1, pos + 1
        head, pos = _word(text, pos)
        owner = module if p < 0 else nodes[p]
        if owner is module:
            slot = "body"
        else:
            owner_t = type(owner).__name__
            children = fields(owner_t)[1]
            fi = expected.get(p, 0) + k
            slot, expected[p] = children[fi], _next_field(owner_t, children, fi)
        if head == "~":
            node = None
        elif head in _OP_OWNER:           # BinOp, UnaryOp, BoolOp or Compare by its operator
            t = _OP_OWNER[head]
            f = fields(t)[0][0]
            node = getattr(ast, t)(**{f: _scalar_value(t, f, head)})
        elif head[0] in _FROM_SIGIL and head != "...":
            t = _FROM_SIGIL[head[0]]
            node = getattr(ast, t)(**{fields(t)[0][0]: head[1:] or None})
        elif head in _AST_NAMES:
            cls = getattr(ast, head)
            node = cls()
            vals = []
            for f in fields(head)[0]:
                if f != "kind":
                    word, pos = _word(text, pos + 1)
                    vals.append(word)
                    setattr(node, f, _scalar_value(head, f, word))
            if head == "Constant":
                node.kind = None
        elif _STRING.fullmatch(head) or head[0].isdigit() or head in ("True", "False", "None", "..."):
            node = ast.Constant(value=_scalar_value("Constant", "value", head.replace("\n", "\\n")),
                                kind="u" if head[0] in "uU" else None)
        else:
            node = ast.Name(id=head)
        if node is not None:
            cls = type(node)
            for f in cls._fields:         # list fields start empty, the rest None
                if not hasattr(node, f):
                    setattr(node, f, [] if _LIST_FIELD.get((cls.__name__, f), False) else None)
            if "ctx" in cls._fields:
                node.ctx = ast.Load()
        nodes.append(node)
        cur = getattr(owner, slot, None)
        if isinstance(cur, list):
            cur.append(node)
        else:
            setattr(owner, slot, node)
    if pos != len(text):
        raise ValueError(f"{len(depths)} depths but text remains at character {pos}")
    return ast.fix_missing_locations(module)


def _list_fields():
    """Which child fields hold lists, read from the grammar in ast's docstrings."""
    out = {}
    for name in dir(ast):
        cls = getattr(ast, name)
        if isinstance(cls, type) and issubclass(cls, ast.AST) and cls.__doc__ and "(" in cls.__doc__:
            sig = cls.__doc__.split("(", 1)[1].rsplit(")", 1)[0]
            for part in sig.split(","):
                part = part.strip()
                if " " in part:
                    typ, f = part.rsplit(" ", 1)
                    out[(name, f)] = typ.endswith("*")
    return out


_LIST_FIELD = _list_fields()


# ---------------------------------------------------------------------------------------------
# Web pages: the DOM, visible text only (appendix §4 "Web text")
# ---------------------------------------------------------------------------------------------
WEB_SKIP = {"head", "script", "style", "svg", "iframe", "noscript", "template"}
# elements whose boundaries end a text block: text on either side is joined with a newline
WEB_BLOCKS = {"address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "details",
              "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3",
              "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section",
              "summary", "table", "td", "th", "tr", "ul"}
MAX_WIDTH = 318   # the slow plane counts about 318 siblings before it wraps (appendix §5)


def html_root(html):
    """HTML (bytes or str) -> lxml root, or Skip. huge_tree: without it lxml drops, silently, a
    text node past 10 MB and everything nested past 256 elements (and all text after it); with
    it the limits are 2,048 levels and our caps (MAX_TEXT_CHARS, the callers' depth caps)."""
    import lxml.etree
    import lxml.html
    if isinstance(html, bytes) and html[:2] in (b"\xff\xfe", b"\xfe\xff"):   # UTF-16 has NUL bytes
        html = html.decode("utf-16", "replace")
    elif isinstance(html, bytes) and b"\0" in html[:8192]:
        raise Skip("binary (NUL bytes)")
    check_size("a page", len(html), MAX_PAGE_BYTES, "bytes")
    try:
        return lxml.html.document_fromstring(html, parser=lxml.html.HTMLParser(huge_tree=True))
    except (lxml.etree.ParserError, ValueError):
        raise Skip("empty or unparsable html")


def web_doc(html, max_levels=LEVELS, max_width=MAX_WIDTH):
    """HTML (bytes or str) -> Doc. Nodes are retained elements and text runs with a non-space
    character; paths start at the children of body; only text emits characters, so every
    token-carrying node is a leaf. Pages deeper than 22 levels or wider than 318 siblings are
    skipped (appendix §4 "What is excluded")."""
    root = html_root(html)
    body = root.find("body")
    if body is None:
        body = root
    parent, rank, depth_of, tags = [], [], [], []
    pieces, piece_node, piece_block, raw_edges = [], [], [], []
    chars = 0

    def add_node(p, r, d, tag):
        if d > max_levels:
            raise Skip("deeper than 22 levels")
        if r >= max_width:
            raise Skip("wider than 318 siblings")
        parent.append(p)
        rank.append(r)
        depth_of.append(d)
        tags.append(tag)
        return len(parent) - 1

    def walk(el, nid, d, block):
        """Children of element `el` (node id nid, or -1 for body) in document order."""
        nonlocal chars
        r = 0
        runs = itertools.chain([(el.text, None)], ((c.tail, c) for c in el))   # lazy: a width skip comes early
        for text, child in runs:
            if child is not None and isinstance(child.tag, str) and child.tag.lower() not in WEB_SKIP:
                cid = add_node(nid, r, d + 1, child.tag.lower())
                r += 1
                walk(child, cid, d + 1, cid if child.tag.lower() in WEB_BLOCKS else block)
                if child.tag.lower() in WEB_BLOCKS:   # text after a block element starts a new block
                    block = ("after", cid)
            if text and text.strip():          # a text run is labelled by the element holding it
                check_size("a text node", len(text), MAX_TEXT_CHARS)
                tid = add_node(nid, r, d + 1, tags[nid] if nid >= 0 else "body")
                r += 1
                pieces.append(" ".join(text.split()))
                chars += len(pieces[-1]) + 1
                check_size("a document", chars, MAX_DOC_CHARS)
                piece_node.append(tid)
                piece_block.append(block)
                raw_edges.append((text[0].isspace(), text[-1].isspace()))

    walk(body, -1, 0, "body")
    if not pieces:
        raise Skip("no visible text")
    text, char_node, kind = [], [], []
    for i, s in enumerate(pieces):
        new_block = i == 0 or piece_block[i] != piece_block[i - 1]
        if i:
            sep = "\n" if new_block else " " if raw_edges[i - 1][1] or raw_edges[i][0] else ""
            text.append(sep)
            char_node.extend([-1] * len(sep))          # separators belong to no node
            kind.extend([0] * len(sep))
        text.append(s)
        char_node.extend([piece_node[i]] * len(s))
        kind.extend([KIND_NEW_BLOCK if new_block else 0] + [0] * (len(s) - 1))
    return Doc("".join(text), np.asarray(char_node, np.int32), np.asarray(parent, np.int32),
               np.asarray(rank, np.int32), char_kind=np.asarray(kind, np.uint8), label=first_appearance(tags))


def warc_records(path, cut=None):
    """(uri, html bytes) of every HTML response record in a .warc or .warc.gz file. A file that
    ends early, or holds a gzip member over MAX_FILE_BYTES, yields the records before that point
    and appends the reason to `cut`."""
    cut = [] if cut is None else cut
    truncated = "truncated warc (records before the cut kept)"
    import zlib
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):   # one gzip member per record, usually; a cut archive keeps its prefix
        raw, parts = data, []
        while raw:
            z = zlib.decompressobj(wbits=31)
            try:
                part = z.decompress(raw, MAX_FILE_BYTES + 1)   # a bomb stops here, not in memory
            except zlib.error:
                part = b""
            if len(part) > MAX_FILE_BYTES:
                cut.append(f"too large: a warc record over {MAX_FILE_BYTES:,} bytes (records before it kept)")
                break
            parts.append(part)
            if not z.eof:
                cut.append(truncated)
                break
            raw = z.unused_data
        data = b"".join(parts)
    pos = 0
    while True:
        start = data.find(b"WARC/", pos)
        if start < 0:
            return
        head_end = data.find(b"\r\n\r\n", start)
        if head_end < 0:
            return
        headers = {}
        for line in data[start:head_end].split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            headers[k.strip().lower()] = v.strip()
        try:
            length = int(headers.get(b"content-length", b"0"))
        except ValueError:
            return
        body = data[head_end + 4:head_end + 4 + length]
        if len(body) < length:                     # the last record was cut off: not used
            cut += [] if cut else [truncated]
            return
        pos = head_end + 4 + length
        if headers.get(b"warc-type") != b"response":
            continue
        http_head, _, payload = body.partition(b"\r\n\r\n")
        if b"html" in http_head.lower() and payload:
            yield headers.get(b"warc-target-uri", b"").decode("utf-8", "replace"), payload
