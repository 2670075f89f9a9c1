"""Python: the compact pre-order serialisation of each syntax tree (depth-perception appendix §4
"Python"), as whole modules (`python`; small programs cut from them: programs.py).

    python prepare.py python            # the CPython standard library
    python prepare.py python --src DIR  # any folder(s) of .py files

The record rule: a record may start at a top-level statement.

The serialisation (appendix §4): nodes in pre-order, parent first, separated by one space; no
brackets, no indentation, no newlines. Each node is self-delimiting:
    [=...]Type scalar scalar ...     any node (the type fixes how many scalars follow)
    [=...]identifier                 a Name (written `Name id` when id is an ast class name)
    [=...].attr  :name  @key         an Attribute, an arg (parameter), a keyword (@ alone: **)
    [=...]Add  Not  And  Lt          a BinOp, UnaryOp, BoolOp, one-operator Compare: the operator
    [=...]literal                    a Constant: its repr ('a b', b'x', 12, 1.5, True, ...) with
                                     raw newlines for \\n, u'x' for a u-string, `Constant inf`
                                     when repr is no literal
    [=...]~                          an absent child inside a list (Dict.keys, kw_defaults)
    [=...]^f ^^f $C !os !!a b |..m   compact stream (programs): def, async def, class, an alias
                                     (!! with its asname), from-import (dots: the level)
The marker `=` x k says the node is in its parent's child field k (0-based); it is written only
where the field differs from the previous sibling's (the first child: from field 0). The
nesting lives only in the depths, so decoding needs the text plus each node's depth
(decode_python). The root Module is implicit. Operators are scalars of their parent
(BinOp Add); expression contexts (Load/Store) are dropped, since ast.unparse does not read them.
The compact stream also drops docstrings and renames module-level names (REFERENCE.md).
"""
import ast
import functools
import re
import sys
import sysconfig
from dataclasses import dataclass, field

import numpy as np

from treerope import tokenizer
from treerope.corpora import Corpus, build, find_files
from treerope.corpora.text import source_text
from trees import (
    KIND_AFTER_CLOSE,
    KIND_AFTER_LEAF,
    MAX_PYTHON_BYTES,
    Doc,
    Skip,
    check_size,
    first_appearance,
)

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


_NOT_SCALAR = {("TypeAlias", "name")}   # Python 3.12's `type X = ...`: its name is an expression (a Name)


def _is_scalar(type_name, f):
    return (type_name, f) in _IDENT_LISTS or (type_name, f) in _CONSTANTS or f in _OPS or \
        f in _SCALARS and (type_name, f) not in _NOT_SCALAR


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


_AST_NAMES = {n for n in dir(ast)
              if isinstance(getattr(ast, n), type) and issubclass(getattr(ast, n), ast.AST)}
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
             **{o: "Compare" for o in ("Eq", "NotEq", "Lt", "LtE", "Gt", "GtE", "Is", "IsNot", "In",
                                       "NotIn")}}
_SIGIL = {"Attribute": ".", "arg": ":", "keyword": "@"}   # .attr, :x0 (a parameter), @key (key=...)
_FROM_SIGIL = {v: k for k, v in _SIGIL.items()}
# The compact stream's statement words, one pre-token each (tokenizer.CODE_PAT): ^f def f, ^^f async
# def f, $C class C, !os an alias (!!numpy np: with its asname), |..pkg from ..pkg (dots: the level).
_COMPACT = {"AsyncFunctionDef": "^^", "FunctionDef": "^", "ClassDef": "$", "alias": "!", "ImportFrom": "|"}


def _next_field(t, children, fi):
    """The field the next child is expected in: a single-valued field holds one child, so the
    next child moves on; a list field may hold more, so it stays."""
    return fi if _LIST_FIELD.get((t, children[fi]), False) else min(fi + 1, len(children) - 1)


