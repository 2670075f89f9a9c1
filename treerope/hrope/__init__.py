"""Paper 004 (paragraph boundaries, hRoPE): its three layers of analysis. Causal interventions and
the normalised boundary effect (boundaries.py, Layer I), compression depth (compression.py, Layer
II; paragraph_depth.py, Tables 5 and 9; hubs.py, Table 13) and the corpus-only candidates
(candidates.py, Layer III). Its position configurations are in rotary.CONFIGS; the
depth-perception path (train.py) imports none of this folder."""
