"""Runs trained at once (train.py with several configurations and seeds, study.py's arguments) are each
the run train.py trains alone: model.GPT's own forward and loss under vmap, a fork of model.py reaching
every run, the same random draws, one step. Run: python -m pytest -q tests/test_study.py"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import torch.nn as nn
from conftest import TINY_PYTHON, needs_triton

import bench
import model as model_py
import prepare
import rotary
import study
import train
from model import GPT, GPTConfig
from treerope import batches, budget, ensemble, machine, training
from treerope.batches import Split, coords_for
from treerope.prepared import corpus_stats

SMALL = ["--steps=5", "--n_layer=2", "--n_embd=128", "--n_head=1", "--max_len=64",
         "--docs_per_step=8", "--val_docs=8", "--test_docs=8", "--compile=0", "--bf16=0", "--milestones=5",
         "--mb_tokens=128", "--lr=0.01"]
# (training loss, validation loss) at each of 5 steps, recorded from train.py as it was at ecb659c
# (before the study existed), on tests/conftest.py's tiny_python with SMALL's values: lr 0.01 makes
# the two configurations differ by up to 1e-3 relative, so a swapped rotary table cannot pass
ECB659C = {
    ("seq_only", 0): [(6.288134932518005, 6.1728238302563865), (6.182130455970764, 5.786147707984561),
                      (5.7766724824905396, 5.531652662489149), (5.383550405502319, 5.469388447110615),
                      (5.391685485839844, 5.450634910946801)],
    ("seq_only", 1): [(6.257107496261597, 6.071981763082837), (6.075578093528748, 5.920977395678324),
                      (5.877453923225403, 5.5231869409954735), (5.70598828792572, 5.456852504185268),
                      (5.362096309661865, 5.432109772212922)],
    ("seq_depth", 0): [(6.288137435913086, 6.172437637571305), (6.1818764209747314, 5.785338749961247),
                       (5.776518225669861, 5.5313220553927955), (5.383010149002075, 5.468534923735119),
                       (5.3915873765945435, 5.450214446537078)],
    ("seq_depth", 1): [(6.257115840911865, 6.072459871806796), (6.075195908546448, 5.926043313647074),
                       (5.881578087806702, 5.5259338863312255), (5.707609176635742, 5.458250742109995),
                       (5.363399982452393, 5.4331942361498635)],
}


def losses(out, config, seed, corpus=None):
    corpus = corpus or next(c for c in ("python", "code") if os.path.exists(os.path.join(out, c)))
    log = [json.loads(line) for line in open(os.path.join(out, corpus, config, f"seed{seed}", "log.jsonl"))]
    return [(e["train_loss"], e["val_loss"]) for e in log]


# the losses were recorded on an AMD EPYC: train.py itself on an Intel Xeon (AVX-512) rounds 1.3e-5 away
# at step 2 of the shared-row test, and CUDA's fp32 kernels (speed_check) sum in other orders still, which
# 5 steps at lr 0.01 amplify; a swapped rotary table moves them 1e-3
REL = 2e-4 if torch.cuda.is_available() else 5e-5


def assert_matches(got, want):
    assert len(got) == len(want)
    for (t, v), (t0, v0) in zip(got, want):
        assert t == pytest.approx(t0, rel=REL) and v == pytest.approx(v0, rel=REL)


def trained(corpus, configs, seeds, *options):
    """train.py over every (configuration, seed) at once, with study.py's arguments."""
    return train.main(study.arguments([corpus, configs, seeds, *options]))


def test_a_study_trains_each_run_as_train_py_did(tiny_python, tmp_path):
    out = str(tmp_path)
    dirs = trained("python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", out, *SMALL)
    assert len(dirs) == 4
    for (config, seed), want in ECB659C.items():
        assert_matches(losses(out, config, seed), want)
        run = os.path.join(out, "python", config, f"seed{seed}")
        assert {"config.json", "log.jsonl", "ckpt.pt", "final.json"} <= set(os.listdir(run))
        final = json.load(open(os.path.join(run, "final.json")))
        assert final["val_loss"] == pytest.approx(want[-1][1], rel=REL) and final["test_records"] == 8
    # finished runs are skipped, as sweep.sh skips them
    assert trained("python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", out, *SMALL) == []


# ------------------------------------------------------------ a fork of model.py reaches every run ----
def qk_norm(monkeypatch):
    """nanochat's QK-norm: an RMSNorm with weights on each head's queries and keys before the rotation."""
    init, forward = model_py.Attention.__init__, model_py.Block.forward

    def planted_init(self, cfg, layer):
        init(self, cfg, layer)
        self.q_norm, self.k_norm = nn.RMSNorm(cfg.n_embd // cfg.n_head), nn.RMSNorm(cfg.n_embd // cfg.n_head)

    def planted_forward(self, x, C, rotary, return_attn=False, blocked=None):
        def normed(q, k, C, layer):
            return rotary(self.attn.q_norm(q), self.attn.k_norm(k), C, layer)
        return forward(self, x, C, normed, return_attn, blocked)
    monkeypatch.setattr(model_py.Attention, "__init__", planted_init)
    monkeypatch.setattr(model_py.Block, "forward", planted_forward)


def untied_head(bias):
    """The output head untied from the embedding, with a bias or without (initialised away from 0)."""
    def plant(monkeypatch):
        init = model_py.GPT.__init__

        def planted(self, cfg):
            init(self, cfg)
            self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=bias)
            nn.init.normal_(self.lm_head.weight, 0.0, 0.02)
            if bias:
                nn.init.normal_(self.lm_head.bias, 0.0, 1.0)
        monkeypatch.setattr(model_py.GPT, "__init__", planted)
    return plant


def rewritten(term=None, hidden=None, shared=False):
    """GPT.forward as a fork rewrites it: `hidden`(model, x) on the final hidden state, `term`(logits,
    nll, targets) in the loss branch (logits first, then the NLL; with `shared`, the logits of both
    branches): a gain, a z-loss or a soft-cap written where a fork writes them, the rest model.py's."""
    def plant(monkeypatch):
        def forward(self, idx, C, targets=None, return_attn=False, blocked=None):
            x = self.drop(self.wte(idx))
            for block in self.blocks:
                x, _ = block(x, C, self.rotary, return_attn, blocked)
            x = self.ln_f(x) if hidden is None else hidden(self, self.ln_f(x))
            logits = self.lm_head(x).float()
            if term and shared:
                logits = term(logits, None, None)
            if targets is None:
                return logits, None, None
            if term and not shared:
                logits = term(logits, None, targets)
            nll = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1,
                                              reduction="none").view(targets.shape)
            return None, nll if term is None else term(logits, nll, targets), None
        monkeypatch.setattr(model_py.GPT, "forward", forward)
    return plant


def z_loss(logits, nll, targets):
    """PaLM's auxiliary z-loss, 1e-2 x log(Z)^2 per predicted token (large: 5 steps must show it)."""
    return logits if nll is None else nll + 1e-2 * logits.logsumexp(-1).square() * (targets >= 0)


def soft_cap(logits, nll, targets):
    """Gemma's logit soft-cap, 2 tanh(logits / 2): tight, so 5 steps show it."""
    return 2.0 * torch.tanh(logits / 2.0) if nll is None else nll


