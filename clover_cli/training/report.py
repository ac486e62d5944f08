"""Summarise a training run's log.jsonl: the eval curve (copy / call accuracy, losses, TPF)
against steps. `python -m clover_cli.training.report RUN_DIR`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

COLUMNS = ("code_loss", "transcript_loss", "copy", "copy_tf", "synth_call_valid", "synth_call_exact",
           "heldout_call_valid", "heldout_call_exact", "heldout_tpf")


def curve(run: Path) -> list[dict]:
    """Eval records of a run, each with step, tokens seen and elapsed minutes."""
    recs = [json.loads(x) for x in (Path(run) / "log.jsonl").read_text().splitlines() if x]
    out, last = [], {}
    for r in recs:
        if "eval" in r:
            out.append({"step": r["step"], "tokens": last.get("tokens"),
                        "minutes": round((last.get("elapsed_s") or 0) / 60, 1), **r["eval"]})
        else:
            last = r
    return out


def table(rows: list[dict]) -> str:
    """A markdown table of the eval curve."""
    head = ("step", "tokens", "minutes") + COLUMNS
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(k, "")) for k in head) + " |")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    print(table(curve(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/tiny"))))
