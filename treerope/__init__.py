"""What the scripts at the top share: run settings, files, the prepared-data format, batches, runs,
the machine, the study's batched GPT, the tokeniser, figures and statistics; corpora/ (where
documents come from and how each becomes a tree) and hrope/ (paper 004's analyses). The README's
file table lists every module in reading order."""
