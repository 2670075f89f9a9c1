"""A Doc becomes per-token fields (prepared.FIELDS): each token takes the node of its first byte that
has one, and with it the node's path, depth and index inside it; then the fields web pages never
have (sheets' copies and references, Python's symbols and statement grid, hRoPE's p, chat's grid,
web_sheets' source) and how a record restarts them (prepare.records). Numpy only.
"""
import numpy as np

import trees
from trees import LEVELS

# Doc fields web pages never have: fields_beyond_web below makes their per-token fields
BEYOND_WEB = ("copied_from", "ref", "ref_path", "symbol", "stmt", "char_p", "char_chat")


def token_coords(doc, ids, tok_len, node_coords=None):
    """Per-token coordinates of one Doc (`node_coords`: doc.node_coords() where the caller has it).
    A token belongs to the node of its first byte that has a node (for web text: its first non-space
    byte; sheets: separators belong to no node)."""
    node, char, byte_char, end = _token_nodes(doc, ids, tok_len)
    n = len(ids)
    depth_n, path_n = node_coords or doc.node_coords()
    out = {"pos": np.arange(n, dtype=np.int32)}
    out["path"] = np.where(node[:, None] >= 0, path_n[node], -1)
    out["depth"] = np.where(node >= 0, depth_n[node], 0).astype(np.int32)
    # within-node index: how many earlier tokens the same node has (node -1: absent)
    out["within"] = np.where(node >= 0, index_in_group(node), -1).astype(np.int32)
    out["kind"] = doc.char_kind[char] if doc.char_kind is not None else np.zeros(n, np.uint8)
    if doc.label is not None:
        out["label"] = np.where(node >= 0, doc.label[node], -1).astype(np.int32)
    if doc.source >= 0 or any(getattr(doc, f) is not None for f in BEYOND_WEB):
        # sheets, Python, the paragraph corpora, chat
        out.update(fields_beyond_web(doc, out["kind"], node, char, byte_char, end, path_n))
    out["node"] = node
    return out


def _token_nodes(doc, ids, tok_len):
    """(node, char, byte_char, end): per token its node (-1: none), the character that decides
    it and the byte after it; byte_char: the character of each byte of the text."""
    b = doc.text.encode("utf-8")
    if len(b) == len(doc.text):
        byte_char = np.arange(len(b))
    else:                                          # map bytes to characters
        byte_char = np.cumsum((np.frombuffer(b, np.uint8) & 0xC0) != 0x80) - 1
    byte_node = doc.char_node[byte_char]
    lens = tok_len[ids]
    end = np.cumsum(lens)
    start = end - lens
    idx = np.where(byte_node >= 0, np.arange(len(b)), len(b))
    nxt = np.minimum.accumulate(idx[::-1])[::-1]
    first = nxt[start]
    has = first < end
    at = np.minimum(np.where(has, first, start), len(b) - 1)
    return np.where(has, byte_node[at], -1), byte_char[at], byte_char, end


def index_in_group(keys):
    """Per entry of keys (n,), how many earlier entries have the same key."""
    n = len(keys)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    starts = np.r_[0, np.flatnonzero(sk[1:] != sk[:-1]) + 1]
    out = np.empty(n, np.int64)
    out[order] = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    return out


