import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import one_line
from scipy import stats

import analyze
from treerope import statistics
from treerope.hrope import boundaries, candidates, compression, hubs, paragraph_depth

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_sign_test_and_perplexity_match_the_paper():
    assert statistics.sign_test(5, 5) == pytest.approx(0.0625)
    assert statistics.sign_test(10, 10) == pytest.approx(0.00195, rel=1e-2)
    assert statistics.sign_test(20, 20) == pytest.approx(1.9e-6, rel=1e-2)
    assert statistics.ppl_reduction(-0.01) == pytest.approx(0.995, abs=1e-3)


def test_sign_test_drops_ties():
    """Six seeds: three better, two tied, one worse. Ties carry no sign: 3 wins of 4, two-sided
    p = 2 (C(4,3) + C(4,4)) / 16 = 0.625 (counting ties as losses would give 1.0 for 3 of 6)."""
    r = statistics.paired([-0.03, -0.02, -0.01, 0.0, 0.0, 0.01])
    assert r["won"] == 3 and r["n"] == 6
    assert r["sign_p"] == pytest.approx(0.625)


def test_paired_t_by_hand():
    d = [-0.010, -0.020, 0.005, -0.015]
    mean = -0.01
    sd = math.sqrt(((0.0) ** 2 + 0.01 ** 2 + 0.015 ** 2 + 0.005 ** 2) / 3)   # = 0.0108012
    se = sd / 2
    r = statistics.paired(d)
    assert r["delta"] == pytest.approx(mean) and r["se"] == pytest.approx(se)
    assert r["t"] == pytest.approx(-1.8516, abs=1e-3)                      # mean / se
    assert r["p"] == pytest.approx(0.1611, abs=1e-3)                      # t(3) two-sided
    assert r["ci_lo"] == pytest.approx(mean - 3.1824 * se, abs=1e-5)
    assert r["won"] == 3 and r["sign_p"] == pytest.approx(0.625)
    # the band in perplexity reduction: lower end from the CI's upper Δ (worse), upper end from its lower
    half = 3.1824 * se                                                     # t(3, 0.975) = 3.1824
    assert r["ppl_lo"] == pytest.approx(100 * (1 - math.exp(mean + half)), abs=1e-3)   # = -0.72
    assert r["ppl_hi"] == pytest.approx(100 * (1 - math.exp(mean - half)), abs=1e-3)   # = +2.68


def test_bh_known_vector():
    q = statistics.bh([0.01, 0.04, 0.03, 0.20])
    # sorted p: .01 .03 .04 .20 -> .04, .04(min(.03*4/2,.04*4/3)), .0533, .20
    assert q.tolist() == pytest.approx([0.04, 0.05333, 0.05333, 0.20], abs=1e-4)


def planted(n_docs=60, D=300, K=10, depth=-0.6, vertex=4.0, seed=0, per_cell=40):
    rng = np.random.default_rng(seed)
    k = np.arange(K + 1)
    d = np.arange(D + 1)
    true = np.where(k >= 1, depth + 0.04 * (k - vertex) ** 2, 0.0)
    N = rng.poisson(per_cell, size=(n_docs, D + 1, K + 1)).astype(float)
    mu = -0.003 * d[:, None] + true[None]
    x = mu[None] + rng.normal(0, 0.5, N.shape) / np.sqrt(np.maximum(N, 1))
    return {"sum": x * N, "sumsq": (mu[None] ** 2 + 0.25) * N, "count": N}, true


def test_estimator_recovers_a_planted_well():
    acc, _ = planted()
    x, u, U = compression.compression_depth(acc, gate=1000)
    assert x == pytest.approx(4.0, abs=0.1) and u == pytest.approx(-0.6, abs=0.02)
    for w in ("ivar", "uniform"):
        assert compression.compression_depth(acc, 1000, weights=w)[1] == pytest.approx(-0.6, abs=0.03)


def test_monotonic_curve_has_no_interior_minimum():
    U = np.array([0, -0.1, -0.2, -0.3, -0.4, -0.5])
    assert math.isnan(compression.well(U, np.ones(6))[0])


def test_binned_pooling_artifact_and_exact_distance():
    """App. A.6: Δp1 = 1 compresses at every distance (U = −0.2), but its pairs sit at larger
    d inside the bin where log attention rises with d, so the pooled bin shows dilation."""
    D, K = 256, 2
    d = np.arange(D + 1)
    N = np.zeros((D + 1, K + 1))
    N[1:129, 0] = 5000                    # baseline pairs mostly close
    N[129:, 0] = 500
    N[1:129, 1] = 500                     # Δp1 = 1 pairs mostly far
    N[129:, 1] = 5000
    mean = 0.01 * d[:, None] + np.array([0.0, -0.2, 0.0])[None]
    S = mean * N
    pooled = compression.binned_response(S, N, bins=[256])
    assert pooled[1] > 0                                   # wrong sign
    U, _ = compression.response(S, S ** 2 / np.maximum(N, 1), N, gate=200)
    assert U[1] == pytest.approx(-0.2)                     # exact distance: right sign and size


def test_paired_bootstrap_covers_planted_value():
    a, _ = planted(seed=1)
    b, _ = planted(seed=2, depth=-0.3)
    ra, rb, gap = compression.bootstrap_depth(a, b, draws=300, gate=1000)
    lo, hi = compression.ci(ra)
    assert lo <= -0.6 <= hi
    glo, ghi = compression.ci(gap)
    assert glo <= -0.3 <= ghi


def test_cli_pairs_runs_by_seed_at_common_milestones(tmp_path, capsys):
    import json
    import os
    loss = {"seq_only": [3.0, 2.50, 2.40], "seq_depth": [3.0, 2.45, 2.38]}
    for cfg, curve in loss.items():
        for seed in range(3):
            d = tmp_path / "web" / cfg / f"seed{seed}"
            os.makedirs(d)
            (d / "config.json").write_text(json.dumps({
                "run": {"corpus": "web", "config": cfg, "seed": seed, "steps": 30},
                "model": {"n_layer": 4, "n_embd": 128, "n_head": 1, "max_len": 256}}))
            steps = [10, 20, 30] if cfg == "seq_only" or seed else [10, 20]   # one run stopped early
            (d / "log.jsonl").write_text("".join(json.dumps({"step": s, "val_loss": curve[i] + 0.001 * seed})
                                                 + "\n" for i, s in enumerate(steps)))
    analyze.main([str(tmp_path / "web"), "--figures", str(tmp_path / "figs")])
    out = capsys.readouterr().out
    assert "at step 20" in out                              # the last milestone every pair reached
    assert "| seq_depth | -0.0500 |" in out and "| 3/3 |" in out
    assert os.path.exists(tmp_path / "figs" / "fig3_gap_web.png")
    assert (os.path.exists(tmp_path / "figs" / "fig3_gap_web.csv")
            and os.path.exists(tmp_path / "figs" / "table_val.csv"))
    # Fig. 3's numbers: the milestones all three pairs reached, Δ 0 then −0.05 at every seed (band = point)
    rows = [r.split(",") for r in open(tmp_path / "figs" / "fig3_gap_web.csv").read().splitlines()[1:]]
    assert [(r[0], int(r[1])) for r in rows] == [("seq_depth", 10), ("seq_depth", 20)]
    assert [float(x) for x in rows[1][2:]] == pytest.approx([100 * (1 - math.exp(-0.05))] * 3)


