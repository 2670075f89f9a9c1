"""meta.json's figures for what web pages never hold, and prepare.py's note on them: nodes wider
than the web limit (kept here, skipped on web pages), the oddities a corpus counts (notes), explicit
reference targets (workbooks), the tokens reference rotation moves (appendix §4: 20.6% on Python)
and a corpus's record statistics (paper 004: p1). prepare.py imports it only where a tally holds one.
"""
import numpy as np

import trees


def reference_tally(held):
    """Tokens that reference rotation moves (appendix §4: 20.6% on Python), as configs counts them."""
    from configs import reference_counts  # in the main process: configs imports torch
    path, ref = (np.concatenate([r[k] for r in held]) for k in ("path", "ref_path"))
    c = reference_counts(path, ref, np.cumsum([0] + [len(r["path"]) for r in held[:-1]]))
    return {"held": 1, "affected": c["affected"], "reference_tokens": c["tokens"]}


def beyond_web(t, entry):
    """meta.json's entries for the figures above that the merged tally t holds, in meta.json's order."""
    meta = {}
    if "wide" in t:   # web pages this wide are skipped: kept here, and said (the paper drops none on Python)
        meta["wider_than_web_limit"] = {"documents": t["wide"],
                                        "widest": {"file": t["widest_max"][1], "rank": t["widest_max"][0]}}
    if t["notes"]:
        meta["notes"] = dict(t["notes"])
    if "references" in t:   # explicit reference targets (workbooks)
        meta["references"] = t["references"]
    if "held" in t:
        meta["reference_token_share"] = t["affected"] / max(t["reference_tokens"], 1)
    if entry.record_stats and "record_tally" in t:
        meta.update(entry.record_stats(t["record_tally"]), p1_cap=t["p1_cap"])
    return meta


def wide_note(w):
    """prepare.py's line on meta.json's wider_than_web_limit."""
    return (f"note: {w['documents']} document(s) have nodes with more than {trees.MAX_WIDTH} siblings "
            f"(kept; web pages that wide are skipped): the widest {w['widest']['file']}, "
            f"rank {w['widest']['rank']:,}")
