"""scripts/demo_repo.sh: the model card's `clover run` demo, rerunnable on any model."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "demo_repo.sh"


@pytest.mark.slow  # end to end: a bash script running `clover run` processes
def test_demo_script_builds_the_repository_and_reports_every_request(tmp_path):
    call = {"name": "grep", "arguments": {"pattern": "(def|class) apply_discount"}}
    replay = tmp_path / "replay.json"  # every `clover run` replays the same call and answer
    replay.write_text(json.dumps({"completions": [
        "<tool_call>" + json.dumps(call) + "</tool_call>",
        "apply_discount is defined in shop/prices.py at line 5."]}))
    repo = tmp_path / "demo"
    env = dict(os.environ, CLOVER=str(Path(sys.executable).parent / "clover"))
    out = subprocess.run(["bash", str(SCRIPT), str(repo), f"replay:{replay}"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    # the card's repository: apply_discount on line 5 of shop/prices.py, the shelf functions
    assert (repo / "shop/prices.py").read_text().splitlines()[4].startswith("def apply_discount(")
    assert "def restock_shelf(" in (repo / "shop/inventory.py").read_text()
    lines = out.stdout.splitlines()
    assert sum(line.startswith("### ") for line in lines) == 6
    calls = [line for line in lines if line.startswith("  call ")]
    assert len(calls) == 6 and all("(def|class) apply_discount" in c for c in calls)
    results = [line for line in lines if line.startswith("  result")]
    assert len(results) == 6 and all("shop/prices.py:5" in r for r in results)  # the real tool ran
    answers = [line for line in lines if line.startswith("  answer")]
    assert len(answers) == 6 and all("shop/prices.py at line 5" in a for a in answers)
