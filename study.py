"""Train a study — every (configuration, seed) of a corpus — with scripts/sweep.sh's arguments: train.py
with its configurations and seeds given at once, so they train as one model (train.py's docstring).

    python study.py CORPUS "CONFIGS" "SEEDS" [JOBS] [train.py options...]   # `python train.py --help`
    python study.py web "seq_only seq_depth" "0 1 2 3" --steps 300
    python study.py programs "seq_only tree_only seq_depth" "$(seq 0 9)" --setting python

is `python train.py --corpus CORPUS --config CONFIGS... --seed SEEDS... [options]` (JOBS, sweep.sh's
processes at once, is accepted and ignored; --seed, --config and --corpus are the arguments' to give).
"""
import os
import sys

REFUSED = ("seed", "config", "corpus")   # given by CORPUS, CONFIGS and SEEDS
FLAGS = tuple("--" + k for k in REFUSED)


def arguments(argv):
    """train.py's command line for study.py's; a flag the arguments give (REFUSED) refused in one line."""
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        sys.exit(0)
    if len(argv) < 3:
        sys.exit('usage: python study.py CORPUS "CONFIGS" "SEEDS" [JOBS] [train.py options...]')
    corpus, configs, seeds = argv[0], argv[1].split(), argv[2].split()
    if len(argv) > 3 and not argv[3].startswith("-") and not argv[3].isdigit():
        sys.exit(f"error: JOBS (sweep.sh's processes at once) is a whole number, not {argv[3]!r}")
    options = argv[4:] if len(argv) > 3 and argv[3].isdigit() else argv[3:]   # JOBS: sweep.sh's, ignored
    if not configs or not seeds or not all(s.isdigit() for s in seeds):
        sys.exit("error: CONFIGS and SEEDS are space-separated lists, SEEDS of whole numbers ≥ 0")
    for o in options:   # argparse would let these (or an abbreviation of one) override the arguments
        k = o.split("=")[0]
        if k.startswith("--") and len(k) > 2 and any(f.startswith(k) for f in FLAGS):
            sys.exit(f"error: study.py takes {next(f for f in FLAGS if f.startswith(k))} from its arguments "
                     f"(CORPUS, CONFIGS, SEEDS); drop {o}")
    return ["--corpus", corpus, "--config", *configs, "--seed", *seeds, *options]


if __name__ == "__main__":
    train = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train.py")
    os.execv(sys.executable, [sys.executable, train, *arguments(sys.argv[1:])])