def a_gain_on_gpt(monkeypatch):
    """A parameter set directly on GPT (not in a submodule): a learned gain on the final hidden state,
    used in GPT.forward itself."""
    init = model_py.GPT.__init__

    def planted(self, cfg):
        init(self, cfg)
        self.gain = nn.Parameter(torch.full((cfg.n_embd,), 1.7))
    monkeypatch.setattr(model_py.GPT, "__init__", planted)
    rewritten(hidden=lambda model, x: x * model.gain)(monkeypatch)


def a_new_dropout_site(monkeypatch):
    """A dropout site model.GPT did not have: on the attention's queries and keys, before the rotation."""
    init, forward = model_py.Attention.__init__, model_py.Block.forward

    def planted_init(self, cfg, layer):
        init(self, cfg, layer)
        self.qk_drop = model_py.Dropout(0.3)

    def planted_forward(self, x, C, rotary, return_attn=False, blocked=None):
        def dropped(q, k, C, layer):
            return rotary(self.attn.qk_drop(q), k, C, layer)
        return forward(self, x, C, dropped, return_attn, blocked)
    monkeypatch.setattr(model_py.Attention, "__init__", planted_init)
    monkeypatch.setattr(model_py.Block, "forward", planted_forward)


def an_angle_law(monkeypatch):
    """Rotary.angles changed: every present coordinate turns by 1.5 x its angle (a steeper law)."""
    angles = rotary.Rotary.angles
    monkeypatch.setattr(rotary.Rotary, "angles", lambda self, C, i: 1.5 * angles(self, C, i))


FORKS = {"qk_norm": qk_norm, "untied_head": untied_head(False), "lm_head_bias": untied_head(True),
         "z_loss": rewritten(z_loss), "soft_cap": rewritten(soft_cap),
         "soft_cap_shared": rewritten(soft_cap, shared=True), "gain_on_gpt": a_gain_on_gpt,
         "new_dropout_site": a_new_dropout_site, "angle_law": an_angle_law}


FORK_LR = "--lr=0.003"   # at 0.01 a fork amplifies float rounding past REL in 5 steps (QK-norm: 1.8e-4)


@pytest.fixture(scope="module")
def unforked(tiny_python, tmp_path_factory):
    """train.py's seq_depth seed 1 at FORK_LR, model.py as it is: what each fork must move."""
    out = str(tmp_path_factory.mktemp("unforked"))
    train.main(["--corpus", "python", "--config", "seq_depth", "--seed", "1", "--data", tiny_python,
                "--out", out, *SMALL, FORK_LR])
    return losses(out, "seq_depth", 1)


@pytest.mark.parametrize("fork", FORKS)
def test_a_fork_of_model_py_reaches_train_py_and_the_study_alike(fork, tiny_python, unforked, tmp_path,
                                                                  monkeypatch):
    """Each fork a card's user makes for an ablation, planted in-process, moves train.py's losses (by more
    than 1e-3 at some step), and the study of four runs trains the forked model run by run at REL: there is
    no second head, loss, dropout list or angle law for a fork to miss (at 6e209dc the study kept its own
    head and loss, so the z-loss, soft-cap and bias never reached it, and the gain, new site and angle law
    failed or were ignored there)."""
    FORKS[fork](monkeypatch)
    alone, together = str(tmp_path / "train"), str(tmp_path / "study")
    train.main(["--corpus", "python", "--config", "seq_depth", "--seed", "1", "--data", tiny_python,
                "--out", alone, *SMALL, FORK_LR])
    trained("python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", together, *SMALL, FORK_LR)
    planted = losses(alone, "seq_depth", 1)
    assert max(abs(a - b) for p, q in zip(planted, unforked) for a, b in zip(p, q)) > 1e-3   # train.py moved
    assert_matches(losses(together, "seq_depth", 1), planted)                              # the study alike


@pytest.mark.parametrize("pack", [[], ["--pack=1"]])
def test_a_run_with_dropout_draws_alike_alone_and_in_a_study(tiny_python, tmp_path, pack):
    """With dropout 0.1 and depth dropout 0.3, seq_depth seed 1 trained alone (train.py) and in a study of
    four (its rows grouped with the others', padded otherwise) gives the same losses at REL: each row's
    masks and hidden depths come from the row's own generator, whatever its micro-batch (at 6e209dc the two
    were 3e-4 apart: other generators, and depth hidden per row of a micro-batch); so too with --pack."""
    noisy = [*SMALL, *pack, "--dropout=0.1", "--depth_dropout=0.3"]
    alone, together, plain = str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c")
    run = ["--corpus", "python", "--config", "seq_depth", "--seed", "1", "--data", tiny_python]
    train.main([*run, "--out", alone, *noisy])
    trained("python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", together, *noisy)
    a, b = losses(alone, "seq_depth", 1), losses(together, "seq_depth", 1)
    if pack:                                          # the same packed run without dropout
        train.main([*run, "--out", plain, *SMALL, *pack])
    clean = losses(plain, "seq_depth", 1) if pack else ECB659C[("seq_depth", 1)]
    assert abs(a[-1][0] - clean[-1][0]) > 1e-3      # dropout did change the run
    assert_matches(b, a)


def test_rand_axials_labels_are_drawn_alike_alone_and_in_a_study(tmp_path):
    """rand_axial's random paragraph labels (paper 004 §3.3) are a row's draws too: alone and beside
    another configuration and seed, the same losses (on the code corpus of the 40 distutils files)."""
    src = tmp_path / "src"
    src.mkdir()
    for p in TINY_PYTHON:
        shutil.copy(p, src / os.path.basename(p))
    data = str(tmp_path / "data")
    prepare.main(["code", "--src", str(src), "--out", data, "--vocab", "300", "--max_len", "64",
                  "--workers", "1"])
    args = ["--data", data, *SMALL, "--n_head=2"]
    alone, together = str(tmp_path / "a"), str(tmp_path / "b")
    train.main(["--corpus", "code", "--config", "rand_axial", "--seed", "1", "--out", alone, *args])
    trained("code", "flat rand_axial", "0 1", "--out", together, *args)
    a = losses(alone, "rand_axial", 1)
    assert_matches(losses(together, "rand_axial", 1), [(t, v) for t, v in a])


def test_a_benchmark_study_writes_no_checkpoint(tiny_python, tmp_path):
    """--checkpoint=0 (study_bench's runs, through bench.py): train.py's recorded losses, the log and
    final.json written, no ckpt.pt (at the Python setting 157 MB a run at each milestone)."""
    out = str(tmp_path)
    trained("python", "seq_depth", "1", "--data", tiny_python, "--out", out, *SMALL, "--checkpoint=0")
    assert_matches(losses(out, "seq_depth", 1), ECB659C[("seq_depth", 1)])
    assert sorted(os.listdir(os.path.join(out, "python", "seq_depth", "seed1"))) == \
        ["config.json", "final.json", "log.jsonl"]


def planned(tiny_python, tmp_path, configs, seeds, *options):
    """Each run of a command line planned and its model built (training.plan, training.setup)."""
    values = training.parse(study.arguments(["python", configs, seeds, "--data", tiny_python, "--out",
                                             str(tmp_path), *SMALL, *options]))
    return [training.setup(training.plan(c, origin, True, quiet=True)) for c, origin in values]


