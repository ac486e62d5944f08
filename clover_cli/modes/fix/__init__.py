"""`clover fix TEST`: the run (run.py), the test it guards and re-runs (testguard.py,
testrun.py, evidence.py) and the working-tree snapshots it restores from (snapshots.py)."""
