"""hRoPE's position configurations (paper 004 §3.1) and the p1 controls (§3.3, §4.3), with the
coordinates they read and the corpus statistics they calibrate on (App. C). Importing this
module registers them into rotary's tables.
"""
import math

import numpy as np
import torch

from rotary import CONFIGS, COORDINATES, Group, field, seq, unrotated


def spectrum(coord, n, top):
    """A fixed spectrum over n planes whose slowest plane turns half a circle over `top`, the largest
    value the coordinate takes: base_g = (S*M_g/2pi)^(D_g/(D_g-1)) (App. C), rates base^(-i/D_g).
    Our reading: S = 2 and D_g = the group's plane count (App. C names neither value)."""
    if n == 1:
        return Group((coord,), (math.pi / max(top, 1),), False, False, f"{coord} 1")
    base = max(2 * top / (2 * math.pi), 1.0 + 1e-6) ** (n / (n - 1))
    return Group((coord,) * n, tuple(base ** (-i / n) for i in range(n)), False, False, f"{coord} {n}")


def _hrope(which):
    """hRoPE (§3.1): P/4 planes for p1 (paragraph), P/4 for p2 (sentence, or line in code), P/2 for
    p3 (token inside its sentence), each a fixed spectrum calibrated from the corpus maxima M_g.
    Our reading: the P/4, P/4, P/2 allocation (the paper gives no plane counts). sent_axial leaves
    the p1 planes unrotated; rand/period replace p1 by a density-matched random label / floor(t/L)."""
    def make(P, corpus):
        top = (corpus or {}).get("p_max", [64, 64, 1024])
        n1, n2 = P // 4, P // 4
        n3 = P - n1 - n2
        p1 = (unrotated(n1) if which == "sent"
              else spectrum(which + "_p1" if which in ("rand", "period") else "p1", n1, top[0]))
        return [p1, spectrum("p2", n2, top[1]), spectrum("p3", n3, top[2])]
    return make


def _period_p1(b, g):
    """Mechanical grid floor(t/L), L = mean paragraph length."""
    return torch.div(b["pos"], b["p1_period"], rounding_mode="floor")


def _rand_p1(b, g):
    """Density-matched random paragraph label, fresh each call."""
    pos = b["pos"]
    starts = torch.rand(pos.shape, generator=g, device=pos.device) < b["p1_density"]
    starts = starts & (pos > 0)
    return torch.cumsum(starts.long(), -1) * (pos >= 0)


def _p1(read):
    """A p1 channel: a substituted p1 (evaluate.py, b['p1_sub']) replaces whatever it reads."""
    return lambda b, g: b["p1_sub"] if "p1_sub" in b else read(b, g)


COORDINATES.update({"p1": _p1(field("p", 1)), "p2": field("p", 2), "p3": field("p", 3),
                    "period_p1": _p1(_period_p1), "rand_p1": _p1(_rand_p1)})
CONFIGS.update({   # fixed spectra, no learned parameters
    "flat": lambda P, c: [seq(P)],
    "sent_axial": _hrope("sent"),
    "hrope_axial": _hrope("real"),
    "rand_axial": _hrope("rand"),
    "period_axial": _hrope("period"),
})


def paragraph_stats(recs):
    """What hRoPE's base calibration and controls need (App. C): the largest p1, p2, p3 (M_g; p1 in
    its document, clipped: the per-file distribution C.1 calibrates on), the paragraph-boundary
    density per token (rand_axial) and the mean paragraph length in tokens L (period_axial: p1 =
    floor(t / L)). Density and L count the true paragraphs, clipped or not. Our reading: M_1 is the
    largest training p1 after the corpus's p1_cap (code: C.1's 95th percentile; prose, webtext: none)."""
    return paragraph_summary(paragraph_tally(recs))


def paragraph_tally(recs):
    """paragraph_stats' maxima and sums over some records: prepare.py merges its chunks' tallies."""
    # a paragraph starts where p2 and p3 are both 0: every record start, and inside a record
    # wherever p1 moves on or would move on above the cap
    return {"p_max": np.max([r["p"].max(0) for r in recs], 0),
            "paragraphs": sum(int(((r["p"][:, 1] == 0) & (r["p"][:, 2] == 0)).sum()) for r in recs),
            "records": len(recs), "tokens": sum(len(r["p"]) for r in recs)}


def paragraph_summary(t):
    starts = t["paragraphs"] - t["records"]
    return {"p_max": [int(v) for v in t["p_max"]], "p1_density": starts / max(t["tokens"] - t["records"], 1),
            "p1_period": max(1, round(t["tokens"] / t["paragraphs"])), "paragraphs": t["paragraphs"]}
