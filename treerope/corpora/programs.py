"""Small programs (`programs`), in the spirit of the appendix's Python corpus (§4: 423,111 programs):
the top-level functions and classes of 3-60 lines of the standard library and installed packages,
each with the imports it uses, written in python.py's serialisation (its compact stream).

    python prepare.py programs          # top-level functions and classes of the standard library and packages
    python prepare.py programs --stream old   # the older programs stream (RESULTS.md's older rows)
"""
import ast
import collections
import functools
import hashlib
import sys
import sysconfig

from tqdm import tqdm

from treerope import tokenizer
from treerope.corpora import Corpus, build, find_files, worker_pool
from treerope.corpora.python import STUBS, drop_docstrings, fields, parsed, python_doc, statements
from treerope.corpora.text import source_text
from trees import Skip


def python_programs(source, min_lines=3, max_lines=60, stream="compact"):
    """Small programs cut from one module, in the spirit of the appendix's Python corpus (§4:
    423,111 programs; sibling rank p99 7): each top-level function or class of min_lines to
    max_lines lines, preceded by the module's top-level imports it uses, as [(qualname, source)].
    Compact: only small ones (is_small). Old stream: every one, with all the module's imports.
    A module that does not parse is a Skip, with python_doc's reasons."""
    tree = parsed(source)
    lines = source.splitlines()
    imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    out = []
    for s in tree.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([s.lineno] + [d.lineno for d in s.decorator_list])
            if not min_lines <= s.end_lineno - first + 1 <= max_lines:
                continue
            heads = imports if stream == "old" else used_imports(imports, s)
            if stream == "old" or is_small(heads + [drop_docstrings(s)]):
                body = lines[first - 1:s.end_lineno]
                out.append((s.name, "\n".join([ast.unparse(i) for i in heads] + body) + "\n"))
    return out


# Our reading of a small program (compact): no node with more than 20 children, where the fast plane's
# 0.316 rad per sibling wraps (appendix §5), and no string constant over 80 characters, a line.
MAX_CHILDREN, MAX_STRING = 20, 80


def is_small(statements):
    """True when no node of `statements` (docstrings dropped) has more than MAX_CHILDREN children
    in the serialisation and no string or bytes constant is longer than MAX_STRING."""
    for n in (n for s in statements for n in ast.walk(s)):
        if isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes)) and len(n.value) > MAX_STRING:
            return False
        if sum(len(v) if isinstance(v, list) else v is not None
               for v in (getattr(n, f, None) for f in fields(type(n).__name__)[1])) > MAX_CHILDREN:
            return False
    return True


def used_imports(imports, program):
    """The import statements cut to the names `program` mentions (a star binds none we can see;
    __future__ imports are the compiler's and stay); statements left with no name go."""
    mentioned = {n.id for n in ast.walk(program) if isinstance(n, ast.Name)}
    out = []
    for s in imports:
        future = isinstance(s, ast.ImportFrom) and s.module == "__future__"
        names = [a for a in s.names if future or (a.asname or a.name.split(".")[0]) in mentioned]
        if names:
            out.append(ast.ImportFrom(s.module, names, s.level) if isinstance(s, ast.ImportFrom)
                       else ast.Import(names))
    return out


def _programs_of(item, stream="compact"):
    """A module's programs as (module::qualname, source), a qualname defined again numbered (#2, #3:
    every name unique, so meta.json counts what the arrays hold); a module that cannot be read or
    parsed as one (name, Skip), counted as the python corpus counts it."""
    name, path = item
    try:
        if isinstance(path, Skip):
            raise path
        with open(path, "rb") as f:
            source = source_text(f.read())
        found = python_programs(source, stream=stream)
    except OSError as e:
        return [(name, Skip(f"unreadable ({e.strerror})"))]
    except Skip as e:
        return [(name, e)]
    seen = collections.Counter()
    out = []
    for q, p in found:
        seen[q] += 1
        out.append((f"{name}::{q}" + (f"#{seen[q]}" if seen[q] > 1 else ""), p.encode()))
    return out


def programs_sources(args):
    """Small programs (appendix §4's Python corpus is 423,111 programs): the top-level functions
    and classes of 3-60 lines of the standard library and installed packages, each with the
    imports it uses (python_programs; --stream old: all its module's). Named module::qualname,
    so one module's programs share a split."""
    dirs = args.src or [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]]
    modules = [(f"{i}/{n}", p) for i, d in enumerate(dirs)
               for n, p in find_files([d], (".py",), bool(args.src), STUBS)]
    with worker_pool(args.workers) as pool:
        cut = functools.partial(_programs_of, stream=args.stream)
        items = [x for found in tqdm(pool.imap(cut, modules, chunksize=16), total=len(modules),
                                     desc="programs", unit="module") for x in found]
    if all(isinstance(src, Skip) for _, src in items):
        sys.exit(f"error: no top-level functions or classes of 3-60 lines under {dirs}"
                 + ("" if args.src else "; pass --src DIR"))
    programs = [it for it in items if not isinstance(it[1], Skip)]
    if 0 < args.max_programs < len(programs):   # a fixed sample, the same programs on every run: by name
        print(f"note: a sample of {args.max_programs:,} of the {len(programs):,} programs found "
              "(--max_programs; 0 takes every one)")
        def by_name(it):
            return hashlib.sha1(it[0].encode("utf-8", "surrogatepass")).digest()
        skips = [it for it in items if isinstance(it[1], Skip)]
        items = sorted(sorted(programs, key=by_name)[:args.max_programs]) + skips
    return items, dirs


def build_programs(item, stream="compact"):
    return build(item, functools.partial(python_doc, stream=stream))


CORPORA = {   # the serialisation's sigils need a pattern of their own
    "programs": Corpus(programs_sources, build_programs, statements,
                       options=("units", "stream", "max_programs"),
                       attention=("ancestor",), pattern=tokenizer.CODE_PAT),
}