def test_kinds_interventions_attention_tables_and_figures(tmp_path, capsys):
    """Fig. 5 / Fig. 6 inputs from evaluate.py's JSON, paired by seed, checked by hand."""
    import json
    import os
    offsets = list(range(-8, 9))
    for cfg, gain, share in (("seq_only", 0.0, 0.10), ("seq_grid", -0.02, 0.15)):
        for seed in range(3):
            d = tmp_path / "sheets" / cfg / f"seed{seed}"
            os.makedirs(d)
            (d / "config.json").write_text(json.dumps({
                "run": {"corpus": "sheets", "config": cfg, "seed": seed, "steps": 30},
                "model": {"n_layer": 4, "n_embd": 128, "n_head": 1, "max_len": 256}}))
            (d / "log.jsonl").write_text(json.dumps({"step": 30, "val_loss": 1.0 + gain}) + "\n")
            kinds = {"all": {"nll": 1.0 + gain / 4 + 0.01 * seed, "tokens": 100},
                     "row_end": {"nll": 2.0 + gain + 0.01 * seed, "tokens": 10}}
            shuffled = {k: {"nll": v["nll"] + 0.5, "tokens": v["tokens"]} for k, v in kinds.items()}
            (d / "eval_test.json").write_text(json.dumps({"kinds": kinds,
                                                          "interventions": {"shuffle": shuffled}}))
            hist = [share if o == 0 else 0.01 for o in offsets]
            (d / "attention_test.json").write_text(json.dumps({
                "same_column_above": {"mean_over_heads": share + 0.001 * seed},
                "same_row_by_column_offset": {"offsets": offsets, "mean_over_heads": hist},
                "rows_above_by_column_offset": {"offsets": offsets, "mean_over_heads": hist}}))
    runs = statistics.load_runs(str(tmp_path / "sheets"))
    kinds = {r["kind"]: r for r in statistics.compare_kinds(runs, "seq_only")}
    assert kinds["row_end"]["delta"] == pytest.approx(-0.02) and kinds["row_end"]["won"] == 3
    assert kinds["all"]["ppl_reduction"] == pytest.approx(100 * (1 - math.exp(-0.005)))
    inter = [r for r in statistics.interventions(runs) if r["config"] == "seq_grid" and r["kind"] == "all"]
    assert inter[0]["ppl_ratio"] == pytest.approx(math.exp(0.5)) and inter[0]["hurt"] == 3
    # seq_grid shuffled (all: 0.995 + 0.01 seed + 0.5) against seq_only as it is (1.0 + 0.01 seed):
    # +0.495, 0/3 won
    (row,) = statistics.compare_intervened(runs, "seq_only")
    assert ((row["config"], row["n"], row["won"]) == ("seq_grid, shuffle", 3, 0)
            and row["delta"] == pytest.approx(0.495))
    att = statistics.compare_attention(runs, "seq_only")
    assert att[0]["points"] == pytest.approx(5.0) and att[0]["higher"] == 3
    analyze.main([str(tmp_path / "sheets"), "--figures", str(tmp_path / "figs")])
    out = capsys.readouterr().out
    assert "by kind of token (Fig. 5)" in out and "| seq_grid: row_end | 10 | -0.0200 |" in out
    assert "| seq_grid, shuffle | +0.4950 |" in out
    for f in ("fig5_kinds_sheets.png", "fig5_kinds_sheets.csv", "fig6_columns_sheets.png",
              "fig6_columns_sheets.csv"):
        assert os.path.exists(tmp_path / "figs" / f)


def test_depth_report_says_not_identifiable(tmp_path):
    """A curve that only rises over Δp1 >= 1 has no well: no CI is printed for its U*."""
    acc, _ = planted(vertex=-6.0)
    np.savez(tmp_path / "a.npz", **acc)
    out = compression.depth_report(str(tmp_path / "a.npz"), draws=40, gates=(1000,))
    assert "no interior minimum" in out and "not identifiable (40 of 40 draws" in out


def test_table3_reads_the_label_bins(tmp_path, capsys):
    """Table 3 reading the label bins: analyze.py --depth given each model's depth_test.npz bins
    rand_axial by the labels it read (depth_read_test.npz beside it, a planted well at Δp1 = 4,
    U* = −0.3) and prints its true-p1 binning (a planted curve that only rises: no well) as the
    secondary table; hrope_axial reads the true p1, so its rows are the same in both tables."""
    paths = []
    for config, files in (("hrope_axial", {"depth_test": planted(depth=-0.9, seed=1)[0]}),
                          ("rand_axial", {"depth_test": planted(vertex=-6.0, seed=2)[0],
                                          "depth_read_test": {**planted(depth=-0.3, seed=3)[0],
                                                              "label_draws": 5}})):
        run = tmp_path / "code" / config / "seed0"
        os.makedirs(run)
        for name, acc in files.items():
            np.savez(run / f"{name}.npz", **acc)
        paths.append(str(run / "depth_test.npz"))
    analyze.main(["--depth", *paths, "--draws", "40"])
    head, true = capsys.readouterr().out.split("secondary, Δp1 binned by the true p1")
    assert ("hrope_axial (1 file): true p1" in head
            and "rand_axial (1 file): labels read, mean over 5 draws" in head)

    def row(text, model):
        return next(line for line in text.splitlines() if line.startswith(f"| {model} (1 file) | 2000 |"))
    x, u = (float(v) for v in row(head, "rand_axial").split("|")[3:5])
    assert x == pytest.approx(4.0, abs=0.2) and u == pytest.approx(-0.3, abs=0.02)
    assert row(true, "rand_axial").split("|")[4].strip() == "no interior minimum"
    assert row(head, "hrope_axial") == row(true, "hrope_axial")
    assert "rand_axial (1 file): U* 95% CI" in head and "rand_axial (1 file): not identifiable" in true


def test_token_pairing_by_hand(tmp_path):
    """Two runs on the same tokens: Δ per token averaged per kind; the bootstrap resamples
    documents. A run scored on other tokens is refused."""
    import trees
    rec = np.array([0, 0, 1, 1, 2, 2])
    kind = np.array([0, trees.KIND_NEW_BLOCK, 0, 0, trees.KIND_NEW_BLOCK, 0], np.uint8)
    for name, nll in (("a", [1.0, 2.0, 1.0, 1.0, 3.0, 1.0]), ("b", [1.5, 2.5, 1.5, 1.5, 3.5, 1.5])):
        os.makedirs(tmp_path / name)
        np.savez(tmp_path / name / "eval_test_tokens.npz", nll=np.array(nll, np.float32), record=rec, doc=rec,
                 kind=kind)
    out = analyze.token_gap(str(tmp_path / "a"), str(tmp_path / "b"), draws=200)
    assert out["all"]["delta"] == pytest.approx(-0.5) and out["all"]["ci_lo"] == pytest.approx(-0.5)
    assert out["new_block"] == {"delta": pytest.approx(-0.5), "ci_lo": pytest.approx(-0.5),
                                "ci_hi": pytest.approx(-0.5), "tokens": 2, "documents": 2}
    np.savez(tmp_path / "b" / "eval_test_tokens.npz", nll=np.zeros(6, np.float32), record=rec[::-1], doc=rec,
             kind=kind)
    with pytest.raises(SystemExit, match="same tokens"):
        analyze.token_gap(str(tmp_path / "a"), str(tmp_path / "b"))


def test_table12_by_hand(tmp_path, capsys):
    """Planted final validation losses for three seeds of flat, hrope_axial and rand_axial:
    means and standard deviations by hand, rand_axial higher than hrope_axial in 3/3 seeds with
    disjoint ranges (one-sided sign p = 1/8), hrope_axial higher than flat in 2/3."""
    import json
    import os
    vals = {"flat": [2.40, 2.38, 2.42], "hrope_axial": [2.41, 2.37, 2.43], "rand_axial": [2.50, 2.52, 2.51]}
    for cfg, vs in vals.items():
        for seed, v in enumerate(vs):
            d = tmp_path / "code" / cfg / f"seed{seed}"
            os.makedirs(d)
            (d / "config.json").write_text(json.dumps({
                "run": {"corpus": "code", "config": cfg, "seed": seed, "steps": 10},
                "model": {"n_layer": 4, "n_embd": 128, "n_head": 2, "max_len": 256}}))
            (d / "log.jsonl").write_text(json.dumps({"step": 10, "val_loss": v}) + "\n")
            (d / "final.json").write_text(json.dumps({"step": 10, "val_loss": v, "test_loss": v}))
    [t] = statistics.table12(statistics.load_runs(str(tmp_path / "code")))
    assert t["stats"]["flat"][:2] == pytest.approx((2.40, 0.02))
    assert t["stats"]["rand_axial"][:2] == pytest.approx((2.51, 0.01))
    rand, flat = t["pairs"]
    assert (rand["higher"], rand["disjoint"], rand["sign_p_one_sided"]) == (3, True, pytest.approx(0.125))
    assert rand["mean"] == pytest.approx((0.09 + 0.15 + 0.08) / 3)
    assert (flat["higher"], flat["disjoint"]) == (2, False)
    analyze.main([str(tmp_path / "code")])
    assert "rand_axial vs hrope_axial | 3 | 3/3 | +0.1067 | yes | 0.125" in capsys.readouterr().out