def test_each_run_starts_from_its_seeds_weights(tiny_python, tmp_path):
    """The weights each run starts from are train.py's at that seed: equal across configurations
    outside the rotary, different across seeds."""
    runs = planned(tiny_python, tmp_path, "seq_only seq_depth", "0 1")
    w = [{k: v for k, v in r.model.state_dict().items() if not k.startswith("rotary")} for r in runs]
    assert all(torch.equal(w[0][k], w[1][k]) for k in w[0])            # seed 0: seq_only == seq_depth
    assert all(torch.equal(w[2][k], w[3][k]) for k in w[0])            # seed 1
    assert not torch.equal(w[0]["wte.weight"], w[2]["wte.weight"])
    torch.manual_seed(1)
    ref = training.GPT(runs[3].mcfg).state_dict()
    assert all(torch.equal(ref[k], w[3][k]) for k in w[3])


def test_a_non_finite_run_stops_alone(tiny_python, tmp_path, monkeypatch, capsys):
    """seq_depth seed 1 gets a NaN weight before its third step: it stops there with its step-2
    checkpoint and no final.json, train.py names it and exits 2, and the other three runs finish with
    train.py's losses, untouched by it."""
    rows = train.step_rows

    def poisoned(run, T=None):
        if (run.cfg.config, run.cfg.seed, run.step) == ("seq_depth", 1, 2):
            with torch.no_grad():
                run.model.wte.weight[0, 0] = float("nan")
        return rows(run, T)
    monkeypatch.setattr(train, "step_rows", poisoned)
    out = str(tmp_path)
    with pytest.raises(SystemExit) as e:
        trained("python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", out, *SMALL)
    bad, said = os.path.join(out, "python", "seq_depth", "seed1"), capsys.readouterr().err
    assert e.value.code == 2 and "diverged" in said and bad in said
    assert not os.path.exists(os.path.join(bad, "final.json"))
    assert [e["step"] for e in map(json.loads, open(os.path.join(bad, "log.jsonl")))] == [1, 2]
    assert "loss is nan at step 2" in said
    for key in [("seq_only", 0), ("seq_only", 1), ("seq_depth", 0)]:
        assert_matches(losses(out, *key), ECB659C[key])


def test_a_runs_random_draws_do_not_depend_on_its_company(tiny_python, tmp_path):
    """With dropout and depth dropout on, seq_depth seed 0 trained alone and beside seq_only seed 1
    gives the same losses: its masks come from its own rows' generators (one shared stream would differ
    by ~1e-2 nats here)."""
    noisy = [*SMALL, "--dropout=0.2", "--depth_dropout=0.5"]
    alone, company = str(tmp_path / "a"), str(tmp_path / "b")
    trained("python", "seq_depth", "0", "--data", tiny_python, "--out", alone, *noisy)
    trained("python", "seq_only seq_depth", "1 0", "--data", tiny_python, "--out", company, *noisy)
    a, b = losses(alone, "seq_depth", 0), losses(company, "seq_depth", 0)
    assert_matches(b, a)
    assert abs(a[-1][0] - ECB659C[("seq_depth", 0)][-1][0]) > 1e-3      # dropout did change the run


def test_runs_of_other_sizes_are_refused(tiny_python, tmp_path, monkeypatch):
    """A setting's per_config may change any value; one that changes the model's size cannot be
    trained at once with the others."""
    runs = planned(tiny_python, tmp_path, "seq_only seq_depth", "0")
    runs[1].mcfg.n_layer += 1
    with pytest.raises(SystemExit, match="one model size and batch.*n_layer 2 vs 3"):
        training.alike(runs)


def test_a_study_stopped_after_a_milestone_resumes_exactly(tiny_python, tmp_path, monkeypatch):
    """Killed right after its step-2 checkpoints, the same command resumes every run from step 2 and
    ends on the uninterrupted study's losses bit for bit (and on those recorded from train.py)."""
    out, whole = str(tmp_path / "killed"), str(tmp_path / "whole")
    args = ["python", "seq_only seq_depth", "0 1", "--data", tiny_python, *SMALL, "--out", out]
    trained(*args[:-1], whole)
    save = training.save_checkpoint

    def killed(obj, path):
        save(obj, path)
        if obj["step"] == 2 and "seq_depth/seed1" in path:   # the last run's checkpoint at step 2
            raise KeyboardInterrupt
    monkeypatch.setattr(training, "save_checkpoint", killed)
    with pytest.raises(KeyboardInterrupt):
        trained(*args)
    monkeypatch.setattr(training, "save_checkpoint", save)
    assert not any(os.path.exists(os.path.join(out, "python", c, f"seed{s}", "final.json"))
                   for c, s in ECB659C)
    trained(*args)
    for key, want in ECB659C.items():
        assert losses(out, *key) == losses(whole, *key)
        assert_matches(losses(out, *key), want)


# the same, recorded from train.py at ecb659c with a context of 256: one record per row there, while
# rows of the context (compiled, --pack) lay short records into shared rows, each attending only inside itself
ECB659C_256 = {
    ("seq_depth", 0): [(6.2769246101379395, 6.185602100972597), (6.117104887962341, 5.868822126824239),
                       (5.749936103820801, 5.537140589680163), (5.437602937221527, 5.512566193711334)],
    ("seq_only", 1): [(6.240443587303162, 6.120736678844781), (6.021673947572708, 6.672688208255671),
                      (6.78110671043396, 5.599097237369131), (5.550319194793701, 5.56028228604854)],
}


def test_records_sharing_a_row_train_as_alone(tiny_python, tmp_path, monkeypatch):
    """Rows of the context (a compiled run's, eager here) lay several records in a row, each attending
    only inside itself: every run trains as it did one record a row."""
    context = lambda run: run.mcfg.max_len   # noqa: E731
    monkeypatch.setattr(training, "fixed_rows", context)       # closed()'s evaluation
    monkeypatch.setattr(train, "fixed_rows", context)
    layouts, shared = Split.micro_batches, []

    def watched(self, rows, budget_, T=None):
        for at, seg, which in layouts(self, rows, budget_, T):
            shared.append(bool((seg > 0).any()))
            yield at, seg, which
    monkeypatch.setattr(Split, "micro_batches", watched)
    out = str(tmp_path)
    wide = [a for a in SMALL if not a.startswith(("--max_len", "--mb_tokens", "--steps", "--milestones"))]
    trained("python", "seq_depth seq_only", "0 1", "--data", tiny_python, "--out", out, *wide,
            "--max_len=256", "--mb_tokens=512", "--steps=4", "--milestones=4")
    assert sum(shared) >= 4                                   # rows holding two or more records
    for key, want in ECB659C_256.items():
        assert_matches(losses(out, *key), want)


