"""Documents become trees: what every corpus shares. Each corpus's builder (corpora/) turns a
source into a `Doc` or raises `Skip`; here are Doc, the size limits, the token-kind flags and the
node coordinates every builder derives the same way.

A Doc is the text a model reads plus, for every character, the tree node that emitted it.
Per node we keep its parent, sibling rank and depth; the path (ranks from the root down) is
derived. Glossary terms follow the depth-perception appendix (§3): path, sibling rank, level,
depth, within-node index; hRoPE coordinates p1/p2/p3 follow the paragraph-boundaries paper §3.1.

No look-ahead (appendix §5): every builder walks its document in reading order, so a node's
rank, path, renaming and reference depend only on what precedes it.
"""
from dataclasses import dataclass

import numpy as np

LEVELS = 22   # path levels a token carries (appendix §5); rotary.LEVELS, which encodes them, is the same

FORMAT = 6   # what prepare.py writes: another is rebuilt by prepare.py, refused by train.py (REFERENCE.md)
MAX_WIDTH = 318   # the slow plane counts about 318 siblings before it wraps (appendix §5)

# token-kind flags (evaluate.py breaks the loss down by these)
KIND_AFTER_CLOSE = 1   # Python: first token right after a subtree of 2+ nodes closes
KIND_NEW_BLOCK = 2     # web: first token of a new text block
KIND_ROW_END = 4       # sheets: end of a row
KIND_COPIED = 8        # sheets: a value equal to the cell directly above, >= 256 tokens back
KIND_CELL_REF = 16     # sheets: part of a cell reference
KIND_AFTER_LEAF = 32   # Python: first token of a node whose predecessor is its sibling, a leaf
COPY_DISTANCE = 256    # "copied from the cell above across >= 256 tokens"
KIND_NAMES = {KIND_AFTER_CLOSE: "after_close", KIND_NEW_BLOCK: "new_block", KIND_ROW_END: "row_end",
              KIND_COPIED: "copied_above", KIND_CELL_REF: "cell_ref", KIND_AFTER_LEAF: "after_leaf"}


class Skip(Exception):
    """A document we cannot use; `reason` is counted in meta.json."""
    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


# ----------------------------------------------------------------------------- size policy ----
# Every reader works inside these caps, so prepare's memory and time stay a bounded multiple of the largest
# allowed document; a breach skips it with its own counted reason, "too large: ...", never truncates it.
MAX_FILE_BYTES = 64_000_000     # a file read whole
MAX_PAGE_BYTES = 16_000_000     # an HTML page, as bytes: lxml's tree grows with its elements
MAX_PYTHON_BYTES = 1_000_000    # a Python source file: parsing and writing it cost many bytes per byte
MAX_PART_BYTES = 64_000_000     # one zip part, uncompressed, as the central directory declares it
MAX_ZIP_BYTES = 256_000_000     # a zip's parts together, uncompressed
MAX_CELL_CHARS = 32_767         # a cell's value or formula: Excel's own cap
MAX_CELLS_READ = 2_097_152      # rows and cells openpyxl yields for a workbook, empty ones included: 2 sheets
MAX_TEXT_CHARS = 1_000_000      # one text node of a page: lxml keeps it with huge_tree
MAX_DOC_CHARS = 4_000_000       # a document's text: ~4,000 records of 1,024 tokens
MAX_DOC_TOKENS = 1_000_000      # a document's tokens


def too_large(what, cap, unit="characters"):
    """The Skip of a breached cap: one reason per cap, so meta.json counts them together."""
    return Skip(f"too large: {what} over {cap:,} {unit}")


def check_size(what, n, cap, unit="characters"):
    """Skip when n is over cap."""
    if n > cap:
        raise too_large(what, cap, unit)


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
        parent, rank = np.asarray(self.parent, np.int64), np.asarray(self.rank, np.int64)
        depth, up = np.ones(len(parent), np.int64), parent.copy()
        while (m := up >= 0).any():             # pointer jumping: hops to the root, doubling per pass
            depth[m], up[m] = depth[m] + depth[up[m]], up[up[m]]
        path = np.full((len(parent), LEVELS), -1, np.int64)
        for k, nodes in enumerate(np.split(np.argsort(depth), np.cumsum(np.bincount(depth))[1:-1]), 1):
            if k > 1:                           # parents are one level up: their paths are final
                path[nodes] = path[parent[nodes]]
            if k <= LEVELS:
                path[nodes, k - 1] = rank[nodes]
        return depth.astype(np.int32), path


def first_appearance(names):
    """Per node, its label as the order in which that name first appears in the document (0, 1,
    ...): the same causal numbering as symbol identity. 'Depth with a label' reads it (this
    repository's reading: the label is the node's type — Python AST class, the tag of the element
    holding a web text, a spreadsheet content kind)."""
    ids = {}
    return np.array([ids.setdefault(n, len(ids)) for n in names], np.int32)