def layer1_record(cap_at=None):
    """4 paragraphs x 10 tokens, each 2 sentences x 5 tokens; p1 clipped at cap_at if given."""
    t = np.arange(40)
    p = np.stack([t // 10, (t % 10) // 5, t % 5], 1)
    if cap_at is not None:
        p[:, 0] = np.minimum(p[:, 0], cap_at)
    return p


def test_layer1_sites_and_pair_sets_by_hand():
    """The sets M_B(b) and M_C(s) (REFERENCE.md, Layer I): the paragraphs (sentences) on either
    side of the site only. Merging at the first boundary changes Δp1 for 300 pairs, but only the
    100 joining the two merged paragraphs are M_B; a split changes 175, of which 25 are M_C."""
    p = layer1_record()
    tp = torch.as_tensor(p)
    assert boundaries.merge_sites(tp, 99).tolist() == [10, 20, 30]
    assert boundaries.split_sites(tp, 99).tolist() == [5, 15, 25, 35]
    assert boundaries.site_pairs(p, 10, 1) == (0, 10, 20) and boundaries.site_pairs(p, 30, 1) == (20, 30, 40)
    assert boundaries.site_pairs(p, 5, 2) == (0, 5, 10) and boundaries.site_pairs(p, 35, 2) == (30, 35, 40)
    # under the C.1 cap only: p1 = 3 is the cap, so neither the boundary into it nor its sentences
    assert (boundaries.merge_sites(tp, 3).tolist() == [10, 20]
            and boundaries.split_sites(tp, 3).tolist() == [5, 15, 25])
    # past the cap the last two paragraphs share p1 = 2: their boundary (p2 resets) is no sentence site
    clipped = torch.as_tensor(layer1_record(cap_at=2))
    assert boundaries.split_sites(clipped, 2).tolist() == [5, 15]
    # planted attention: e^-1 in A, e^-2 after every merge, e^-3 after every split
    A = np.full((40, 40), np.exp(-1.0))
    merged = {b: np.full((40, 40), np.exp(-2.0)) for b in (10, 20, 30)}
    split = {s: np.full((40, 40), np.exp(-3.0)) for s in (5, 15, 25, 35)}
    fit, sets, bounds = boundaries.boundary_sums(A, p, merged, split, 99)
    within, para, sent, m_obs, s_obs, half, h_obs = sets
    # Σd over one M_B: queries 10..19, keys 0..9 -> 10 * 145 - 10 * 45 = 1,000;
    # one M_C: 5 * 35 - 5 * 10 = 125
    assert within.tolist() == pytest.approx([180, within[1], -180])            # 4 x C(10, 2) pairs
    assert para.tolist() == pytest.approx([300, 3000, -300])
    assert sent.tolist() == pytest.approx([100, 500, -100])
    assert m_obs.tolist() == pytest.approx([300, 3000, -600])
    assert s_obs.tolist() == pytest.approx([100, 500, -300])
    assert half.tolist() == sent.tolist() and h_obs.tolist() == s_obs.tolist()   # two sentences a paragraph
    assert [b.tolist() for b in bounds] == [pytest.approx([100, 1000, -100])] * 3
    assert fit[0] == 40 * 39 / 2


def test_layer1_identities_hold_in_every_resample():
    """β_unm(M_B), computed from M_B's own condition-A sums, is the para anchor, so 1 in every
    bootstrap draw; for a model that does not read p1 (every intervention leaves attention as
    it was) Δ_B = β_B - 1 and Δ_C = β_C - β_A^sent are exactly 0 in every draw (§3.3, A.2)."""
    rng = np.random.default_rng(0)
    docs = []
    for _ in range(6):
        p = layer1_record()
        A = rng.random((40, 40)) + 0.01

        def same(sites):
            return {int(s): A for s in sites}
        docs.append(boundaries.boundary_sums(A, p, same((10, 20, 30)), same((5, 15, 25, 35)), 99))
    fit = np.array([d[0] for d in docs])
    sets = np.array([d[1] for d in docs])
    b_doc = np.repeat(np.arange(6), 3)
    b_sums = np.concatenate([d[2] for d in docs])
    W = rng.multinomial(6, np.full(6, 1 / 6), size=50).astype(float)
    r = boundaries.boundary_effect(fit, sets, b_doc, b_sums, W)
    assert np.allclose(r["beta_para"], 1.0, atol=1e-12)
    assert np.allclose(r["delta_B"], 0, atol=1e-12) and np.allclose(r["delta_C"], 0, atol=1e-12)
    assert np.allclose(r["delta_C_half"], 0, atol=1e-12)
    assert np.allclose(r["beta_C"], r["beta_sent"]) and not np.allclose(r["beta_sent"], 1)
    [row] = boundaries.boundary_table({"flat": (fit, sets, b_doc, b_sums)}, draws=200)
    assert row["delta_C_lo"] == pytest.approx(row["beta_C_lo"] - row["beta_sent_hi"])     # A.2's interval
    assert row["delta_C_hi"] == pytest.approx(row["beta_C_hi"] - row["beta_sent_lo"])
    assert abs(row["delta_C_draw_lo"]) < 1e-9 and "holds exactly" in boundaries.boundary_markdown([row], "t")


def test_boundary_effect_by_hand():
    """One document whose line fit is flat (b0 = b1 = 0): anchors within -1, para -3; sentence
    pairs -1.5; merge pairs observed -2; split pairs observed -4; real boundaries -2, -3, -5. By
    hand: β_B = 0.5, Δ_B = -0.5; β_A^sent = 0.25, β_C = 1.5, Δ_C = 1.25; C_pct: β_C = 1.5 lies
    above 0.5 and 1 and below 2 -> 66.7%. Half-paragraph pairs -2 in A, -2.5 observed: 0.5, 0.75,
    Δ_C_half = 0.25."""
    fit = np.array([[4.0, 0.0, 2.0, 0.0, 0.0]])                     # Σy = Σdy = 0: b1 = 0, b0 = 0
    mean_set = [-1.0, -3.0, -1.5, -2.0, -4.0, -2.0, -2.5]
    sets = np.array([[[2.0, 3.0, 2 * m] for m in mean_set]])
    b_sums = np.array([[1.0, 1.0, -2.0], [2.0, 2.0, -6.0], [1.0, 5.0, -5.0]])
    r = {k: float(v[0])
         for k, v in boundaries.boundary_effect(fit, sets, np.zeros(3, int), b_sums, np.ones((1, 1))).items()}
    assert r["beta_B"] == pytest.approx(0.5) and r["delta_B"] == pytest.approx(-0.5)
    assert r["beta_C"] == pytest.approx(1.5) and r["delta_C"] == pytest.approx(1.25)
    assert r["beta_sent"] == pytest.approx(0.25) and r["C_pct"] == pytest.approx(200 / 3)
    assert r["delta_C_half"] == pytest.approx(0.25)


def test_eq_3_2_removes_a_planted_distance_slope():
    """Paper 004 Eq. 3.2: D_eff = log Ā − b0 − b1 d, the line fitted on condition A's causal pairs.
    Planted: the line y = −1 − 0.5 d (fit on d = 1, y = −1.5 and d = 3, y = −2.5: n 2, Σd 4, Σd² 10,
    Σy −4, Σdy −9 -> b1 = (2·−9 − 4·−4) / (2·10 − 16) = −0.5, b0 = (−4 + 2) / 2 = −1); every set of two
    pairs at its own mean distance d̄, its Σy = 2 (D_eff − 1 − 0.5 d̄) for the D_eff of the flat test
    above: within −1 at d̄ 1 (Σy −5), para −3 at 10 (−18), sent −1.5 at 4 (−9), merge −2 at 10 (−16),
    split −4 at 4 (−14), half −2 at 6 (−12), half observed −2.5 at 6 (−13). Real boundaries, D_eff
    −2, −3, −5: one pair at d 10 (Σy −8), two at d̄ 8 (Σy −16), one at 12 (Σy −12). Residualised, the
    flat test's values: β_B 0.5, Δ_B −0.5, β_A^sent 0.25, β_C 1.5, Δ_C 1.25, C_pct 66.7% (β_C above
    the boundaries' β 0.5 and 1, below 2). Without −b1 Σd in the sets' means (D_eff + b1 d̄: within
    −1.5, para −8, sent −3.5, merge −7, split −6): β_A^sent 2/6.5, Δ_B −1/6.5, Δ_C 2.5/6.5;
    without it in the boundaries' (−7, −7, −11, so β 3, 3, 5): C_pct 0%."""
    fit = np.array([[2.0, 4.0, 10.0, -4.0, -9.0]])
    sets = np.array([[[2.0, 2 * dbar, sy] for dbar, sy in
                      ((1, -5.0), (10, -18.0), (4, -9.0), (10, -16.0), (4, -14.0), (6, -12.0), (6, -13.0))]])
    b_sums = np.array([[1.0, 10.0, -8.0], [2.0, 16.0, -16.0], [1.0, 12.0, -12.0]])
    r = {k: float(v[0])
         for k, v in boundaries.boundary_effect(fit, sets, np.zeros(3, int), b_sums, np.ones((1, 1))).items()}
    assert (r["beta_B"], r["delta_B"], r["beta_para"]) == pytest.approx((0.5, -0.5, 1.0))
    assert (r["beta_sent"], r["beta_C"], r["delta_C"]) == pytest.approx((0.25, 1.5, 1.25))
    assert r["C_pct"] == pytest.approx(200 / 3)
    assert r["delta_C_half"] == pytest.approx(0.25)


def test_half_paragraph_set_by_hand():
    """One paragraph of three 4-token sentences, split sites 4 and 8. M_C(4) is keys 0-3 x queries
    4-7 and M_C(8) keys 4-7 x queries 8-11 (16 pairs each); the half-paragraph sets are keys 0-3 x
    queries 4-11 and keys 0-7 x queries 8-11 (32 pairs each, Σd 4·60 − 8·6 = 192 and 8·38 − 4·28 = 192)."""
    p = np.zeros((12, 3), np.int64)
    p[:, 1] = np.repeat([0, 1, 2], 4)
    assert boundaries.half_paragraph_pairs(p, 4) == (0, 4, 12)
    assert boundaries.half_paragraph_pairs(p, 8) == (0, 8, 12)
    A = np.full((12, 12), np.exp(-1.0))
    split = {s: np.full((12, 12), np.exp(-3.0)) for s in (4, 8)}
    _, sets, _ = boundaries.boundary_sums(A, p, {}, split, 99)
    sent, half, h_obs = sets[2], sets[5], sets[6]
    assert sent[0] == 32 and half.tolist() == pytest.approx([64, 384, -64])
    assert h_obs.tolist() == pytest.approx([64, 384, -192])


def test_boundary_bootstrap_covers_a_planted_beta_c_fast():
    """100 documents whose split pairs sit at β_C = 1.4 plus document noise: the 95% CI of
    4,000 document resamples covers 1.4, excludes 1 (H0(2) rejected), and takes < 60 s."""
    import time
    rng = np.random.default_rng(0)
    D = 100
    fit = np.tile([50.0, 100.0, 300.0, 0.0, 0.0], (D, 1))
    sets = np.zeros((D, 7, 3))
    level = {0: -1.0, 1: -3.0, 2: -1.5, 3: -2.0, 4: -1 - 2 * 1.4, 5: -1.5, 6: -1.5}
    for k, m in level.items():
        sets[:, k, 0] = 10
        sets[:, k, 2] = 10 * (m + rng.normal(0, 0.3, D))
    b_doc = np.repeat(np.arange(D), 3)
    b_sums = np.stack([np.full(3 * D, 5.0), np.zeros(3 * D), 5 * rng.normal(-3, 1, 3 * D)], 1)
    pooled = {"hrope_axial": (fit, sets, b_doc, b_sums)}
    t0 = time.time()
    [row] = boundaries.boundary_table(pooled, draws=4000)
    assert time.time() - t0 < 60
    assert row["beta_C_lo"] <= 1.4 <= row["beta_C_hi"] and row["beta_C_lo"] > 1
    assert "rejected" in boundaries.boundary_markdown([row], "t").splitlines()[-1].split("|")[-3]


def test_table8_by_hand():
    """Two seeds: hrope_axial's balanced accuracy (0.6, 0.9) and (0.6, 0.8), rand_axial's
    (0.6, 0.7) and (0.7, 0.85): means (0.6, 0.85) and (0.65, 0.775); hrope higher at layer 0 in
    no seed (a tie, then 0.6 < 0.7), at layer 1 in one (0.9 > 0.7, 0.8 < 0.85)."""
    def probe(*b):
        layers = [{"layer": i, "balanced_accuracy": v} for i, v in enumerate(b)]
        return {"eval": {"probe": {"layers": layers}}}
    runs = {("code", 4, 128, 2, 256, 10): {"hrope_axial": {0: probe(0.6, 0.9), 1: probe(0.6, 0.8)},
                                           "rand_axial": {0: probe(0.6, 0.7), 1: probe(0.7, 0.85)}}}
    [t] = boundaries.table8(runs)
    assert (t["rows"]["hrope_axial"] == pytest.approx([0.6, 0.85])
            and t["rows"]["rand_axial"] == pytest.approx([0.65, 0.775]))
    assert [int(x) for x in t["higher"][0]] == [0, 1] and t["higher"][1] == 2
    assert "| hrope_axial > rand_axial (seeds) | 0/2 | 1/2 |" in boundaries.table8_markdown(t)


def test_wls_against_the_closed_form():
    """One predictor, x = 0 1 2 3, y = 1 3 2 5, w = 1 2 1 2. By hand: weighted means x̄ = 5/3, ȳ = 19/6;
    Sxx = 22/3, Sxy = 25/3, so b1 = 25/22, b0 = ȳ - b1 x̄ = 14/11; weighted SSE = 37/11 on 4 - 2 df;
    se(b1) = sqrt(SSE / 2 / Sxx) = sqrt(111) / 22; SST = 77/6, R² = 1 - (37/11) / (77/6) = 625/847."""
    f = paragraph_depth.wls(np.array([[0.0], [1], [2], [3]]), np.array([1.0, 3, 2, 5]),
                            np.array([1.0, 2, 1, 2]))
    assert f["coef"] == pytest.approx([14 / 11, 25 / 22]) and f["df"] == 2
    assert f["se"][1] == pytest.approx(math.sqrt(111) / 22) and f["r2"] == pytest.approx(625 / 847)
    assert f["p"][1] == pytest.approx(2 * stats.t.sf((25 / 22) / (math.sqrt(111) / 22), 2))
    # integer weights act as repeated rows on the coefficients (four predictors, as Table 9 fits)
    rng = np.random.default_rng(0)
    X, y, w = rng.normal(size=(30, 4)), rng.normal(size=30), rng.integers(1, 4, 30).astype(float)
    rep = np.repeat(np.arange(30), w.astype(int))
    ols = np.linalg.lstsq(np.c_[np.ones(len(rep)), X[rep]], y[rep], rcond=None)[0]
    assert paragraph_depth.wls(X, y, w)["coef"] == pytest.approx(ols)


def test_paragraph_depth_recovers_planted_offsets(tmp_path):
    """Two runs (seeds) of one record with paragraphs 0, 1, 2. Baseline cells sit at log Ā = -d
    with 300 pairs per run (600 pooled: over the gate of 400); Δp1 = 1 pairs sit 1.0 below the
    baseline between paragraphs 0 and 1 (3 pairs per run) and 2.0 below between 1 and 2 (1 pair),
    plus one pair in a cell under the gate (left out). U_0 = -1 (weight 6), U_1 = (6 x -1 + 2 x -2) / 8
    = -1.25, U_2 = -2 (weight 2)."""
    base_n = np.zeros((5, 2), np.int64)
    base_n[1:4, 0] = 300
    base_n[4, 1] = 100                                          # 200 pooled: under the gate
    base_sum = -np.arange(5)[:, None] * base_n
    rows = dict(record=[0, 0, 0], p1=[0, 1, 0], d=[2, 3, 4], band=[0, 0, 1], count=[3, 1, 1])
    rows["sum"] = [3 * (-2 - 1.0), 1 * (-3 - 2.0), -99.0]
    paths = []
    for seed in (0, 1):
        paths.append(str(tmp_path / f"p{seed}.npz"))
        np.savez(paths[-1], base_sum=base_sum, base_n=base_n, max_len=8,
                 **{k: np.array(v) for k, v in rows.items()})
    got, cells = paragraph_depth.paragraph_depth(paths, gate=400)
    assert cells == 3
    assert got["p1"].tolist() == [0, 1, 2] and got["record"].tolist() == [0, 0, 0]
    assert got["U"] == pytest.approx([-1.0, -1.25, -2.0]) and got["weight"].tolist() == [6, 8, 2]


def test_d_only_pilot_and_band_decay_by_hand(tmp_path):
    """App. A.10's d-only pilot and the band-decay diagnostic (our reading) on one run, gate 1.
    Baseline: d = 1 band 0 at log Ā 0 (2 pairs), d = 1 band 1 at -1 (2 pairs), d = 2 band 1 at -3
    (4 pairs); pooled over bands base(1) = -0.5, base(2) = -3. Δp1 = 1 pairs: A (paragraph 0 -> 1,
    d 1, band 0) at -1, B (1 -> 2, d 1, band 1) at -2, C (1 -> 2, d 2, band 1) at -3.5.
    By (d, band): A -1, B -1, C -0.5, so U = -1, -5/6, -3/4 (weights 1, 3, 2). d only: A -0.5,
    B -1.5, C -0.5, so U = -1/2, -5/6, -1: the later paragraph, its query in the later band, looks
    deeper. Band decay: band 0 sits 0 - (-0.5) = +0.5 above the pooled baseline (2 pairs); band 1
    (2 x -0.5 + 4 x 0) / 6 = -1/6 (6 pairs); the weighted line through two points: slope -2/3."""
    base_n = np.array([[0, 0], [2, 2], [0, 4]])
    base_sum = np.array([[0.0, 0], [0, -2], [0, -12]])
    rows = dict(record=[0, 0, 0], p1=[0, 1, 1], d=[1, 1, 2], band=[0, 1, 1], sum=[-1.0, -2, -3.5],
                count=[1, 1, 1])
    path = str(tmp_path / "p.npz")
    np.savez(path, base_sum=base_sum, base_n=base_n, max_len=64, **{k: np.array(v) for k, v in rows.items()})
    by_band, cells = paragraph_depth.paragraph_depth([path], gate=1)
    d_only, cells_d = paragraph_depth.paragraph_depth([path], gate=1, by_band=False)
    assert (cells, cells_d) == (3, 2) and by_band["weight"].tolist() == d_only["weight"].tolist() == [1, 3, 2]
    assert (by_band["U"] == pytest.approx([-1, -5 / 6, -0.75])
            and d_only["U"] == pytest.approx([-0.5, -5 / 6, -1]))
    shift, pairs, slope = paragraph_depth.band_decay(*paragraph_depth.pooled_base([path]), gate=1)
    assert (shift == pytest.approx([0.5, -1 / 6]) and pairs.tolist() == [2, 6]
            and slope == pytest.approx(-2 / 3))
    shift, pairs, slope = paragraph_depth.band_decay(base_sum, base_n, gate=3)   # only the 4-pair cell
    assert np.isnan(shift[0]) and shift[1] == 0 and np.isnan(slope)


def test_paper_004s_entry_points_refuse_what_they_cannot_count(tmp_path, capsys, monkeypatch):
    """Issue 71 P1: `candidates --draws 0` was a TypeError inside the bootstrap, `hubs RUN RUN` pooled one
    run's cells twice, `paragraph_depth --gate 0` or `-1` was accepted (a cell without a pair passes
    such a gate), and its refusal of too few paragraphs advised "or lower --gate" at any gate. Each is
    refused in one line; the advice is given where the gate can be lowered."""
    run = tmp_path / "code" / "hrope_axial" / "seed0"
    os.makedirs(run)
    for call, said in ((lambda: candidates.main([str(tmp_path), "--draws", "0"]),
                        "error: argument --draws: must be at least 1, not 0"),
                       (lambda: hubs.main([str(run), f"{run}/"]),
                        f"error: the run {run}/ is given twice (as {run}): give each seed once"),
                       (lambda: analyze.main(["--hubs", str(run), "--draws", "-5"]),
                        "error: argument --draws: must be at least 1, not -5"),
                       (lambda: paragraph_depth.main([str(run.parent), "--gate", "0"]),
                        "error: argument --gate: must be at least 1, not 0"),
                       (lambda: paragraph_depth.main([str(run.parent), "--gate", "-1"]),
                        "error: argument --gate: must be at least 1, not -1")):
        with pytest.raises(SystemExit) as e:
            call()
        assert e.value.code == 2 and capsys.readouterr().err == said + "\n"
    (run / "config.json").write_text(json.dumps({
        "run": {"corpus": "code", "config": "hrope_axial", "seed": 0, "steps": 30, "data": str(tmp_path)},
        "model": {"n_layer": 2, "n_embd": 128, "n_head": 2, "max_len": 8}}))
    rows = dict(record=[0], p1=[0], d=[1], band=[0], sum=[-2.0], count=[1])    # one Δp1 = 1 pair
    np.savez(run / "paragraph_test.npz", base_sum=-np.ones((2, 1)), base_n=np.full((2, 1), 3), max_len=8,
             **{k: np.array(v) for k, v in rows.items()})
    none = {**{k: np.zeros(1) for k in paragraph_depth.PREDICTORS}, "record": np.array([9]),
            "p1": np.array([0]), "truncated": np.array([True]), "first_window": np.array([False]),
            "document": np.array([0])}
    monkeypatch.setattr(candidates, "paragraph_predictors", lambda *a: none)   # no paragraph left
    for gate, advice in ((1, ""), (2, " or lower --gate (now 2)")):
        msg = one_line(lambda: paragraph_depth.main([str(run.parent), "--gate", str(gate)]))
        assert msg.endswith("paragraphs left after the gates; evaluate more (--docs, --max_docs)" + advice)


def test_weighted_r_by_hand():
    """x = 0 1 2 3, y = 1 3 2 5, w = 1 2 1 2 (test_wls_against_the_closed_form): Sxy = 25/3,
    Sxx = 22/3, Syy = 77/6, so r = 25 / sqrt(847) and r² the univariate fit's R², 625/847."""
    x, y, w = np.array([0.0, 1, 2, 3]), np.array([1.0, 3, 2, 5]), np.array([1.0, 2, 1, 2])
    assert paragraph_depth.weighted_r(x, y, w) == pytest.approx(25 / math.sqrt(847))
    r2 = paragraph_depth.wls(x[:, None], y, w)["r2"]
    assert paragraph_depth.weighted_r(x, -y, w) ** 2 == pytest.approx(r2)


def test_figures_for_a_lone_run(tmp_path, capsys):
    """The README's first study is one run: `analyze.py out/web --figures figs` has no pair to
    compare but writes what it can (the interventions table) instead of failing on a missing folder."""
    import json
    import os
    d = tmp_path / "web" / "seq_depth" / "seed0"
    os.makedirs(d)
    (d / "config.json").write_text(json.dumps({
        "run": {"corpus": "web", "config": "seq_depth", "seed": 0, "steps": 30},
        "model": {"n_layer": 4, "n_embd": 128, "n_head": 1, "max_len": 256}}))
    (d / "log.jsonl").write_text(json.dumps({"step": 30, "val_loss": 5.0}) + "\n")
    kinds = {"all": {"nll": 5.0, "tokens": 100}}
    (d / "eval_test.json").write_text(json.dumps({
        "kinds": kinds, "interventions": {"remove": {"all": {"nll": 5.1, "tokens": 100}}}}))
    analyze.main([str(tmp_path / "web"), "--figures", str(tmp_path / "figs")])
    rows = open(tmp_path / "figs" / "table_interventions.csv").read().splitlines()
    assert len(rows) == 2 and "remove" in rows[1]


def test_finished_leaves_out_a_seed_still_training(tmp_path, capsys):
    """Seeds 0 and 1 finished at step 30; seed 2 is still training at step 10. Pairing at the last
    common milestone compares every seed at step 10; --finished compares the finished ones at 30."""
    import json
    import os
    for cfg, loss in (("seq_only", 2.5), ("seq_depth", 2.4)):
        for seed in range(3):
            d = tmp_path / "web" / cfg / f"seed{seed}"
            os.makedirs(d)
            (d / "config.json").write_text(json.dumps({
                "run": {"corpus": "web", "config": cfg, "seed": seed, "steps": 30},
                "model": {"n_layer": 4, "n_embd": 128, "n_head": 1, "max_len": 256}}))
            steps = [10, 30] if seed < 2 else [10]
            (d / "log.jsonl").write_text("".join(json.dumps({"step": s, "val_loss": loss + (s == 10)}) + "\n"
                                                 for s in steps))
            if seed < 2:
                (d / "final.json").write_text(json.dumps({"step": 30, "val_loss": loss, "test_loss": loss}))
    analyze.main([str(tmp_path / "web")])
    assert "at step 10" in capsys.readouterr().out
    analyze.main([str(tmp_path / "web"), "--finished"])
    out = capsys.readouterr().out
    assert "at step 30" in out and "| 2/2 |" in out


def write_run(root, corpus, folder, seed, val, config=None, **run):
    """A finished run in root/corpus/folder/seed<k>: config.json, log.jsonl and final.json (validation
    loss `val` at step 30); its configuration `config` (default: the folder's name)."""
    import json
    d = root / corpus / folder / f"seed{seed}"
    os.makedirs(d)
    (d / "config.json").write_text(json.dumps({
        "run": {"corpus": corpus, "config": config or folder, "seed": seed, "steps": 30, **run},
        "model": {"n_layer": 2, "n_embd": 128, "n_head": 2, "max_len": 256}}))
    (d / "log.jsonl").write_text(json.dumps({"step": 30, "val_loss": val}) + "\n")
    (d / "final.json").write_text(json.dumps({"step": 30, "val_loss": val, "test_loss": val}))
    return d


@pytest.mark.parametrize("kinds,interventions,key", [
    ({"all": {"nll": 1.0}}, {}, "kinds.all.tokens is missing"),                     # issue 71 T3
    ({"row_end": {"nll": 1.0, "tokens": 3}}, {}, "kinds.all.nll is missing"),
    ({"all": {"nll": 1.0, "tokens": 3}}, {"shuffle": {"all": {"nll": 1.0, "tokens": 3},
                                                      "row_end": {"nll": 1.0, "tokens": 3}}},
     "interventions.shuffle.row_end has no kinds.row_end")])
def test_a_damaged_evaluation_is_one_line_naming_the_key(kinds, interventions, key, tmp_path):
    """Issue 71 T3: an eval_test.json whose kinds.all lacked `tokens` was a KeyError in the paired-by-kind
    table (read_eval checked `nll` alone): the reader checks every key the tables read of it."""
    for name in ("seq_only", "seq_depth"):
        d = write_run(tmp_path, "web", name, 0, 2.0)
        (d / "eval_test.json").write_text(json.dumps({"kinds": kinds, "interventions": interventions}))
    one_line(lambda: analyze.main([str(tmp_path / "web")]), "eval_test.json is damaged", key)


def test_a_run_left_out_or_in_part_is_named(tmp_path, capsys):
    """Issue 71 M2: analyze.py dropped a run folder without config.json (n went from 2/2 to 1/1), a
    finished run whose log.jsonl was empty (the whole validation table with it), and counted an
    eval_test.json whose nll was NaN as a seed won ("–" beside "won 1/2"), each without a word. Each is
    named in a note and left out (a NaN score: that evaluation, as a stale one is); the others pair."""
    for root in ("no_config", "empty_log", "nan"):
        for name, val in (("seq_only", 2.0), ("seq_depth", 1.9)):
            for seed in (0, 1):
                d = write_run(tmp_path / root, "web", name, seed, val + 0.01 * seed)
                nll = float("nan") if (root, name, seed) == ("nan", "seq_depth", 0) else val / 2
                (d / "eval_test.json").write_text(json.dumps({
                    "kinds": {"all": {"nll": nll, "tokens": 10}}, "interventions": {}}))
    (tmp_path / "no_config/web/seq_depth/seed1/config.json").unlink()
    (tmp_path / "empty_log/web/seq_depth/seed0/log.jsonl").write_text("")
    analyze.main([str(tmp_path / "no_config/web")])
    out = capsys.readouterr().out
    assert f"note: {tmp_path}/no_config/web/seq_depth/seed1 holds no config.json: left out" in out
    assert "| seq_depth | -0.1000 |" in out and "| 1/1 |" in out
    analyze.main([str(tmp_path / "empty_log/web")])
    out = capsys.readouterr().out
    empty = tmp_path / "empty_log/web/seq_depth/seed0"
    assert f"note: {empty} has no milestone in its log.jsonl: left out" in out
    assert "| seq_depth | -0.1000 |" in out and "| 1/1 |" in out
    analyze.main([str(tmp_path / "nan/web")])
    out = capsys.readouterr().out
    assert f"note: {tmp_path}/nan/web/seq_depth/seed0's eval: kinds.all.nll is not a finite loss: left " \
           "out" in out
    assert "| seq_depth: all | 10 | -0.0500 |" in out and "| 1/1 |" in out and "1/2" not in out


def test_seed_spreads_head_shifts_and_rotation_off_by_hand(tmp_path, capsys):
    """Appendix §1 and §2. Validation loss: seq_only 2.00 2.02 2.04 (SD 0.02), seq_grid 1.99 1.99
    2.02 (SD √0.0003 = 0.0173), paired Δ −0.01 −0.03 −0.02 (SD 0.01), unpaired √(0.0004 + 0.0003)
    = 0.0265. Share on same_column_above per (layer, head), seeds 0 and 1 (seed 2 not evaluated):
    seq_only [[.10 .20] [.30 .40]], [[.10 .10] [.10 .50]]; seq_grid [[.35 .20] [.30 .22]],
    [[.10 .25] [.10 .50]]. Head shifts (points): seed 0 +25 0 0 −18, seed 1 0 +15 0 0: mean 22/8
    = +2.75, largest move per seed 25 and 15, top heads 40, 50 (mean 45) and 35, 50 (42.5).
    seq_grid with its rotation off: .20 and .25 against .2675 and .2375 on: −6.75 and +1.25 points,
    mean −2.75, fell in 1 of 2; seq_only's share with the rotation on: 25 and 20, mean 22.5."""
    import json
    heads = {"seq_only": [[[.10, .20], [.30, .40]], [[.10, .10], [.10, .50]]],
             "seq_grid": [[[.35, .20], [.30, .22]], [[.10, .25], [.10, .50]]]}
    for name, vals in (("seq_only", (2.00, 2.02, 2.04)), ("seq_grid", (1.99, 1.99, 2.02))):
        for seed, v in enumerate(vals):
            d = write_run(tmp_path, "sheets", name, seed, v)
            if seed < 2:
                h = heads[name][seed]
                (d / "attention_test.json").write_text(json.dumps({"same_column_above": {
                    "mean_over_heads": float(np.mean(h)), "per_layer_head": h}}))
            if seed < 2 and name == "seq_grid":
                (d / "attention_test_rotation_off.json").write_text(json.dumps({"same_column_above": {
                    "mean_over_heads": (.20, .25)[seed], "per_layer_head": [[0.0] * 2] * 2}}))
    runs = statistics.load_runs(str(tmp_path / "sheets"))
    (s,) = statistics.seed_spread(runs, "seq_only")
    assert (s["n"], s["sd_base"], s["sd_config"], s["sd_paired"], s["sd_unpaired"]) == pytest.approx(
        (3, 0.02, math.sqrt(0.0003), 0.01, math.sqrt(0.0007)))
    (h,) = statistics.head_shifts(runs, "seq_only")
    assert (h["n"], h["heads"], h["mean"], h["largest_lo"], h["largest_hi"]) == pytest.approx(
        (2, 4, 2.75, 15, 25))
    assert (h["rise"], h["rise_at"], h["fall"], h["fall_at"]) == (pytest.approx(25), "seed 0 L0H0",
                                                                  pytest.approx(-18), "seed 0 L1H1")
    assert (h["top_base"], h["top"]) == pytest.approx((45, 42.5))
    (o,) = statistics.rotation_off(runs, "seq_only")
    assert (o["base"], o["on"], o["off"], o["points"], o["fell"], o["n"]) == pytest.approx(
        (22.5, 25.25, 22.5, -2.75, 1, 2))
    analyze.main([str(tmp_path / "sheets")])
    out = capsys.readouterr().out
    assert "| seq_grid | 3 | 0.0200 | 0.0173 | 0.0100 | 0.0265 | 0.38 |" in out
    assert ("| seq_grid: same_column_above | 2 × 4 | +2.75 | 15.0–25.0 | +25.0 (seed 0 L0H0) "
            "| -18.0 (seed 0 L1H1) | 45.0 | 42.5 |") in out
    assert "| seq_grid: same_column_above | 22.50 | 25.25 | 22.50 | -2.75 | 1/2 |" in out


def test_noise_floor_by_hand(tmp_path, capsys):
    """Appendix §2 "Run-to-run noise". seq_depth at seeds 0-2: 3.000 3.010 3.020 (SD 0.01);
    replicates of seed 0 (--name): 3.002, 3.004, so 3.000 3.002 3.004 (SD 0.002, range 0.004 =
    20% of the seed SD); seq_only 3.020 3.030 3.040, Δ −0.02 at every seed: the replicate SD is
    10% of the effect. A run at another seed, or with depth dropout, is no replicate."""
    for seed, v in enumerate((3.000, 3.010, 3.020)):
        write_run(tmp_path, "web", "seq_depth", seed, v, given=["config"])
        write_run(tmp_path, "web", "seq_only", seed, v + 0.02)
    first = tmp_path / "web" / "seq_depth" / "seed0"
    reps = [write_run(tmp_path, "web", f"seq_depth_rep{k}", 0, 3.000 + 0.002 * k, "seq_depth",
                      name=f"seq_depth_rep{k}", given=["config", "name"], device="cuda:1") for k in (1, 2)]
    r = statistics.noise_floor([str(first)] + [str(d) for d in reps], "seq_only")
    assert (r["replicates"], r["seeds"], r["paired_seeds"]) == (3, 3, 3)
    assert (r["sd"], r["range"], r["sd_seeds"], r["delta"]) == pytest.approx((0.002, 0.004, 0.01, -0.02))
    assert (r["of_seeds"], r["of_effect"]) == pytest.approx((0.2, 0.1))
    analyze.main(["--replicates", str(first)] + [str(d) for d in reps])
    assert ("| 3 | 0.0020 | 0.0040 | 3 | 0.0100 | 20% | -0.0200 vs seq_only (3 seeds) | 10% |"
            in capsys.readouterr().out)
    other = [write_run(tmp_path, "web", "seq_depth", 3, 3.0),
             write_run(tmp_path, "web", "seq_depth_dropout", 0, 3.0, "seq_depth", depth_dropout=0.3)]
    for d in other:
        with pytest.raises(SystemExit, match="seed|depth_dropout"):
            statistics.noise_floor([str(first), str(d)], "seq_only")


def test_a_best_milestone_run_is_compared_at_the_value_it_reports(tmp_path, capsys):
    """Appendix §4 "Evaluation": the diverged larger-web tree_only run "is reported at its best
    milestone, labelled as such". tree_only's milestones 2.6, 2.5, 4.0 (final 4.0, reported 2.5 at
    step 20) against seq_only's 2.9, 2.8, 2.7: Δ = 2.5 − 2.7 = −0.2 at both seeds (the last shared
    step would give +1.3)."""
    import json
    for seed in (0, 1):
        for name, vals, rule in (("seq_only", (2.9, 2.8, 2.7), "final"),
                                 ("tree_only", (2.6, 2.5, 4.0), "best_milestone")):
            d = write_run(tmp_path, "web", name, seed, vals[-1])
            (d / "log.jsonl").write_text("".join(json.dumps({"step": 10 * (i + 1), "val_loss": v}) + "\n"
                                                 for i, v in enumerate(vals)))
            best = min(range(3), key=lambda i: vals[i]) if rule == "best_milestone" else 2
            (d / "final.json").write_text(json.dumps({
                "step": 30, "val_loss": vals[-1], "test_loss": vals[-1], "report": rule,
                "reported": {"val_loss": vals[best], "step": 10 * (best + 1)}}))
    runs = statistics.load_runs(str(tmp_path / "web"))
    (r,) = statistics.compare(runs, "seq_only", "val")
    assert r["step"] == statistics.BEST and r["delta"] == pytest.approx(-0.2)
    (s,) = statistics.seed_spread(runs, "seq_only")
    assert s["sd_paired"] == pytest.approx(0.0)
    analyze.main([str(tmp_path / "web")])
    assert f"val Δ vs seq_only at {statistics.BEST}" in capsys.readouterr().out


def test_packed_runs_are_another_setting(tmp_path):
    """A run trained on packed blocks (train.py --pack) has other batches than one trained a record per
    row: analyze pairs it only with packed runs, as it pairs only runs of one model size and length."""
    for seed in (0, 1):
        write_run(tmp_path, "code", "flat", seed, 3.0)
        write_run(tmp_path, "code", "hrope_axial", seed, 2.9, pack=True)
    runs = statistics.load_runs(str(tmp_path / "code"))
    assert len(runs) == 2 and statistics.compare(runs, "flat", "val") == []
    write_run(tmp_path, "code", "flat_packed", 0, 3.1, "flat", name="flat_packed", pack=True)
    (packed,) = [s for s in statistics.load_runs(str(tmp_path / "code")) if s.packed]
    assert sorted(statistics.load_runs(str(tmp_path / "code"))[packed]) == ["flat_packed", "hrope_axial"]


def test_too_few_documents_are_not_identifiable_never_an_interval(tmp_path):
    """A one-document split resamples to itself: a zero-width interval and a "rejected" verdict
    would be a result that looks valid but is not. Under 5 documents: not identifiable."""
    from treerope.hrope import boundaries, compression
    rng = np.random.default_rng(0)

    def pooled(D):
        fit = np.c_[np.full(D, 50.0), rng.uniform(100, 200, D), rng.uniform(1e3, 2e3, D),
                    rng.uniform(-50, -10, D), rng.uniform(-500, -100, D)]
        sets = np.stack([np.c_[np.full(7, 10.0), rng.uniform(10, 50, 7), rng.uniform(-20, -5, 7)]
                         for _ in range(D)])
        b_doc = np.arange(D)
        b_sums = np.c_[np.full(D, 10.0), rng.uniform(10, 50, D), rng.uniform(-20, -5, D)]
        return {"m": (fit, sets, b_doc, b_sums)}
    one = boundaries.boundary_markdown(boundaries.boundary_table(pooled(1), draws=200), "t")
    six = boundaries.boundary_markdown(boundaries.boundary_table(pooled(6), draws=200), "t")
    assert "not identifiable: 1 document(s)" in one and "rejected" not in one
    assert "not identifiable" not in six
    acc = {k: rng.uniform(1, 5, (3, 4, 4)) for k in ("sum", "sumsq", "count")}
    np.savez(tmp_path / "a.npz", **acc)
    report = compression.depth_report(str(tmp_path / "a.npz"), draws=50)
    assert "not identifiable (3 document(s)" in report and "CI [" not in report


def test_fig4_without_pairs_is_not_drawn_and_the_csv_names_the_setting(tmp_path, capsys):
    import csv

    from treerope import figures
    figures.figure_planes([], str(tmp_path), {})
    assert "Fig. 4 not drawn" in capsys.readouterr().out and not os.listdir(tmp_path)
    row = {"setting": ("web", 4, 128, 1, 256, 200, False), "step": 200, "baseline": "seq_only",
           "base_loss": 5.0, **{k: 0.0 for k in analyze.COLUMNS}}
    analyze.write_csv([row], str(tmp_path / "t.csv"))
    [got] = list(csv.DictReader(open(tmp_path / "t.csv")))
    assert got["setting"] == "web 4L d128 1h ctx256 200 steps"


def test_fig3_spreadsheets_from_a_quarter_of_training(tmp_path):
    """Appendix Fig. 3: "spreadsheets from 25% of training": milestones before a quarter of the
    planned steps are not drawn for sheets, and are for web pages."""
    from treerope import figures
    rows = [{"setting": (c, 4, 128, 1, 256, 100, False), "config": "seq_grid", "step": st,
             "ppl_reduction": 1.0, "ppl_lo": 0.5, "ppl_hi": 1.5}
            for c in ("sheets", "web") for st in (10, 20, 50, 100)]
    figures.figure_gap(rows, "seq_only", str(tmp_path))
    for corpus, steps in (("sheets", ["50", "100"]), ("web", ["10", "20", "50", "100"])):
        table = open(tmp_path / f"fig3_gap_{corpus}.csv").read().splitlines()[1:]
        assert [line.split(",")[1] for line in table] == steps


@pytest.mark.parametrize("layer", ["boundaries", "compression", "hubs", "paragraph_depth", "candidates"])
def test_each_hrope_layer_is_its_own_command_with_a_short_help(layer):
    """Paper 004's layers run as `python -m treerope.hrope.<layer>`, each with its own short --help
    (usage, one paragraph, its flags): a module without the entry point prints nothing, and
    candidates' help was its 30-line docstring."""
    out = subprocess.run([sys.executable, "-m", f"treerope.hrope.{layer}", "--help"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: python -m treerope.hrope.{layer} ") and "Paper 004" in out.stdout
    assert len(out.stdout.splitlines()) <= 25


def test_compression_depth_is_its_own_command(tmp_path, capsys):
    """`python -m treerope.hrope.compression MODEL.npz` on a planted well (U* = −0.6 at Δp1 = 4)
    prints Table 3 with it, and analyze.py --depth prints the same (it runs that command)."""
    path = str(tmp_path / "depth_test.npz")
    np.savez(path, **planted()[0])
    out = subprocess.run([sys.executable, "-m", "treerope.hrope.compression", path, "--draws", "40"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "| 2000 | 4.002 | -0.600 |" in out.stdout and "U* 95% CI [-0.601, -0.599]" in out.stdout
    analyze.main(["--depth", path, "--draws", "40"])
    assert capsys.readouterr().out == out.stdout


def test_a_run_recorded_before_values_had_one_home_pairs_with_one_recorded_now():
    """Before this redesign a run's config.json named its model size (preset) and recipe, and held its
    model's values only under "model"; now its run values hold them too. Both train the same thing, so
    analyze.py pairs them; a named variant's --dropout is a value its row names, as --lr is."""
    training = statistics.training
    model = {"vocab_size": 4096, "n_layer": 4, "n_embd": 128, "n_head": 2, "max_len": 256, "dropout": 0.1,
             "configuration": "seq_only", "corpus": {}}
    values = {"corpus": "prose", "config": "seq_only", "seed": 0, "lr": 1.2e-3, "steps": 200, "patience": 10}
    before = {"run": {**values, "preset": "cpu_hrope", "recipe": "hrope_cpu", "dropout": 0.1}, "model": model}
    now = {"run": {**values, "n_layer": 4, "n_embd": 128, "n_head": 2, "max_len": 256, "dropout": 0.1},
           "model": model}
    assert training(before, []) == training(now, [])
    hotter = {"run": {**now["run"], "dropout": 0.2}, "model": {**model, "dropout": 0.2}}
    differ = {k for k, v in training(hotter, []).items() if training(now, [])[k] != v}
    assert differ == {"dropout"}


def test_contrast_of_two_studies_paired_deltas_by_hand(tmp_path, capsys):
    """Study × configuration (analyze.py --contrast): two studies alike but for their data (the web
    streams). Final validation loss (= test loss), seeds 0 1 2:
      A: seq_only 3.00 3.10 3.20, seq_depth 2.99 3.08 3.21  ->  Δ_A = −0.01 −0.02 +0.01
      B: seq_only 3.00 3.00 3.00, seq_depth 2.97 2.96 2.98  ->  Δ_B = −0.03 −0.04 −0.02
      d = Δ_B − Δ_A = −0.02 −0.02 −0.03: mean −0.07/3 = −0.02333; deviations +1/300, +1/300, −2/300,
      SD √((1 + 1 + 4) / 2) / 300 = √3/300, SE = 1/300, t = −7.00; two-sided p with 2 df
      = 1 − 7/√51 = 0.0198; CI −0.02333 ± 4.3027/300 = [−0.03768, −0.00899]; won 3/3 (sign p 0.25);
      ppl 100 (1 − e^−0.02333) = 2.31%. Undoing the difference (Δ_B alone, or Δ_B + Δ_A) gives
      −0.03 or −0.0367: caught. A third study trained at bf16 is not contrasted: a note names it; within
      one study a bf16 seq_depth is no pair for an fp32 seq_only (analyze.py says so)."""
    a_only, a_depth = (3.00, 3.10, 3.20), (2.99, 3.08, 3.21)
    b_only, b_depth = (3.00, 3.00, 3.00), (2.97, 2.96, 2.98)
    for root, only, depth, extra in (("a", a_only, a_depth, {}), ("b", b_only, b_depth, {}),
                                     ("c", b_only, b_depth, {"bf16": True})):
        data = {"data_identity": {"meta": f"hash-{root}", "tokenizer": root}, "tokenizer": root}
        for seed in range(3):
            write_run(tmp_path / root, "web", "seq_only", seed, only[seed], **data, **extra)
            write_run(tmp_path / root, "web", "seq_depth", seed, depth[seed], **data, **extra)
    runs = {k: statistics.load_runs(str(tmp_path / k / "web")) for k in "abc"}
    for metric in ("val", "test"):
        (r,), notes = statistics.contrast(runs["a"], runs["b"], "seq_only", metric)
        assert notes == [] and r["config"] == "seq_depth"
        assert [r["per_seed"][s] for s in range(3)] == pytest.approx([-0.02, -0.02, -0.03])
        assert (r["delta_a"]["delta"], r["delta_b"]["delta"]) == pytest.approx((-0.02 / 3, -0.03))
        assert (r["delta"], r["se"], r["t"], r["p"]) == pytest.approx((-0.07 / 3, 1 / 300, -7.0, 0.0198),
                                                                      abs=1e-4)
        assert (r["ci_lo"], r["ci_hi"]) == pytest.approx((-0.03768, -0.00899), abs=1e-5)
        assert (r["won"], r["n"], r["sign_p"]) == (3, 3, 0.25)
        assert r["ppl_reduction"] == pytest.approx(2.306, abs=1e-3)
    rows, notes = statistics.contrast(runs["a"], runs["c"], "seq_only")
    assert rows == [] and len(notes) == 1 and "precision" in notes[0]
    analyze.main(["--contrast", str(tmp_path / "a" / "web"), str(tmp_path / "b" / "web")])
    out = capsys.readouterr().out
    assert "every run at bf16=0 compile=0" in out
    assert "| B − A | -0.0233 | 0.0033 | -7.00 | 0.0198 | [-0.0377, -0.0090] | 3/3 | 0.25 | +2.31 |" in out
    assert "| 2 | +0.0100 | -0.0200 | -0.0300 |" in out
    with pytest.raises(SystemExit, match="no configuration of"):
        analyze.main(["--contrast", str(tmp_path / "a" / "web"), str(tmp_path / "c" / "web")])
    assert "not contrasted" in capsys.readouterr().out and "precision" in notes[0]
    # within one study too: seq_depth at bf16 against seq_only in fp32 is no pair, and the note says why
    for seed in range(3):
        write_run(tmp_path / "d", "web", "seq_only", seed, a_only[seed])
        write_run(tmp_path / "d", "web", "seq_depth", seed, a_depth[seed], bf16=True)
    analyze.main([str(tmp_path / "d" / "web")])
    out = capsys.readouterr().out
    assert "differ in precision" in out and "not paired" in out and "| seq_depth |" not in out