def _node_text(node, t, values, compact):
    """A node's own text: a bare identifier for a Name, a bare literal for a Constant, a sigil
    word (compact: a def, class, alias or from-import too), else its type and scalars."""
    if t == "Name" and values[0] not in _AST_NAMES:
        return values[0]
    if compact and t in _COMPACT:
        return _compact_word(t, values)
    if t in _SIGIL:                    # one pre-token with the code pattern (tokenizer.CODE_PAT)
        return _SIGIL[t] + (values[0] if values[0] != "None" else "")
    if t in ("BinOp", "UnaryOp", "BoolOp") or (t == "Compare" and "," not in values[0]):
        return values[0]                  # the operator alone: Add, Not, And, Lt (each names one type)
    if t == "Constant":
        r = values[0]
        if _STRING.fullmatch(r):          # newlines stay raw: repr never writes one, so it is reversible
            raw = _ESCAPE.sub(lambda m: "\n" if m.group() == "\\n" else m.group(), r)
            return ("u" if node.kind == "u" else "") + raw
        if r in ("True", "False", "None", "...") or (r[0].isdigit() and _is_literal(r)):
            return r
    return " ".join([t] + values)


def _compact_word(t, values):
    if t == "alias":
        return "!" + values[0] if values[1] == "None" else f"!!{values[0]} {values[1]}"
    if t == "ImportFrom":
        return "|" + "." * int(values[1]) + (values[0] if values[0] != "None" else "")
    return _COMPACT[t] + values[0]


def _is_literal(r):
    try:
        ast.literal_eval(r)
        return True
    except (ValueError, SyntaxError):
        return False


@dataclass
class _Scope:
    """A renaming scope: a function, lambda or comprehension; the module in the compact stream
    (class bodies never: their names are attributes)."""
    kind: str                                   # 'module', 'function', 'comprehension', 'class'
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
    later text. The compact stream renames module-level names too (our reading): assignment
    targets, defs, classes, what an import binds (`import os as x0`); never class bodies. Each
    outermost function then numbers its locals after the module's names.
    """

    def __init__(self, rename, compact=False):
        self.rename, self.compact = rename, compact
        self.nodes, self.parent, self.rank = [], [], []     # node texts, in pre-order
        self.type_names, self.stmt = [], []                 # per node: AST class, innermost statement
        self.ref, self.symbol = [], []
        self.scopes = [_Scope("module")] if compact else []   # stack of _Scope
        self.counter = 0          # the next local's number in its outermost function (x0, x1, ...)
        self.module_count = 0     # the next module-level name's number
        self.var_def = {}         # variable id (unique in the document) -> defining node
        self.var_name = {}        # variable id -> its number n in the spelling xn
        self.var_symbol = {}      # variable id -> symbol id (order of first mention in the document)

    # -- scopes ------------------------------------------------------------------------------
    def _function_scopes(self):
        return [s for s in self.scopes if s.kind != "class"]

    def _in_function(self):
        return any(s.kind in ("function", "comprehension") for s in self.scopes)

    def _push(self, kind, restart):
        """Open a scope; an outermost one numbers its locals from the module's count (restart),
        or on from the last local, so no local spelling shadows a module-level one."""
        if not self._in_function():
            self.counter = self.module_count if restart else max(self.counter, self.module_count)
        self.scopes.append(_Scope(kind))

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
            self.var_def[v] = node_id
            if scope.kind == "module":
                self.var_name[v], self.module_count = self.module_count, self.module_count + 1
            else:
                self.var_name[v], self.counter = self.counter, self.counter + 1
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
        self.nodes[nid] = marker + _node_text(node, t, values, self.compact)
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
            self._push("class" if t == "ClassDef" else "function", restart=True)   # numbering restarts
            return True
        if t == "Lambda":
            self._push("function", restart=False)
            return True
        if t in _ORDER and self._function_scopes():
            self._push("comprehension", restart=False)
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
                    fs = [s for s in self.scopes if s.kind in ("function", "module")]
                    scope = fs[-1] if fs else None
                    if scope is None:
                        return v
                return self._bind(v, nid, scope)
            return self._use(v, nid)
        if (t == "arg" and f == "arg") or (t == "ExceptHandler" and f == "name") or \
           (t in ("MatchAs", "MatchStar") and f == "name") or (t == "MatchMapping" and f == "rest"):
            return self._bind(v, nid)
        if t == "alias" and self.scopes and self.scopes[-1].kind in ("function", "module") \
                and not getattr(node, "_future", False):   # a __future__ feature is no binding
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
            return [self._global(name, nid) for name in v]
        return v

    def _global(self, name, nid):
        """`global name` in a function: the module-level variable where the module renamed it,
        else the name kept there and in the module."""
        module = self.scopes[0] if self.scopes and self.scopes[0].kind == "module" else None
        if module and len(self.scopes) > 1 and name in module.names and name not in module.frozen:
            self.scopes[-1].names[name] = module.names[name]
            return self._note(module.names[name], nid, is_def=False)
        for s in self.scopes[-1:] + ([module] if module else []):
            s.frozen.add(name)
        return name


def _mark(tree):
    """Flag what the writer must see from above: walrus targets, __future__ imports."""
    for n in ast.walk(tree):
        if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
            n.target._walrus = True
        if isinstance(n, ast.ImportFrom) and n.module == "__future__":
            for a in n.names:
                a._future = True


def drop_docstrings(tree):
    """Our reading of a program (the compact stream): its code without docstrings, which are
    documentation; a body left empty gets `pass`."""
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and ast.get_docstring(n, clean=False) is not None:
            n.body = n.body[1:] or [ast.Pass()]
    return tree


def parsed(source):
    """source's module tree, or a Skip naming why it does not parse."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        raise Skip("syntax error")
    except (RecursionError, MemoryError):
        raise Skip("too deeply nested")