# ------------------------------------------------------------------- beyond web pages ----
def fields_beyond_web(doc, kind, node, char, byte_char, end, path_n):
    """{field: per-token array} for the fields above that `doc` has; `kind` (token_coords') comes
    back with its near copies cleared where the Doc records copies."""
    out = {}
    if doc.copied_from is not None:   # "copied from the cell above" counts only across >= 256 tokens
        out["kind"] = _clear_near_copies(doc, kind, char, byte_char, end)
    if doc.ref is not None or doc.ref_path is not None:   # a workbook without references has one too
        out["ref_path"] = _ref_paths(doc, node, path_n)
    if doc.symbol is not None:
        out["symbol"] = np.where(node >= 0, doc.symbol[node], -1).astype(np.int32)
    if doc.source >= 0:
        out["source"] = np.full(len(node), doc.source, np.int32)
    if doc.stmt is not None:   # the statement grid (this repository's reading of the paper's term):
        s = np.where(node >= 0, doc.stmt[node], -1)   # row = statement ordinal, column = token in it
        row = np.searchsorted(np.flatnonzero(doc.stmt == np.arange(len(doc.stmt))), s)
        out["grid"] = np.where((s >= 0)[:, None], np.stack([row, index_in_group(s)], 1), -1).astype(np.int32)
    if doc.char_p is not None:
        p = doc.char_p[char].astype(np.int64)
        p[:, 2] = _index_in_run(p[:, :2])        # p3: token index inside its sentence
        out["p"] = p
    if doc.char_chat is not None:                # position: token index inside its turn
        c = doc.char_chat[char].astype(np.int64)
        out["chat"] = np.concatenate([c, _index_in_run(c)[:, None]], 1)
    return out


def _clear_near_copies(doc, kind, char, byte_char, end):
    """kind without KIND_COPIED where the copied cell is fewer than COPY_DISTANCE tokens back."""
    char_first_byte = np.searchsorted(byte_char, np.arange(len(doc.text)))
    src = doc.copied_from[char]
    src_tok = np.searchsorted(end, char_first_byte[np.maximum(src, 0)], side="right")
    near = (src >= 0) & (np.arange(len(kind)) - src_tok < trees.COPY_DISTANCE)
    return np.where(near, kind & ~np.uint8(trees.KIND_COPIED), kind).astype(np.uint8)


def _ref_paths(doc, node, path_n):
    """(tokens, LEVELS) path of the node each token's node refers to, -1 where it refers to none."""
    ref_path = np.full((len(node), LEVELS), -1, np.int64)
    if doc.ref is not None:
        tgt = np.where(node >= 0, doc.ref[node], -1)
        ref_path[tgt >= 0] = path_n[tgt[tgt >= 0]]
    if doc.ref_path:                                  # sheets: explicit targets per node
        table = np.full((len(doc.parent) + 1, LEVELS), -1, np.int64)   # last row: no node
        for nid, p in doc.ref_path.items():
            table[nid, :len(p)] = p
        has = np.zeros(len(doc.parent) + 1, bool)
        has[list(doc.ref_path)] = True
        ref_path = np.where(has[node][:, None], table[node], ref_path)
    return ref_path


def _index_in_run(keys):
    """Per row of keys (n, k), its index in the run of equal consecutive rows it belongs to."""
    n = len(keys)
    starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(1)])
    return np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))


def restart(r, level1, p1_cap):
    """A record's fields as it restarts them (prepare.records). level1 (Python `--units record`): the
    level-1 sibling ranks count from the record's first top-level statement, and a reference whose
    target lies before the record loses its level-1 target. hRoPE's p: see below."""
    if level1:
        first = r["path"][0, 0]
        r["path"] = r["path"].copy()
        r["path"][:, 0] = np.where(r["path"][:, 0] >= 0, r["path"][:, 0] - first, -1)
        if "ref_path" in r:
            r["ref_path"] = r["ref_path"].copy()
            r["ref_path"][:, 0] = np.where(r["ref_path"][:, 0] >= first, r["ref_path"][:, 0] - first, -1)
    if "p" in r:   # a record starts a paragraph: p2/p3 of its first stretch from 0
        p = r["p"] = r["p"].copy()
        first_para, first_sent = p[:, 0] == p[0, 0], (p[:, :2] == p[0, :2]).all(1)
        p[first_sent, 2] -= p[0, 2]
        p[first_para, 1] -= p[0, 1]
        if p1_cap is not None:      # App. C.1 truncation, where the model sees p1
            np.minimum(p[:, 0], p1_cap, out=p[:, 0])
