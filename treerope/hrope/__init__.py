"""Paper 004 (paragraph boundaries, hRoPE): its position configurations and controls (controls.py)
and its three layers of analysis: causal interventions and the normalised boundary effect
(boundaries.py, Layer I), compression depth (compression.py, Layer II; hubs.py, Table 13) and the
corpus-only candidates (candidates.py, Layer III). The depth-perception path imports none of it."""