def test_the_ensemble_is_each_runs_model(tiny_python):
    """ensemble.Ensemble (model.GPT's own forward and loss under vmap, each run's weights, its rotary
    tables in one frame, its dropout masks) over runs of different configurations — other coordinates, a
    layer split, a head split, the directed offset's overlay — gives each run's own model.GPT NLL token
    by token and its gradients, with a row holding two records and with dropout masks handed in."""
    data_dir = os.path.join(tiny_python, "python")
    meta, corpus = corpus_stats(data_dir)
    split = Split(data_dir, "val", 256)
    names = ("seq_only", "seq_tree_depth", "st", "head_split", "ref_directed")
    models = []
    for i, name in enumerate(names):
        torch.manual_seed(i)
        models.append(GPT(GPTConfig(vocab_size=meta["tokenizer"]["vocab"], n_layer=2, n_embd=256, n_head=2,
                                    max_len=256, configuration=name, corpus=corpus, dropout=0.1)))
        with torch.no_grad():   # trained-looking rates, offsets and norms' weights, unequal across planes
            for n, p in models[-1].named_parameters():
                if n.startswith("rotary") or ".ln_" in n or n.startswith("ln_"):
                    p.add_(torch.rand(p.shape, generator=torch.Generator().manual_seed(i)) * 0.3)
    short = [int(i) for i in np.argsort(split.len)[:2]]
    rows = [[short[0] + 1], short, [3]]                           # a shared row: attention per record
    M, ens = len(models), ensemble.Ensemble(models)
    at, seg = split.positions(rows, 256)
    b = split.gather(torch.from_numpy(np.stack([at] * M)), torch.from_numpy(np.stack([seg] * M)))
    C = torch.stack([batches.coordinates({k: v[m] for k, v in b.items()}, ens.names, corpus)
                     for m in range(M)])
    g = torch.Generator().manual_seed(0)
    masks = {k: torch.rand(M, len(rows), *shape, generator=g) > p for k, (p, shape) in ens.sites.items()}
    assert len(masks) == 1 + 3 * 2                                # embeddings, then 3 sites a layer
    s = b["seg"]
    W = ens.weights()
    got = ens(W, masks, b["tokens"], C, b["targets"], s[..., :, None] != s[..., None, :])
    got.sum().backward()
    ens.hand(W)
    for m, model in enumerate(models):
        mine = {k: p.grad for k, p in model.named_parameters()}
        model.zero_grad(set_to_none=True)
        for k, v in masks.items():
            model.get_submodule(k).keep = v[m]
        own = {k: v[m] for k, v in b.items()}
        _, want, _ = model(own["tokens"], coords_for(model, own, corpus), own["targets"],
                           blocked=own["seg"][:, :, None] != own["seg"][:, None, :])
        want.sum().backward()
        assert torch.allclose(got[m], want, atol=1e-5, rtol=1e-5), names[m]
        for k, p in model.named_parameters():
            assert torch.allclose(mine[k], p.grad, atol=1e-5, rtol=1e-4), (names[m], k)
    assert not torch.allclose(got[0], got[1], atol=1e-3)         # the configurations do differ


@pytest.mark.slow   # two compiles of the step: about a minute on 2 cores
@pytest.mark.skipif(not shutil.which(os.environ.get("CXX", "c++")), reason="inductor needs C++")
def test_a_compiled_study_has_no_graph_break_and_trains_the_eager_curve(tiny_python, tmp_path):
    from torch._dynamo.utils import counters
    counters.clear()
    out = str(tmp_path)
    trained("python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", out,
            *[a for a in SMALL if a != "--compile=0"], "--compile=1")
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] >= 1
    for key, want in ECB659C.items():
        got = losses(out, *key)
        assert [t for t, _ in got] == pytest.approx([t for t, _ in want], rel=1e-4)


def test_two_runs_in_one_folder_are_refused(tiny_python, tmp_path):
    base = ["--data", tiny_python, "--out", str(tmp_path), *SMALL]
    with pytest.raises(SystemExit, match="two runs would share a folder"):
        trained("python", "seq_only", "0 0", *base)
    with pytest.raises(SystemExit, match="--name with several configurations"):
        trained("python", "seq_only seq_depth", "0", *base, "--name", "variant")


def test_a_refused_configuration_is_named_before_any_folder_is_written(tiny_python, tmp_path):
    """tree_only needs 60 planes; 64-wide heads have 32: refused, named, and seq_only's folder (planned
    first) not written."""
    with pytest.raises(SystemExit, match="--config tree_only: configuration needs 60 planes"):
        trained("python", "seq_only tree_only", "0", "--data", tiny_python, "--out", str(tmp_path), *SMALL,
                "--n_head=2")
    assert not os.path.exists(os.path.join(str(tmp_path), "python", "seq_only"))


def test_finished_runs_are_skipped_only_when_trained_as_asked(tiny_python, tmp_path):
    args = ["python", "seq_only", "0", "--data", tiny_python, "--out", str(tmp_path), *SMALL]
    run = trained(*args, "--steps=2", "--milestones=1")
    final = os.path.join(run, "final.json")
    when = os.stat(final).st_mtime_ns
    assert trained(*args, "--steps=2", "--milestones=1") == run and os.stat(final).st_mtime_ns == when  # done
    with pytest.raises(SystemExit, match="finished with other values .*steps: 2 there, 3 now"):
        trained(*args, "--steps=3", "--milestones=1")


def test_a_best_milestone_run_that_diverges_before_any_milestone_reports_nothing(tiny_python, tmp_path,
                                                                                 capsys):
    """Reported at its best milestone, a run with none has nothing to report: no final.json, named."""
    out = str(tmp_path)
    with pytest.raises(SystemExit) as e:
        trained("python", "seq_only", "0", "--data", tiny_python, "--out", out, *SMALL, "--lr=1e30",
                "--report", "best_milestone", "--milestones=1")
    assert e.value.code == 2 and "diverged" in capsys.readouterr().err
    assert not os.path.exists(os.path.join(out, "python", "seq_only", "seed0", "final.json"))


def compiled(monkeypatch):
    """torch.compile through the aot_eager backend (dynamo's graphs, no C++ needed): its counters."""
    from torch._dynamo.utils import counters
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda f, **kw: compile_(f, backend="aot_eager"))
    monkeypatch.setattr(training.shutil, "which", lambda name: name)   # training.setup: compile stays on
    torch._dynamo.reset()
    counters.clear()
    return counters


def test_a_run_stopping_early_leaves_one_graph_per_mode_and_its_state(tiny_python, tmp_path, monkeypatch):
    """seq_depth seed 0 stops early at its step-2 milestone; the other runs train on to step 5. The
    study compiles one training and one evaluation graph (a batch that shrank when the run stopped
    would compile more), and the stopped run keeps its step-2 weights, optimizer moments and step."""
    counters = compiled(monkeypatch)
    milestone, close, seen = training.milestone, training.closed, {}

    def stops(run, *a):
        run.done = milestone(run, *a) or (run.cfg.config, run.cfg.seed, run.step) == ("seq_depth", 0, 2)
        return run.done

    def keeps(runs, lanes_):
        seen["runs"] = runs
        return close(runs, lanes_)
    monkeypatch.setattr(train, "milestone", stops)
    monkeypatch.setattr(train, "closed", keeps)
    out = str(tmp_path)
    trained("python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", out,
            *[a for a in SMALL if a != "--compile=0"], "--compile=1")
    assert counters["stats"]["unique_graphs"] == 2, dict(counters["stats"])
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    r = next(r for r in seen["runs"] if (r.cfg.config, r.cfg.seed) == ("seq_depth", 0))
    ck = torch.load(os.path.join(out, "python", "seq_depth", "seed0", "ckpt.pt"), weights_only=False)
    assert r.step == ck["step"] == 2
    assert all(torch.equal(v, ck["model"][k]) for k, v in r.model.state_dict().items())
    state = r.opt.state_dict()["state"]
    assert state and all(torch.equal(v, ck["opt"]["state"][i][k]) for i in state for k, v in state[i].items())
    assert [len(losses(out, c, s)) for c, s in ECB659C] == [5, 5, 2, 5]