def python_doc(source, rename=True, stream="old"):
    """Python source (str or bytes) -> Doc. Raises Skip for unusable input. stream "compact":
    sigil words for defs, classes and imports, docstrings dropped, module-level names renamed."""
    check_size("Python source", len(source), MAX_PYTHON_BYTES, "bytes")
    source = source_text(source)
    if not source.strip():
        raise Skip("empty")
    tree = parsed(source)
    if not tree.body:
        raise Skip("empty")
    if stream == "compact":
        drop_docstrings(tree)
    _mark(tree)
    w = _PythonWriter(rename, compact=stream == "compact")
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
    doc.char_kind = _close_kinds(doc.node_coords()[0], lengths, len(text))
    return doc


def _close_kinds(depth, lengths, n_chars):
    """Per character, KIND_AFTER_CLOSE or KIND_AFTER_LEAF where a node's text (its space) starts.

    The appendix (§2, "Where the gain lands") names "tokens right after a subtree closes" and
    defines it no further. Our reading: a node shallower than its predecessor, so the subtree
    the predecessor ended had 2+ nodes (after_close). A node as deep as its predecessor follows
    a leaf sibling, a one-node subtree, counted apart (after_leaf). A node deeper than its
    predecessor is its child: nothing closed. Each depends only on the node and its predecessor."""
    kind = np.zeros(n_chars, np.uint8)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    kind[starts[1:][depth[1:] < depth[:-1]]] = KIND_AFTER_CLOSE
    kind[starts[1:][depth[1:] == depth[:-1]]] = KIND_AFTER_LEAF
    return kind


def canonical_python(source, rename=True, stream="old"):
    """The reference the round trip reproduces: ast.unparse of the parsed tree (compact: without
    docstrings), with names renamed exactly as the serialisation renames them when `rename` is set."""
    doc = python_doc(source, rename, stream)   # applies the renaming (and drop) to a fresh tree
    return ast.unparse(decode_python(doc.text, doc.node_coords()[0].tolist()))


