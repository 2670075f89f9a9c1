"""Documents become trees: one builder per corpus, each `source -> Doc` or a `Skip`.

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
import warnings
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


def web_doc(html, max_levels=LEVELS, max_width=MAX_WIDTH):
    """HTML (bytes or str) -> Doc. Nodes are retained elements and text runs with a non-space
    character; paths start at the children of body; only text emits characters, so every
    token-carrying node is a leaf. Pages deeper than 22 levels or wider than 318 siblings are
    skipped (appendix §4 "What is excluded")."""
    import lxml.etree
    import lxml.html
    if isinstance(html, bytes) and html[:2] in (b"\xff\xfe", b"\xfe\xff"):   # UTF-16 has NUL bytes
        html = html.decode("utf-16", "replace")
    elif isinstance(html, bytes) and b"\0" in html[:8192]:
        raise Skip("binary (NUL bytes)")
    check_size("a page", len(html), MAX_PAGE_BYTES, "bytes")
    try:   # huge_tree: past 10 MB lxml would drop a text node silently; our caps bound it instead
        root = lxml.html.document_fromstring(html, parser=lxml.html.HTMLParser(huge_tree=True))
    except (lxml.etree.ParserError, ValueError):
        raise Skip("empty or unparsable html")
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


# ---------------------------------------------------------------------------------------------
# hRoPE paragraph corpora (paragraph-boundaries paper §3.1, §3.4, App. C.1)
#
# Every character carries (p1, p2): paragraph (or code block) index in the document and
# sentence (or line) index in its paragraph; p3, the token's index in its sentence, is filled
# per token by prepare.py. The tree is the same hierarchy: paragraphs at depth 1, their
# sentences at depth 2. Separators (the blank line, the space between sentences, a newline)
# belong to no node and keep the (p1, p2) of the text before them, so a coordinate never
# depends on text that follows it.
# ---------------------------------------------------------------------------------------------
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")   # App. C.1, WikiText-2
WIKI_TITLE = re.compile(r"^\s*=\s[^=].*[^=]\s=\s*$")         # a top-level heading starts a document
WIKI_HEADING = re.compile(r"^\s*(=\s)+.*(\s=)+\s*$")
MIN_PARAGRAPH = 20                                          # shorter paragraphs are dropped


def _hier_doc(text, spans):
    """spans: (start, end, p1, p2) character ranges in reading order, one node each."""
    n = len(text)
    char_node = np.full(n, -1, np.int32)
    parent, rank, para_node = [], [], {}
    for start, end, p1, p2 in spans:
        if p1 not in para_node:
            para_node[p1] = len(parent)
            parent.append(-1)
            rank.append(p1)
        char_node[start:end] = len(parent)
        parent.append(para_node[p1])
        rank.append(p2)
    # every character takes the (p1, p2) of the last span started at or before it, so the
    # separators keep the coordinates of the text before them
    starts = np.array([s[0] for s in spans])
    latest = np.searchsorted(starts, np.arange(n), side="right") - 1
    char_p = np.zeros((n, 3), np.int32)
    char_p[:, :2] = np.where(latest[:, None] >= 0, np.array([s[2:] for s in spans])[latest], 0)
    return Doc(text, char_node, np.asarray(parent, np.int32), np.asarray(rank, np.int32), char_p=char_p)


def paragraphs_doc(paragraphs, min_chars=MIN_PARAGRAPH):
    """Paragraph strings -> Doc: paragraphs under min_chars dropped, sentences split (App. C.1),
    the paragraphs joined by one blank line."""
    paragraphs = [" ".join(p.split()) for p in paragraphs]
    paragraphs = [p for p in paragraphs if len(p) >= max(min_chars, 1)]
    if not paragraphs:
        raise Skip(f"no paragraph of {min_chars}+ characters")
    text, spans, at = [], [], 0
    for p1, para in enumerate(paragraphs):
        if p1:
            text.append("\n\n")
            at += 2
        s = 0
        for p2, m in enumerate(list(SENTENCE_END.finditer(para)) + [None]):
            e = m.start() if m else len(para)
            spans.append((at + s, at + e, p1, p2))
            s = m.end() if m else s
        text.append(para)
        at += len(para)
    return _hier_doc("".join(text), spans)


def wikitext_documents(text):
    """WikiText-style text -> [(title, paragraphs)]: a single-equals heading starts a document,
    heading lines are discarded, paragraphs split on blank lines, @-@ escapes normalised."""
    text = re.sub(r" @([-,.])@ ", r"\1", text)
    docs = []
    for line in text.split("\n"):
        if WIKI_TITLE.match(line):
            docs.append([line.strip(" =\t"), []])
        elif not docs:
            docs.append(["", []])
        if not WIKI_HEADING.match(line):
            docs[-1][1].append(line)
    return [(title, re.split(r"\n\s*\n", "\n".join(lines))) for title, lines in docs]


# reStructuredText: prose survives, markup and code do not (python3-doc's _sources)
_RST_ADORNMENT = re.compile(r"^([=\-~^\"'`#*+.:_<>])\1{2,}\s*$")
_RST_DIRECTIVE = re.compile(r"^(\s*)\.\.(?=\s|$)(\s+([\w:-]+)::)?")
_RST_FIELD = re.compile(r"^:[\w .-]+:(\s|$)")
_RST_CODE_DIRECTIVES = {"code-block", "sourcecode", "code", "literalinclude", "productionlist", "doctest",
                        "testcode", "testoutput", "testsetup", "testcleanup", "toctree", "image", "figure",
                        "csv-table", "list-table", "table", "raw", "highlight", "index", "math", "graphviz",
                        "only", "include", "opcode", "cmdoption", "option"}
_RST_ADMONITIONS = {"note", "warning", "seealso", "important", "tip", "caution", "attention", "danger",
                    "impl-detail", "versionadded", "versionchanged", "deprecated", "deprecated-removed"}
_RST_ROLE = re.compile(r":[\w:+-]+:`~?([^`<]*?)\s*(<[^`]*>)?`")
_RST_LINK = re.compile(r"`([^`<]+?)\s*<[^`]*>`__?")


def rst_paragraphs(text):
    """Prose paragraphs of a reStructuredText source: headings, directives (except the bodies of
    description/admonition directives), literal blocks after '::', doctests, tables, comments
    and option lines are dropped; inline roles and links keep their text."""
    lines = text.expandtabs().split("\n")
    paras, cur, skip_indent, literal_after, continued = [], [], None, False, False

    def flush():
        if cur:
            paras.append(" ".join(cur))
            cur.clear()

    for i, line in enumerate(lines):
        ind = len(line) - len(line.lstrip())
        if not line.strip():
            if cur and cur[-1].endswith("::"):
                literal_after = True
            flush()
            continue
        if skip_indent is not None:
            if ind > skip_indent:
                continue
            skip_indent = None
        if literal_after:                       # the indented block after '::' is code
            literal_after = False
            skip_indent = ind - 1 if ind > 0 else None
            if skip_indent is not None:
                continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if continued:                           # a signature continued with a backslash
            continued = line.rstrip().endswith("\\")
            continue
        d = _RST_DIRECTIVE.match(line)
        if d:
            flush()
            if not d.group(2) or d.group(3) in _RST_CODE_DIRECTIVES:   # comment or code: drop body
                skip_indent = ind
            elif d.group(3) in _RST_ADMONITIONS and line[d.end():].strip():
                cur.append(line[d.end():].strip())                     # '.. note:: text'
            continued = line.rstrip().endswith("\\")
            continue
        s = line.strip()
        if (_RST_ADORNMENT.match(s) or _RST_ADORNMENT.match(nxt.strip()) and not cur
                or s.startswith((">>>", "+-", "|")) or _RST_FIELD.match(s) or re.fullmatch(r"[=\s]+", s)):
            flush()
            continue
        item = re.match(r"^([*+-]|\d+\.|#\.|\(\w\))\s+", s)
        if item:                                # a list item starts its own paragraph
            flush()
            s = s[item.end():]
        cur.append(s)
    flush()
    out = []
    for p in paras:
        p = _RST_LINK.sub(r"\1", _RST_ROLE.sub(r"\1", p))
        p = re.sub(r"``([^`]*)``", r"\1", p)
        p = re.sub(r"\*\*([^*]+)\*\*|\*([^*]+)\*", lambda m: m.group(1) or m.group(2), p)
        p = re.sub(r"`([^`]+)`__?", r"\1", p)
        p = re.sub(r"\s*\[#[\w-]*\]_|\\ ", "", p)
        p = p.replace("`", "")
        p = re.sub(r"::$", ":", p)
        out.append(p)
    return out


def prose_doc(raw, fmt="text"):
    """Bytes of one prose document -> Doc. fmt 'rst' cleans reStructuredText markup first."""
    text = source_text(raw)
    return paragraphs_doc(rst_paragraphs(text) if fmt == "rst" else re.split(r"\n\s*\n", text))


def code_doc(raw):
    """Python source -> Doc with p1 = blank-line-separated block, p2 = line in its block
    (App. C.1 'Code'); files with fewer than 2 blocks are excluded. The text is unchanged."""
    text = source_text(raw)
    spans, p1, p2, at, gap = [], -1, 0, 0, True
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if body.strip():
            if gap:
                p1, p2, gap = p1 + 1, 0, False
            else:
                p2 += 1
            spans.append((at, at + len(body), p1, p2))
        else:
            gap = True
        at += len(line)
    if p1 < 1:
        raise Skip("fewer than 2 blocks")
    return _hier_doc(text, spans)


# OpenWebText's stand-in (App. C.1 "OpenWebText"; newspaper's extraction, our reading): the main
# text of a page is what is left after markup a reader skips. A paragraph is one text block (the
# text between two WEB_BLOCKS boundaries, as `web` splits it); headings, code listings (pre) and
# link lists are not paragraphs; sentences split as WikiText-2's; no paragraph length filter
# (C.1: "we do not apply an additional per-paragraph character-length filter").
WEBTEXT_DROP = WEB_SKIP | {"nav", "header", "footer", "aside", "form", "button", "select", "menu", "pre", "title",
                           "h1", "h2", "h3", "h4", "h5", "h6"}
WEBTEXT_BOILERPLATE = re.compile(r"nav|menu|sidebar|footer|header|breadcrumb|related|banner|cookie|skip|\btoc", re.I)


def webtext_paragraphs(html):
    """HTML (bytes or str) -> its main-text paragraphs. The first <main>, <article> or
    role="main" element is the page's text where there is one, else <body>. Dropped: WEBTEXT_DROP
    elements, elements whose class, id or role names navigation or boilerplate, and text blocks
    more than half of whose characters are link text (menus, indexes, 'next | previous')."""
    import lxml.etree
    import lxml.html
    if isinstance(html, bytes) and html[:2] in (b"\xff\xfe", b"\xfe\xff"):
        html = html.decode("utf-16", "replace")
    elif isinstance(html, bytes) and b"\0" in html[:8192]:
        raise Skip("binary (NUL bytes)")
    try:
        root = lxml.html.document_fromstring(html)
    except (lxml.etree.ParserError, ValueError):
        raise Skip("empty or unparsable html")
    main = root.xpath("//main | //article | //*[@role='main']")
    paras, cur = [], []                     # cur: (text, in a link) runs of the open block

    def flush():
        text = "".join(t for t, _ in cur)
        chars = sum(len("".join(t.split())) for t, _ in cur)
        links = sum(len("".join(t.split())) for t, link in cur if link)
        if chars and links <= chars / 2:
            paras.append(" ".join(text.split()))
        cur.clear()

    def walk(el, link):
        for text, child in [(el.text, None)] + [(c.tail, c) for c in el]:
            if child is not None and isinstance(child.tag, str):
                tag = child.tag.lower()
                marks = " ".join(child.get(k, "") for k in ("class", "id", "role"))
                if tag not in WEBTEXT_DROP and not WEBTEXT_BOILERPLATE.search(marks):
                    if tag in WEB_BLOCKS:
                        flush()
                    walk(child, link or tag == "a")
                    if tag in WEB_BLOCKS:
                        flush()
            if text:
                cur.append((text, link))

    start = main[0] if main else root.find("body")
    walk(root if start is None else start, False)
    flush()
    return paras


def webtext_doc(raw):
    """An HTML page -> Doc of its main-text paragraphs (p1) and sentences (p2), as prose."""
    paras = webtext_paragraphs(raw)
    if not paras:
        raise Skip("no main text")
    return paragraphs_doc(paras, min_chars=1)


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


# ---------------------------------------------------------------------------------------------
# JSON: objects, members, arrays and values as nodes, written as compact JSON (beyond the papers)
#
# An object's children are its members (rank = member index); a member writes `"key":` and has
# one child, its value; an array's children are its values. A container writes its brackets and
# the commas between its children; a scalar writes itself. The nodes are assigned by a scanner
# that reads the text left to right and decides each character's node from the text up to and
# including it (appendix §5's no-look-ahead rule), so sample.py can call it on a growing text.
# ---------------------------------------------------------------------------------------------
def json_doc(raw, max_levels=LEVELS, max_width=MAX_WIDTH):
    """Bytes of a .json file -> Doc of its compact form (json.loads of the text equals the
    input's). Documents deeper than 22 levels or wider than 318 siblings are skipped, as web
    pages are (a member is a level: `{"a": 1}` puts 1 at depth 3)."""
    import json
    text = source_text(raw)
    def no_constant(name):          # NaN and Infinity: Python reads them, JSON has no such values
        raise ValueError(f"{name} is not json")
    try:
        value = json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise Skip("deeper than 22 levels")
    except ValueError as e:
        raise Skip(f"invalid json ({getattr(e, 'msg', str(e)).lower()})")
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    longest = max((len(s) for s in _json_strings(value)), default=0)
    check_size("a json string", longest, MAX_TEXT_CHARS)            # one value, as a page's text node
    doc = json_coords(text)
    if (doc.rank >= max_width).any():
        raise Skip(f"wider than {max_width} siblings")
    if doc.node_coords()[0].max() > max_levels:
        raise Skip(f"deeper than {max_levels} levels")
    return doc


def _json_strings(value):
    """Every key and string value of a parsed JSON document."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            yield from v
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


_JSON_SCALAR = set("0123456789+-.eEtruefalsn")   # the characters numbers, true, false and null use


def json_coords(text):
    """Compact JSON text, or any prefix of it (a sampler's text so far) -> Doc. Each character's
    node depends only on the characters before it and itself."""
    parent, rank, types = [], [], []
    char_node = np.full(len(text), -1, np.int32)
    stack = []          # open nodes: [node, type, children so far]
    string = None       # node owning the open string, or None
    escaped = scalar = False

    def new(typ):       # a node at the current value position
        top = stack[-1] if stack else None
        r = top[2] if top else 0
        if top:
            top[2] += 1
        parent.append(top[0] if top else -1)
        rank.append(r)
        types.append(typ)
        return len(parent) - 1

    def close():        # a value ended: a member with its value is complete too
        if stack and stack[-1][1] == "member" and stack[-1][2]:
            stack.pop()

    for i, c in enumerate(text):
        if string is not None:
            char_node[i] = string
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                string = None
                if types[char_node[i]] != "member":
                    close()
            continue
        if scalar:
            if c in _JSON_SCALAR:
                char_node[i] = len(parent) - 1
                continue
            scalar = False
            close()
        top = stack[-1] if stack else None
        if c in "{[":
            nid = new("object" if c == "{" else "array")
            stack.append([nid, types[nid], 0])
            char_node[i] = nid
        elif c in "}]" and top:
            char_node[i] = top[0]
            if top[1] != "member":
                stack.pop()
                close()
        elif c == '"' and top and top[1] == "object":       # a key opens a member
            nid = new("member")
            stack.append([nid, "member", 0])
            char_node[i] = string = nid
        elif c == '"':
            char_node[i] = string = new("string")
        elif c in _JSON_SCALAR:
            char_node[i] = new("number" if c in "0123456789-" else {"t": "true", "f": "false"}.get(c, "null"))
            scalar = True
        elif top:                                            # , : and anything else: the open node
            char_node[i] = top[0]
    return Doc(text, char_node, np.asarray(parent, np.int32), np.asarray(rank, np.int32),
               label=first_appearance(types))


# ---------------------------------------------------------------------------------------------
# XML: elements, attributes and text as nodes, written as canonical XML (beyond the papers)
#
# The text is the input's C14N form (attributes sorted, namespaces kept, empty elements written
# out, comments dropped). An element writes its tag name, the `>` of its start tag and its end
# tag; its children are its attributes (each writes ` name="value"`, from the space), then its
# content: text runs and child elements in order. A `<` belongs to no node: only the character
# after it says whether a child starts or the element ends (a token takes the node of its first
# byte that has one, as web text does). Labels are node kinds (element, attribute, text, pi),
# not tag names, which are known only when the name ends. A scanner assigns the nodes, each
# character from the text up to it, so sample.py can call it on a growing text.
# ---------------------------------------------------------------------------------------------
def xml_doc(raw, max_levels=LEVELS, max_width=MAX_WIDTH):
    """Bytes of an XML file -> Doc of its canonical form. No DTD is loaded and nothing is fetched;
    documents deeper than 22 levels or wider than 318 siblings are skipped, as web pages are."""
    import lxml.etree
    check_size("a page", len(raw), MAX_PAGE_BYTES, "bytes")        # lxml's memory, as for HTML
    # huge_tree: past 10 MB lxml would refuse a text node as "invalid"; our caps bound it instead
    parser = lxml.etree.XMLParser(no_network=True, load_dtd=False, remove_comments=True, huge_tree=True)
    try:
        tree = lxml.etree.fromstring(raw, parser).getroottree()
        for node in tree.iter():
            for s in (node.text, node.tail, *node.attrib.values()):
                check_size("a text node", len(s or ""), MAX_TEXT_CHARS)
        text = lxml.etree.tostring(tree, method="c14n", with_comments=False).decode("utf-8")
        check_size("a document", len(text), MAX_DOC_CHARS)
    except lxml.etree.XMLSyntaxError as e:      # libxml2's error type, e.g. ERR_TAG_NAME_MISMATCH
        kind = e.error_log.last_error.type_name if e.error_log else "ERR_SYNTAX"   # or WAR_…
        raise Skip(f"invalid xml ({kind.split('_', 1)[1].replace('_', ' ').lower()})")
    except (lxml.etree.C14NError, ValueError):
        raise Skip("invalid xml (no canonical form)")
    doc = xml_coords(text)
    if (doc.rank >= max_width).any():
        raise Skip(f"wider than {max_width} siblings")
    if doc.node_coords()[0].max(initial=0) > max_levels:
        raise Skip(f"deeper than {max_levels} levels")
    return doc


def xml_coords(text):
    """Canonical XML text, or any prefix of it -> Doc. Each character's node depends only on the
    characters before it and itself."""
    parent, rank, kinds = [], [], []
    char_node = np.full(len(text), -1, np.int32)
    stack = []                  # open elements: [node, children so far]
    state, node, quote = "content", -1, None

    def new(kind):
        top = stack[-1] if stack else [-1, sum(p < 0 for p in parent)]   # the root's siblings: pis
        parent.append(top[0])
        rank.append(top[1])
        top[1] += 1
        kinds.append(kind)
        return len(parent) - 1

    for i, c in enumerate(text):
        if state == "content":
            if c == "<":
                state, node = "lt", -1
                continue
            if node < 0 or kinds[node] != "text":
                node = new("text") if stack else -1     # outside the root element: separators
            char_node[i] = node
        elif state == "lt":                             # the character after `<` decides
            if c == "/":
                state, node = "end", stack[-1][0] if stack else -1
            elif c in "?!":
                state, node = "pi", new("pi")
            else:
                node = new("element")
                stack.append([node, 0])
                state = "name"
            char_node[i] = node
        elif state == "name":                           # a start tag: name, attributes, `>`
            if c == " ":
                node = new("attribute")
                state = "attribute"
            elif c == ">":
                node, state = stack[-1][0], "content"
                char_node[i] = node
                node = -1
                continue
            char_node[i] = node
        elif state == "attribute":
            char_node[i] = node
            if quote:
                quote = None if c == quote else quote
            elif c in "\"'":
                quote = c
            elif c in " >":                             # the next attribute, or the tag's end
                char_node[i] = stack[-1][0] if c == ">" else new("attribute")
                node = char_node[i]
                if c == ">":
                    state, node = "content", -1
        elif state == "end":                            # `</name>`: the element's own end tag
            char_node[i] = node
            if c == ">":
                stack.pop()
                state, node = "content", -1
        else:                                           # a processing instruction, to `?>`
            char_node[i] = node
            if c == ">" and text[i - 1] in "?-]":
                state, node = "content", -1
    return Doc(text, char_node, np.asarray(parent, np.int32), np.asarray(rank, np.int32),
               label=first_appearance(kinds))


# ---------------------------------------------------------------------------------------------
# Markdown: sections by ATX heading level, blocks, sentences; also hRoPE's p1/p2 (beyond the papers)
#
# A `# ` .. `###### ` heading opens a section under the nearest open section of a lower level
# (document -> section -> subsection); the section writes its title. Blocks (paragraphs, lists,
# code) are runs of lines separated by blank lines (inside a ``` or ~~~ fence a blank line does
# not separate) and are children of the innermost section; sentences are children of blocks and
# write the text. p1 = block (a heading counts), p2 = sentence in it, as App. C.1's rules for
# WikiText: a sentence starts at an uppercase letter or quote after [.!?] and whitespace.
# Readings, so that each character's node follows from the text up to it: the `#` run of a
# heading belongs to no node (only the space after it makes the line a heading); a setext
# heading (a title underlined by === or ---) is a paragraph, since only the line after it
# would say otherwise; a fence that opens inside a paragraph stays in that paragraph's block.
# ---------------------------------------------------------------------------------------------
def markdown_doc(raw):
    """Bytes of a Markdown file -> Doc (the text unchanged)."""
    text = source_text(raw).replace("\r\n", "\n")
    if not text.strip():
        raise Skip("empty")
    return markdown_coords(text)


def markdown_coords(text):
    """Markdown text, or any prefix of it -> Doc with p1/p2; no look-ahead."""
    parent, rank, kinds, children = [], [], [], {-1: 0}
    char_node = np.full(len(text), -1, np.int32)
    char_p = np.zeros((len(text), 3), np.int32)
    sections = []                # open sections: (level, node)
    block = sentence = -1        # open block and sentence nodes
    p1, p2 = -1, 0
    line_start, hashes, blank, fence, ticks, ended, gap = True, 0, True, None, "", 0, False

    def new(p, kind):
        parent.append(p)
        rank.append(children[p])
        children[p] += 1
        children[len(parent) - 1] = 0
        kinds.append(kind)
        return len(parent) - 1

    for i, c in enumerate(text):
        if line_start and c == "#" and fence is None:
            hashes += 1                                   # a heading's marks: no node yet
            char_p[i] = (max(p1, 0), p2, 0)
            continue
        if hashes:
            if c == " " and hashes <= 6:                  # a heading: its section writes the title
                while sections and sections[-1][0] >= hashes:
                    sections.pop()
                sec = new(sections[-1][1] if sections else -1, "section")
                sections.append((hashes, sec))
                block, sentence, p1, p2 = -1, sec, p1 + 1, 0
                hashes, line_start, gap = 0, False, False
                char_node[i], char_p[i] = sec, (p1, p2, 0)
                continue
            hashes = 0                                    # `#tag`: the line is text after all
        if c == "\n":
            if blank and fence is None:
                gap = True                                # a blank line ends the block
            elif sentence >= 0 and block < 0:
                gap = True                                # a heading line ends with its newline
            char_node[i], char_p[i] = sentence, (max(p1, 0), p2, 0)
            line_start, blank, ticks, ended = True, True, "", 2 if ended else 0
            continue
        if line_start and c in "`~" or ticks:             # a fence line: ``` or ~~~ opens or closes
            ticks = ticks + c if c in "`~" and (not ticks or c == ticks[0]) else ticks
            if len(ticks) == 3 and c in "`~":
                fence = None if fence == ticks else fence or ticks
        if not c.isspace():
            if gap or sentence < 0:                       # a new block, under the innermost section
                block = new(sections[-1][1] if sections else -1, "block")
                sentence, p1, p2, gap = new(block, "sentence"), p1 + 1, 0, False
            elif ended == 2 and block >= 0 and (c.isupper() or c in "\"'"):
                sentence, p2 = new(block, "sentence"), p2 + 1
            ended, blank = int(c in ".!?"), False         # 1: after [.!?]; 2: and whitespace since
        elif ended:
            ended = 2
        line_start = False
        char_node[i], char_p[i] = sentence, (max(p1, 0), p2, 0)
    return Doc(text, char_node, np.asarray(parent, np.int32), np.asarray(rank, np.int32),
               char_p=char_p, label=first_appearance(kinds))