def test_a_budgeted_compiled_study_reuses_its_probes_graphs(tiny_python, tmp_path, monkeypatch, capsys):
    """--budget's timed steps compile the training graph; the runs planned afresh after them, every
    seed fitting, train on it (dynamo's cache: the same function, backend and shapes): one training
    and one evaluation graph in all, not a second training one."""
    counters = compiled(monkeypatch)
    trained("python", "seq_only seq_depth", "0", "--data", tiny_python, "--out", str(tmp_path),
            *[a for a in SMALL if a != "--compile=0"], "--compile=1", "--steps=2", "--budget=100000")
    assert "training seed 0 of 1 at 2 steps" in capsys.readouterr().out
    assert counters["stats"]["unique_graphs"] == 2, dict(counters["stats"])
    calls = []                       # fewer than asked: the time of a second training compile kept too
    monkeypatch.setattr(budget, "fitting", lambda *a: (calls.append(a[-1]), (1, 1))[1])
    trained("python", "seq_only seq_depth", "0", "--data", tiny_python, "--out", str(tmp_path / "short"),
            *[a for a in SMALL if a != "--compile=0"], "--compile=1", "--steps=2", "--budget=100000")
    assert len(calls) == 2 and 0 < calls[0] - calls[1] < 100, calls


def test_the_hrope_recipe_compiles_without_a_graph_break(tiny_python, tmp_path, monkeypatch):
    """The hRoPE recipe's dropout 0.1 draws each run's masks outside the compiled step (a generator inside
    it breaks the graph: "Failed to convert args/kwargs to proxy") and hands them in."""
    counters = compiled(monkeypatch)
    trained("python", "seq_only seq_depth", "0", "--data", tiny_python, "--out", str(tmp_path),
            *[a for a in SMALL if a not in ("--compile=0", "--lr=0.01")], "--compile=1",
            "--dropout=0.1", "--steps=2", "--milestones=1")
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 2, dict(counters["stats"])


def test_rows_are_laid_by_index_arithmetic_as_by_hand():
    """Split.positions (vectorised): records laid end to end in their rows, -1 after; an empty row
    stays padding; a bare record id is a row of one."""
    s = Split.__new__(Split)
    s.len, s.start = np.array([3, 1, 4]), np.array([0, 3, 10])
    at, seg = s.positions([[0, 1], [], 2, [1, 0]], 6)
    assert at.tolist() == [[0, 1, 2, 3, -1, -1], [-1] * 6, [10, 11, 12, 13, -1, -1], [3, 0, 1, 2, -1, -1]]
    assert seg.tolist() == [[0, 0, 0, 1, -1, -1], [-1] * 6, [0, 0, 0, 0, -1, -1], [0, 1, 1, 1, -1, -1]]


def test_the_runs_update_at_once_as_each_run_updates_alone(monkeypatch):
    """ensemble.clip + adamw_step are, run by run, torch's clip_grad_norm_(1.0) then the run's own
    AdamW.step(): weights, moments and step counts equal over two steps, the state as step() writes it
    (train.py resumes from it). A run over the clip (norm 6, planted) is scaled to 1 and one under it
    (0.5) is not; a norm taken over all runs, or a run's lr or decay given to another, fails here.
    Runs sharing their hyperparameters share one call: 4 calls for 2 sets of lr x (decay, none)."""
    def run(lr, wd, n_bias):
        torch.manual_seed(n_bias)
        model = torch.nn.Sequential(torch.nn.Linear(5, 2, bias=False), *map(torch.nn.LayerNorm, [3] * n_bias))
        return model, torch.optim.AdamW(training.param_groups(model, wd), lr=lr, betas=(0.9, 0.95),
                                        fused=True)
    ours, theirs = [[run(0.1, 0.1, 1), run(0.1, 0.1, 1), run(0.3, 0.5, 2)] for _ in range(2)]
    for (a, _), (b, _) in zip(ours, theirs):
        b.load_state_dict(a.state_dict())
    calls, adamw = [], ensemble.adamw
    monkeypatch.setattr(ensemble, "adamw", lambda *a, **k: calls.append(k["lr"]) or adamw(*a, **k))
    for step in range(2):
        for i, (model, _) in enumerate(ours):
            for p in model.parameters():       # run 0: all 1.5, norm 6 over 16 values; run 1: norm 0.5
                p.grad = torch.full_like(p, 1.5 if i == 0 else 0.125) if i < 2 else torch.randn_like(p)
        for (a, _), (b, _) in zip(ours, theirs):
            for p, q in zip(a.parameters(), b.parameters()):
                q.grad = p.grad.clone()
        assert sum(p.grad.square().sum() for p in ours[0][0].parameters()).sqrt() == pytest.approx(6.0)
        ensemble.clip([m for m, _ in ours])
        assert ours[0][0][0].weight.grad.tolist() == [[pytest.approx(1.5 / 6)] * 5] * 2   # scaled to norm 1
        assert (ours[1][0][0].weight.grad == 0.125).all()                    # under 1: as it was
        ensemble.adamw_step([o for _, o in ours])
        for model, opt in theirs:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        for (a, oa), (b, ob) in zip(ours, theirs):
            for p, q in zip(a.parameters(), b.parameters()):
                assert torch.allclose(p, q, rtol=0, atol=1e-7)
            mine, torchs = oa.state_dict()["state"], ob.state_dict()["state"]
            assert mine.keys() == torchs.keys()
            for k in torchs:
                for name, t in torchs[k].items():
                    assert mine[k][name].dtype == t.dtype and mine[k][name].device == t.device
                    assert torch.allclose(mine[k][name], t, rtol=0, atol=1e-7)
    assert calls == [0.1, 0.1, 0.3, 0.3] * 2


def test_a_study_too_large_for_the_device_is_refused(tiny_python, tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "device_bytes", lambda device: 2 ** 20)   # a 1 MiB device
    with pytest.raises(SystemExit, match="2 runs of .* would need about .* GiB a step .*; train fewer seeds"):
        trained("python", "seq_only seq_depth", "0", "--data", tiny_python, "--out", str(tmp_path), *SMALL)
    assert not os.path.exists(tmp_path / "python")