def parents_from_depth(depths):
    """Appendix §5 'Depth and the tree': in a pre-order serialisation a node's parent is the
    nearest preceding node one level shallower. Returns the reconstructed parent of each node."""
    last_at, out = {}, []
    for i, d in enumerate(depths):
        out.append(last_at.get(d - 1, -1) if d > 1 else -1)
        last_at[d] = i
    return out


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
        node, pos = _decode_node(head, text, pos)
        nodes.append(node)
        cur = getattr(owner, slot, None)
        if isinstance(cur, list):
            cur.append(node)
        else:
            setattr(owner, slot, node)
    if pos != len(text):
        raise ValueError(f"{len(depths)} depths but text remains at character {pos}")
    return ast.fix_missing_locations(module)


def _decode_node(head, text, pos):
    """The node a head writes (None for `~`), its scalars read from the text after pos -> (node, pos)."""
    if head == "~":
        return None, pos
    if head in _OP_OWNER:                 # BinOp, UnaryOp, BoolOp or Compare by its operator
        t = _OP_OWNER[head]
        f = fields(t)[0][0]
        node = getattr(ast, t)(**{f: _scalar_value(t, f, head)})
    elif head[0] in "^$!|":
        node, pos = _compact_node(head, text, pos)
    elif head[0] in _FROM_SIGIL and head != "...":
        t = _FROM_SIGIL[head[0]]
        node = getattr(ast, t)(**{fields(t)[0][0]: head[1:] or None})
    elif head in _AST_NAMES:
        node = getattr(ast, head)()
        for f in fields(head)[0]:
            if f != "kind":
                word, pos = _word(text, pos + 1)
                setattr(node, f, _scalar_value(head, f, word))
        if head == "Constant":
            node.kind = None
    elif _STRING.fullmatch(head) or head[0].isdigit() or head in ("True", "False", "None", "..."):
        node = ast.Constant(value=_scalar_value("Constant", "value", head.replace("\n", "\\n")),
                            kind="u" if head[0] in "uU" else None)
    else:
        node = ast.Name(id=head)
    cls = type(node)
    for f in cls._fields:                 # list fields start empty, the rest None
        if not hasattr(node, f):
            setattr(node, f, [] if _LIST_FIELD.get((cls.__name__, f), False) else None)
    if "ctx" in cls._fields:
        node.ctx = ast.Load()
    return node, pos


def _compact_node(head, text, pos):
    """The node a compact sigil word writes (_compact_word) -> (node, pos); !! reads the asname."""
    if head.startswith("!!"):
        asname, pos = _word(text, pos + 1)
        return ast.alias(name=head[2:], asname=asname), pos
    if head[0] == "!":
        return ast.alias(name=head[1:], asname=None), pos
    if head[0] == "|":
        module = head[1:].lstrip(".")
        return ast.ImportFrom(module=module or None, level=len(head) - 1 - len(module)), pos
    t = "AsyncFunctionDef" if head.startswith("^^") else "FunctionDef" if head[0] == "^" else "ClassDef"
    return getattr(ast, t)(name=head.lstrip("^$")), pos


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


STUBS = {".pyi": "a type stub (.pyi), not a module"}   # given in --src: counted, not read


def python_sources(args):
    dirs = args.src or [sysconfig.get_paths()["stdlib"]]
    files = find_files(dirs, (".py",), bool(args.src), STUBS)
    if not files:
        sys.exit(f"error: no .py files under {dirs}" + ("" if args.src else "; pass --src DIR"))
    return files, dirs


def statements(c, doc):
    """Where a record may start: a top-level statement."""
    return np.r_[True, c["node"][1:] != c["node"][:-1]] & (c["depth"] == 1)


build_python = functools.partial(build, builder=python_doc)


CORPORA = {   # the serialisation's sigils need a pattern of their own
    "python": Corpus(python_sources, build_python, statements, options=("units",), attention=("ancestor",),
                     pattern=tokenizer.CODE_PAT),
}
