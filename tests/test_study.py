"""study.py: a study of runs trained as one batched model is each run as train.py trains it.
Run: python -m pytest -q tests/test_study.py"""
import json
import os

import pytest
import torch

import study
import train

SMALL = ["--steps=5", "--preset=cpu", "--n_layer=2", "--n_embd=128", "--n_head=1", "--max_len=64",
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


def losses(out, config, seed):
    log = [json.loads(line) for line in open(os.path.join(out, "python", config, f"seed{seed}", "log.jsonl"))]
    return [(e["train_loss"], e["val_loss"]) for e in log]


def assert_matches(got, want):
    assert len(got) == len(want)
    for (t, v), (t0, v0) in zip(got, want):
        assert t == pytest.approx(t0, rel=1e-5) and v == pytest.approx(v0, rel=1e-5)


def test_a_study_trains_each_run_as_train_py_did(tiny_python, tmp_path):
    out = str(tmp_path)
    dirs = study.main(["python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", out, *SMALL])
    assert len(dirs) == 4
    for (config, seed), want in ECB659C.items():
        assert_matches(losses(out, config, seed), want)
        run = os.path.join(out, "python", config, f"seed{seed}")
        assert {"config.json", "log.jsonl", "ckpt.pt", "final.json"} <= set(os.listdir(run))
        final = json.load(open(os.path.join(run, "final.json")))
        assert final["val_loss"] == pytest.approx(want[-1][1], rel=1e-5) and final["test_records"] == 8
    # finished runs are skipped, as sweep.sh skips them
    again = study.main(["python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", out, *SMALL])
    assert again == []


def test_each_run_starts_from_its_seeds_weights(tiny_python, tmp_path):
    """The weights a study starts each run from are train.py's at that seed: equal across
    configurations outside the rotary, different across seeds."""
    runs = study.plan_runs("python", ["seq_only", "seq_depth"], ["0", "1"],
                           ["--data", tiny_python, "--out", str(tmp_path), *SMALL])
    for r in runs:
        study.start(r)
    w = [{k: v for k, v in r.model.state_dict().items() if not k.startswith("rotary")} for r in runs]
    assert all(torch.equal(w[0][k], w[1][k]) for k in w[0])            # seed 0: seq_only == seq_depth
    assert all(torch.equal(w[2][k], w[3][k]) for k in w[0])            # seed 1
    assert not torch.equal(w[0]["wte.weight"], w[2]["wte.weight"])
    torch.manual_seed(1)
    ref = train.GPT(runs[3].mcfg).state_dict()
    assert all(torch.equal(ref[k], w[3][k]) for k in w[3])


def test_a_non_finite_run_stops_alone(tiny_python, tmp_path, monkeypatch, capsys):
    """seq_depth seed 1 gets a NaN weight before its third step: it stops there with its step-2
    checkpoint and no final.json, the study names it and exits non-zero, and the other three runs
    finish with train.py's losses, untouched by it."""
    step = study.Study.step
    def poisoned(self, runs):
        for r in runs:
            if (r.cfg["config"], r.cfg["seed"], r.step) == ("seq_depth", 1, 2):
                with torch.no_grad():
                    r.model.wte.weight[0, 0] = float("nan")
        return step(self, runs)
    monkeypatch.setattr(study.Study, "step", poisoned)
    out = str(tmp_path)
    with pytest.raises(SystemExit) as e:
        study.main(["python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", out, *SMALL])
    bad = os.path.join(out, "python", "seq_depth", "seed1")
    assert "diverged" in str(e.value.code) and bad in str(e.value.code)
    assert not os.path.exists(os.path.join(bad, "final.json"))
    assert [e["step"] for e in map(json.loads, open(os.path.join(bad, "log.jsonl")))] == [1, 2]
    assert "loss is nan at step 2" in capsys.readouterr().err
    for key in [("seq_only", 0), ("seq_only", 1), ("seq_depth", 0)]:
        assert_matches(losses(out, *key), ECB659C[key])


def test_a_runs_random_draws_do_not_depend_on_its_company(tiny_python, tmp_path):
    """With dropout and depth dropout on, seq_depth seed 0 trained alone and beside seq_only seed 1
    gives the same losses: its masks come from its own generators (one shared stream would differ
    by ~1e-2 nats here)."""
    noisy = [*SMALL, "--dropout=0.2", "--depth_dropout=0.5"]
    alone, company = str(tmp_path / "a"), str(tmp_path / "b")
    study.main(["python", "seq_depth", "0", "--data", tiny_python, "--out", alone, *noisy])
    study.main(["python", "seq_only seq_depth", "1 0", "--data", tiny_python, "--out", company, *noisy])
    a, b = losses(alone, "seq_depth", 0), losses(company, "seq_depth", 0)
    assert_matches(b, a)
    assert abs(a[-1][0] - ECB659C[("seq_depth", 0)][-1][0]) > 1e-3      # dropout did change the run


def test_runs_of_other_sizes_are_refused(tiny_python, tmp_path, monkeypatch):
    """A setting's per_config may change any value; one that changes the model's size cannot batch."""
    plan = train.plan
    def deeper(cfg, *a):
        run = plan(cfg, *a)
        run.mcfg.n_layer += cfg["config"] == "seq_depth"
        return run
    monkeypatch.setattr(train, "plan", deeper)
    with pytest.raises(SystemExit, match="one model size.*n_layer 2 vs 3"):
        study.plan_runs("python", ["seq_only", "seq_depth"], ["0"],
                        ["--data", tiny_python, "--out", str(tmp_path), *SMALL])


def test_a_study_stopped_after_a_milestone_resumes_exactly(tiny_python, tmp_path):
    """Killed right after its step-2 checkpoints, the same command resumes every run from step 2 and
    ends on the uninterrupted losses (those recorded from train.py)."""
    out = str(tmp_path)
    args = ["python", "seq_only seq_depth", "0 1", "--data", tiny_python, "--out", out, *SMALL]
    save = train.atomic_save
    def killed(obj, path):
        save(obj, path)
        if obj["step"] == 2 and "seq_depth/seed1" in path:   # the last run's checkpoint at step 2
            raise KeyboardInterrupt
    train.atomic_save = killed
    try:
        with pytest.raises(KeyboardInterrupt):
            study.main(args)
    finally:
        train.atomic_save = save
    assert not any(os.path.exists(os.path.join(out, "python", c, f"seed{s}", "final.json"))
                   for c, s in ECB659C)
    study.main(args)
    for key, want in ECB659C.items():
        assert_matches(losses(out, *key), want)