@pytest.mark.slow   # the kernel in triton's interpreter: about a minute on 2 cores
@needs_triton
def test_the_fused_rotation_inside_a_compiled_study_step_trains_the_eager_curve(tiny_python, tmp_path,
                                                                              monkeypatch):
    """--kernel on CPU: the Triton kernel (its custom op under vmap, in triton's interpreter) inside the
    compiled step of two runs, without a graph break, trains the readable eager rotation's losses."""
    args = ["python", "seq_depth seq_tree_depth", "0", "--data", tiny_python, *SMALL, "--steps=2",
            "--milestones=2", "--n_embd=256", "--n_head=2"]
    eager = str(tmp_path / "eager")
    trained(*args, "--out", eager)
    # launches counted in a tensor: a list's length would be a guard, each launch a recompile
    counters, launched = compiled(monkeypatch), torch.zeros(())
    kernel = rotary.rotate_triton
    monkeypatch.setattr(rotary, "rotate_triton", lambda *a: (launched.add_(1), kernel(*a))[1])
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    fused = str(tmp_path / "fused")
    trained(*args, "--out", fused, "--compile=1", "--kernel=1")
    assert launched > 0 and sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 2
    for config in ("seq_depth", "seq_tree_depth"):
        for (t, v), (t0, v0) in zip(losses(fused, config, 0), losses(eager, config, 0)):
            assert t == pytest.approx(t0, rel=1e-4) and v == pytest.approx(v0, rel=1e-4)


@needs_triton
def test_the_kernel_is_refused_where_it_is_not_the_angle_law(tiny_python, tmp_path, monkeypatch):
    """--kernel checks the fused rotation against Rotary.angles on the run's own coordinates (outputs
    and rate gradients): a forked angle law (x 1.5) is refused in one line before anything is written,
    not trained past by the kernel, which keeps the law it was written with."""
    an_angle_law(monkeypatch)
    with pytest.raises(SystemExit, match="--kernel: the fused rotation is not Rotary.angles' here"):
        train.main(["--corpus", "python", "--config", "seq_depth", "--data", tiny_python, "--out",
                    str(tmp_path), *SMALL, "--kernel=1", "--max_len=32"])
    assert not os.path.exists(tmp_path / "python")


def test_eager_rows_hold_a_record_each_grouped_by_length_as_by_hand():
    """Eager, a row is one record: each run's records sorted by length, rank by rank the runs' longest
    grouped as one run's records are (batches.by_length, 600 padded tokens here), each micro-batch padded
    to its own longest. Planted: run A's lengths 100, 300, 200, 250; run B's 260, 90, 310."""
    from types import SimpleNamespace
    lengths = np.array([100, 300, 200, 250, 260, 90, 310])
    split = SimpleNamespace(len=lengths, start=np.concatenate([[0], np.cumsum(lengths)[:-1]]))
    split.positions = lambda rows, T: Split.positions(split, rows, T)
    got = list(Split.micro_batches(split, [[0, 1, 2, 3], [4, 5, 6]], 600))
    # ranks' longest: 100, 260, 310, 300; grouped (sorted): ranks 0-1 at 260, rank 3 at 300, rank 2 at 310
    assert [at.shape for at, _, _ in got] == [(2, 2, 260), (2, 1, 300), (2, 1, 310)]
    firsts = [[[int(split.start[r]) if r is not None else -1 for r in run] for run in mb]
              for mb in ([[0, 2], [5, 4]], [[1], [None]], [[3], [6]])]
    assert [at[:, :, 0].tolist() for at, _, _ in got] == firsts
    # each row's place in its run's rows (the draws' generator): A's 0, 2 then 1 then 3; B's 1, 0 then none, 2
    assert [w.tolist() for _, _, w in got] == [[[0, 2], [1, 0]], [[1], [-1]], [[3], [2]]]
    for at, seg, _ in got:                                             # each row its record, then padding
        for m in range(2):
            for row_at, row_seg in zip(at[m], seg[m]):
                n = int((row_at >= 0).sum())
                assert (row_at[:n] == row_at[0] + np.arange(n)).all() and (row_at[n:] == -1).all()
                assert (row_seg[:n] == 0).all() and (row_seg[n:] == -1).all()
                assert n in (0, *lengths)


def test_runs_dealt_to_a_process_a_core_train_each_run_as_train_py_did(tiny_python, tmp_path, monkeypatch):
    """Three cores: the four runs dealt in order to three processes (two runs, one, one), each on one
    thread; every run still trains train.py's curve, the first process returns every run's folder, and
    the first waits for the others (their final.json are written when it returns)."""
    monkeypatch.setattr(machine, "cores", lambda: 3)
    seen, batch = tmp_path / "seen", ensemble.micro_batch

    def noted(ens, runs, *a):   # each process's runs and threads, on disk (a fork's memory is its own)
        with open(seen, "a") as f:
            f.write(f"{os.getpid()} {torch.get_num_threads()} {' '.join(r.cfg.config for r in runs)}\n")
        return batch(ens, runs, *a)
    monkeypatch.setattr(train, "micro_batch", noted)
    out = str(tmp_path / "out")
    dirs = trained("python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", out, *SMALL)
    assert [os.path.relpath(d, out) for d in dirs] == [os.path.join("python", c, f"seed{s}") for s in (0, 1)
                                                       for c in ("seq_only", "seq_depth")]
    assert all(os.path.exists(os.path.join(d, "final.json")) for d in dirs)
    shares = {}
    for line in open(seen):
        pid, threads, configs = line.split(" ", 2)
        shares.setdefault(pid, set()).add((threads, configs.strip()))
    assert len(shares) == 3 and str(os.getpid()) in shares                        # the first trains a share
    assert sorted(v for s in shares.values() for v in s) == [("1", "seq_depth"), ("1", "seq_only"),
                                                              ("1", "seq_only seq_depth")]
    for key, want in ECB659C.items():
        assert_matches(losses(out, *key), want)


def test_a_forked_share_that_fails_fails_the_command(tiny_python, tmp_path, monkeypatch):
    """A share's process that diverges exits 2 and the command exits 2 once every share ended; one that
    crashes fails the command in one line naming its runs (never a success with runs unfinished)."""
    monkeypatch.setattr(machine, "cores", lambda: 2)
    close = training.closed
    for planted, want in (("diverged", 2), ("crashed", "ended with exit code 1")):
        def fails(runs, model):   # the second share's process (seed 1) fails as planted
            if runs[0].cfg.seed == 1 and planted == "crashed":
                raise RuntimeError("planted")
            return close(runs, model) or (runs[0].cfg.seed == 1 and planted == "diverged")
        monkeypatch.setattr(train, "closed", fails)
        out = str(tmp_path / planted)
        with pytest.raises(SystemExit) as e:
            trained("python", "seq_only", "0 1", "--data", tiny_python, "--out", out, *SMALL, "--steps=2",
                    "--milestones=1")
        assert e.value.code == want if planted == "diverged" else want in e.value.code
        assert "seed1" in str(e.value.code) or planted == "diverged"
        assert os.path.exists(os.path.join(out, "python", "seq_only", "seed0", "final.json"))


