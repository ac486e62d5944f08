"""`clover bench`: AR mode vs block diffusion on the same weights (speed.py), and a recorded agent
session replayed cold and with prefix reuse (session.py, session_report.py, session_replay.json).

Imports the engine, the agent's prompts and the tool schemas; never the trainer (clover_cli/training,
the `train` extra). torch is imported inside functions.
"""
