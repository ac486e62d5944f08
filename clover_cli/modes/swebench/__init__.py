"""`clover swebench`: instances in, predictions and a report out (run.py, instances.py,
predictions.py, report.py, progress.py), and local grading the way the official harness does it
(evaluate.py, batch_eval.py, evaluate_only.py, environments.py, interpreters.py, specs.py,
patching.py, logparse.py, grading.py, official.py)."""