def stat(pid):
    """(state, parent pid) of a process from /proc, or None where it is gone."""
    try:
        state, parent = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[:2]
    except (OSError, ValueError):
        return None
    return state, int(parent)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_killing_train_py_ends_every_share(tiny_python, tmp_path):
    """train.py killed (as `timeout` or a user kills it) while two shares train: the forked share's process
    ends too, rather than training on unseen and holding its runs' folders (a rerun would be refused)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "train.py", "--corpus", "python", "--config", "seq_only", "--seed", "0", "1",
           "--data", tiny_python, "--out", str(tmp_path), *SMALL, "--steps=100000", "--milestones=1"]
    env = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True) as p:
        while "processes of one thread" not in (line := p.stdout.readline()):
            assert line, "train.py ended before dealing its runs"
        for _ in range(100):                          # the line is said, then the share forked
            children = [int(d) for d in os.listdir("/proc") if d.isdigit() and (stat(d) or "__")[1] == p.pid]
            if children:
                break
            time.sleep(0.1)
        assert len(children) == 1
        p.kill()
    for _ in range(100):                              # gone, or a zombie left for a reaper
        if (stat(children[0]) or ("Z",))[0] == "Z":
            break
        time.sleep(0.1)
    assert (stat(children[0]) or ("Z",))[0] == "Z"


def test_one_progress_bar_the_first_shares_and_tqdm_disable_honoured(tiny_python, tmp_path):
    """Two shares on one terminal: only the first draws its bar (seq_only's; two bars would overwrite each
    other on one line, turn by turn), and TQDM_DISABLE (tqdm's own switch; bench.py sets it) hides it."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for hidden in (False, True):
        cmd = [sys.executable, "train.py", "--corpus", "python", "--config", "seq_only", "seq_depth",
               "--data", tiny_python, "--out", str(tmp_path / str(hidden)), *SMALL, "--steps=2",
               "--milestones=1"]
        env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
        env.update(OMP_NUM_THREADS="2", **({"TQDM_DISABLE": "1"} if hidden else {}))
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0 and "2 processes of one thread" in done.stdout, done.stderr[-500:]
        assert "seq_depth:" not in done.stderr and ("seq_only:" in done.stderr) != hidden, done.stderr[-500:]


def test_a_dropout_run_begun_under_the_old_draws_is_refused_on_resume(tiny_python, tmp_path):
    """A dropout run whose checkpoint predates a row's own draws (its config records no "draws") would go
    on drawn otherwise: resuming it is refused in one line; a dropout-free one resumes."""
    for extra, refused in ((["--dropout=0.1"], True), ([], False)):
        out = str(tmp_path / str(refused))
        args = ["--corpus", "python", "--config", "seq_depth", "--data", tiny_python, "--out", out, *SMALL,
                *extra]
        train.main([*args, "--steps=2", "--milestones=2"])
        run = os.path.join(out, "python", "seq_depth", "seed0")
        ck = torch.load(os.path.join(run, "ckpt.pt"), weights_only=False)
        del ck["run"]["draws"], ck["checksum"]
        torch.save(ck, os.path.join(run, "ckpt.pt"))
        os.remove(os.path.join(run, "final.json"))
        if refused:
            with pytest.raises(SystemExit, match="made as before they were each row's own"):
                train.main([*args, "--steps=2", "--milestones=2"])
        else:
            train.main([*args, "--steps=2", "--milestones=2"])


def test_the_benchmark_pairs_each_repetitions_paths(monkeypatch):
    """`bench.py study --reps=3` alternates the paths and ends on the median of each repetition's own
    ratio (planted rates; a study paired with another repetition's separate runs, or a mean, fails)."""
    rates = iter([10.0, 10.0, 12.0, 8.0, 9.0, 10.0])       # study, separate: ratios 1.0, 1.5, 0.9
    order = []

    def ran(cmd, **kw):
        order.append("study" if "study.py" in cmd else "separate")
        return subprocess.CompletedProcess(cmd, 0)
    monkeypatch.setattr(bench.subprocess, "run", ran)
    monkeypatch.setattr(bench, "steady", lambda logs, one_clock: {"tokens/s": next(rates)})
    rows = bench.study(sizes=(8,), reps=3, say=lambda r: None)
    assert order == ["study", "separate"] * 3 and [r["rep"] for r in rows[:6]] == [1, 1, 2, 2, 3, 3]
    assert rows[-1]["each"] == "1.000 1.500 0.900" and rows[-1]["median of reps"] == 1.0


def test_the_benchmarks_window_is_each_runs_first_milestone_to_its_last():
    """bench.steady on planted logs. The study's runs share one clock: 2 runs of 300 and 500 tokens over
    windows of 8 and 10 training seconds read 800 / 10 = 80 tokens/s. Separate runs open over wall
    times 0-10 and 5-15 ran 20 s of windows in 15 s (concurrency 4/3): 18 training seconds count as
    13.5, 800 / 13.5 tokens/s. Warm-up before the window is reported apart; a window of under 100
    steps and 30 s says so. Counting from step 0 (warm-up in), or assuming perfect overlap, fails."""
    def log(first, last):   # (step, tokens, elapsed, time) at the first and last milestone
        return [dict(zip(("step", "tokens", "elapsed", "time"), e), flops=e[1] * 10, flops_executed=e[1] * 12)
                for e in (first, last)]
    runs = [log((10, 100, 4.0, 0.0), (110, 400, 12.0, 10.0)),
            log((10, 200, 5.0, 5.0), (110, 700, 15.0, 15.0))]
    together = bench.steady(runs, one_clock=True)
    assert together["tokens/s"] == pytest.approx(80.0) and together["GFLOP/s"] == pytest.approx(800 / 1e9)
    assert together["warm-up s"] == 5.0 and together["window"] == "100 steps 10.0 s"
    apart = bench.steady(runs, one_clock=False)
    assert apart["tokens/s"] == pytest.approx(800 / 13.5)
    assert apart["GFLOP/s executed"] == pytest.approx(9600 / 13.5 / 1e9)
    short = bench.steady([log((10, 0, 1.0, 0.0), (60, 50, 9.0, 9.0))], one_clock=True)
    assert short["window"] == "50 steps 8.0 s (short: < 100 steps and < 30 s)"


def test_the_benchmark_can_time_the_study_alone(monkeypatch):
    """--study_only (a GPU's compiled study, its MFU): no separate process is started, no ratio said."""
    order = []
    def ran(cmd, stdout, **kw):
        order.append(cmd[1])
        stdout.write("compiled: 2 graphs, 0 graph breaks\n")
        return subprocess.CompletedProcess(cmd, 0)
    monkeypatch.setattr(bench.subprocess, "run", ran)
    monkeypatch.setattr(bench, "steady", lambda logs, one_clock: {"tokens/s": 1.0})
    rows = bench.study(sizes=(16, 1), reps=2, say=lambda r: None, paths=("study",))
    assert order == ["study.py"] * 4 and [r["path"] for r in rows] == ["study"] * 4
    assert rows[0]["graphs"] == "2"


def test_the_benchmark_says_each_row_as_it_is_measured(tiny_python):
    """bench.py study's rows reach a pipe as each is measured: the M = 2 row is read while M = 1 still
    trains, and killed then (as `timeout` kills it), the process leaves that row said (a row buffered
    until the end arrives with M = 1's or not at all)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "bench.py", "study", "python", "2", "1", "--study_only", "--reps=1", "--data",
           tiny_python, *SMALL]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}   # a pipe: Python buffers
    with subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True) as p:
        said = [p.stdout.readline() for _ in range(2)]          # the header, then M = 2's row
        p.kill()
        rest = p.stdout.read()
    assert said[1].startswith("M 2  path study  runs 2  tokens/s") and "M 1" not in rest


def test_the_update_benchmark_counts_fewer_operators_at_once():
    """bench.py update: run by run, the operators grow with the runs (a clip and an AdamW step each); at
    once, by one gradient scale a run (a per-run AdamW call or norm left in adamw_runs or clip_runs fails)."""
    said = []
    bench.update((3, 6), reps=1, say=lambda line, flush: said.append(line))
    counts = [[int(n) for n in re.findall(r"(\d+) operators", line)] for line in said]
    (each3, once3), (each6, once6) = counts
    assert each6 == 2 * each3 and once3 < each3 / 2 and once6 - once3 <= 3   # + one scale a run


def test_a_budget_fits_seeds_then_steps_as_by_hand():
    """budget.fitting: a seed costs 100 steps of 2 s and 10 s of scoring (210 s). 1,000 s fit 4 seeds;
    5,000 s the 10 asked for; 150 s not one seed, so one seed at (150 - 10) / 2 = 70 steps; 10 s
    nothing, nor -24 s (the start-up overspent the budget)."""
    assert budget.fitting(2.0, 10.0, 100, 10, 1000.0) == (4, 100)
    assert budget.fitting(2.0, 10.0, 100, 10, 5000.0) == (10, 100)
    assert budget.fitting(2.0, 10.0, 100, 10, 150.0) == (1, 70)
    assert budget.fitting(2.0, 10.0, 100, 10, 10.0) == (0, 0)
    assert budget.fitting(2.0, 10.0, 100, 10, -24.0) == (0, 0)                # the budget overspent


def test_a_budgeted_study_drops_its_timed_steps(tiny_python, tmp_path, capsys):
    """--budget times the study's own first steps and, with room for every seed, trains them all from
    their initial weights: the losses train.py recorded, not runs PROBE steps ahead."""
    out = str(tmp_path)
    trained("python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", out, *SMALL,
            "--budget", "100000")
    said = capsys.readouterr().out
    assert "training seeds 0, 1 of 2 at 5 steps" in said
    assert said.count("values:") == said.count("precision:") == 1    # the plan said once, not re-said
    for (config, seed), want in ECB659C.items():
        assert_matches(losses(out, config, seed), want)


def test_a_rerun_budget_goes_on_with_the_seeds_left(tiny_python, tmp_path, monkeypatch, capsys):
    """A new user's trial: a budgeted study that trained seeds 0 and 1 of 0-2, run again, timed all six
    runs and picked seed 0 again (finished), so seed 2 was never trained. Now the finished runs are left
    out of the timing and the choice: one seed fits, and it is seed 2; seeds 0 and 1 are said done."""
    out, args = str(tmp_path), ["python", "seq_only seq_depth", "--data", tiny_python, "--out", str(tmp_path),
                                *SMALL]
    trained(args[0], args[1], "0 1", *args[2:])
    monkeypatch.setattr(budget, "fitting", lambda *a: (1, 5))
    trained(args[0], args[1], "0 1 2", *args[2:], "--budget=50")
    said = capsys.readouterr().out
    assert "training seed 2 of 1 at 5 steps" in said and said.count("done:") == 4
    assert json.load(open(os.path.join(out, "python", "seq_depth", "seed2", "final.json")))["step"] == 5


def test_check_names_the_runs_it_would_train(tiny_python, tmp_path, capsys):
    """A new user's trial: --check ("plan every run") said the finished runs and named none of the runs
    it would train. Each is now said, and nothing is written."""
    trained("python", "seq_only", "0", "--data", tiny_python, "--out", str(tmp_path), *SMALL)
    capsys.readouterr()
    assert trained("python", "seq_only seq_depth", "0", "--data", tiny_python, "--out", str(tmp_path), *SMALL,
                   "--check") == []
    said = capsys.readouterr().out
    assert f"done: {tmp_path}/python/seq_only/seed0" in said
    assert f"to train: {tmp_path}/python/seq_depth/seed0" in said
    assert not os.path.exists(tmp_path / "python" / "seq_depth")


def test_a_budget_probes_only_the_seeds_memory_holds(tiny_python, tmp_path, monkeypatch, capsys):
    """A device that holds one seed's runs but not two: --budget probes and trains seed 0 alone, said,
    where `fits` would refuse the whole study (a table stage asks for ten seeds)."""
    runs = planned(tiny_python, tmp_path / "plan", "seq_only seq_depth", "0 1")
    one, two = training.memory(runs[:2])[0], training.memory(runs)[0]
    monkeypatch.setattr(machine, "device_bytes", lambda device: (one + two) / 2 / 0.9)
    out = str(tmp_path / "out")
    trained("python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", out, *SMALL,
            "--budget=100000")
    assert "memory holds 2 of the 4 runs: seeds 0-0 of 2" in capsys.readouterr().out
    assert sorted(os.listdir(os.path.join(out, "python", "seq_depth"))) == ["seed0"]


def test_a_budget_for_fewer_seeds_trains_those_shortened_or_none(tiny_python, tmp_path, monkeypatch, capsys):
    """Where one seed fits at 3 of its 5 steps, only seed 0's runs are written, each at 3 steps (a
    reading, said), or the first seed none of whose runs began (one at 5 steps would not pair), or none;
    where not one step fits, the study is refused in one line and writes no run."""
    out, args = str(tmp_path), ["python", "seq_only seq_depth", "0 1", "--data", tiny_python, *SMALL]
    monkeypatch.setattr(budget, "fitting", lambda *a: (1, 3))
    trained(*args, "--out", out, "--budget=50")
    assert "seed 0 at 3 steps, fewer than 5 (a reading: a shortened run)" in capsys.readouterr().out
    assert sorted(os.listdir(os.path.join(out, "python", "seq_only"))) == ["seed0"]
    assert json.load(open(os.path.join(out, "python", "seq_depth", "seed0", "final.json")))["step"] == 3
    begun = str(tmp_path / "begun")        # seed 0's seq_only finished at 5 steps: seed 1 is shortened
    trained("python", "seq_only", "0", "--data", tiny_python, *SMALL, "--out", begun)
    trained(*args, "--out", begun, "--budget=50")
    assert "seed 1 at 3 steps, fewer than 5" in capsys.readouterr().out
    assert not os.path.exists(os.path.join(begun, "python", "seq_depth", "seed0"))
    with pytest.raises(SystemExit, match="every seed left has runs begun or finished at 5 steps"):
        trained("python", "seq_only seq_depth", "0", "--data", tiny_python, *SMALL, "--out", begun,
                "--budget=50")
    monkeypatch.setattr(budget, "fitting", lambda *a: (0, 0))
    with pytest.raises(SystemExit) as e:
        trained(*args, "--out", str(tmp_path / "none"), "--budget=50")
    assert "not one step of one seed fits; raise --budget" in str(e.value)
    assert not (tmp_path / "none").exists()
    with pytest.raises(SystemExit, match="--budget must be seconds"):
        trained(*args, "--out", out, "--budget=0")
    with pytest.raises(SystemExit) as e:
        trained(*args, "--out", out, "--budget=soon")
    assert e.value.code == 2 and "invalid float value: 'soon'" in capsys.readouterr().err
