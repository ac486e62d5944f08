"""`clover bench`: AR mode vs block diffusion on the same weights, interleaved per prompt.

AR mode is the same checkpoint decoded with block size 1 (one token per forward, cached); a
plain autoregressive checkpoint runs through its AR decoder. Every prompt is run through AR mode
and then each threshold before the next prompt, so machine drift hits all runs alike.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from clover_cli.engine.config import GenerationConfig


@dataclass
class RunTotals:
    label: str
    threshold: float | None
    option: str | None = None  # a named speed-up that may change tokens (a settings field, engine/settings.py)
    tokens: int = 0
    forwards: int = 0
    seconds: float = 0.0
    forward_seconds: float = 0.0
    steps: list[int] = field(default_factory=list)
    outputs: list[tuple[str, list[int], str]] = field(default_factory=list)  # (kind, ids, text)
    forwards_per_output: list[int] = field(default_factory=list)
    seconds_per_output: list[float] = field(default_factory=list)  # decode seconds (prefill excluded)

    def add(self, kind: str, result) -> None:
        s = result.stats
        self.tokens += s.generated_tokens
        self.forwards += s.forwards
        self.seconds += s.total_seconds - s.prefill_seconds
        self.forward_seconds += s.forward_seconds
        self.steps.extend(s.steps_per_block)
        self.outputs.append((kind, list(result.token_ids), result.text))
        self.forwards_per_output.append(s.forwards)
        self.seconds_per_output.append(s.total_seconds - s.prefill_seconds)


def load_prompts(path: str | None) -> dict[str, list]:
    """{"code": [prefix, ...], "agent": [{"request", "tool": [names], "arg"}, ...]}."""
    if path is None:
        from clover_cli.agent.prompt_files import prompt_text

        path, text = "bench_prompts.json", prompt_text("bench_prompts.json")
    else:
        text = Path(path).read_text()
    data = json.loads(text)
    if not isinstance(data, dict) or not (data.get("code") or data.get("agent")):
        raise ValueError(f"{path}: expected an object with 'code' and/or 'agent' lists")
    return {"code": list(data.get("code", [])), "agent": list(data.get("agent", []))}


def agent_system_prompt(root: str = "/repo") -> str:
    """The agent's system prompt (prompts/agent_system.md) for a project root."""
    from clover_cli.agent.prompt_files import render

    return render("agent_system.md", root=root)


def code_parses(prefix: str, completion: str) -> bool:
    """Does prefix + completion parse, cut back to its last complete line?"""
    text = prefix + completion
    if "\n" in completion:
        text = text[: text.rfind("\n") + 1]
    for candidate in (text, text + "    pass\n"):
        try:
            ast.parse(candidate)
            return True
        except SyntaxError:
            continue
    return False


def tool_call_quality(text: str, case: dict) -> tuple[bool, bool]:
    """(valid call of a known tool with valid arguments, right tool with the asked-for name in args)."""
    from clover_cli.agent.parsing import parse_tool_calls
    from clover_cli.tools.registry import ToolArgumentError, validate_args

    parsed = parse_tool_calls(text)
    if not parsed.calls:
        return False, False
    call = parsed.calls[0]
    try:
        validate_args(call.name, dict(call.arguments))
    except (ToolArgumentError, KeyError, ValueError):
        return False, False
    right = call.name in case.get("tool", []) and case.get("arg", "") in json.dumps(call.arguments)
    return True, right


def agreement(a: list[int], b: list[int]) -> float:
    """Share of positions where two outputs agree, over the longer length."""
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    return sum(x == y for x, y in zip(a, b)) / longest


def run_bench(lm, prompts: dict[str, list], thresholds: list[float], max_new_tokens: int,
              progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every prompt through AR mode and each threshold; returns the JSON report."""
    from clover_cli.engine.engine import Engine
    from clover_cli.tools.registry import tool_schemas

    engine = Engine(lm)
    schemas = tool_schemas()
    cases: list[tuple[str, list[int], Any]] = []
    for prefix in prompts["code"]:
        cases.append(("code", lm.encode(prefix), prefix))
    system = agent_system_prompt()
    for case in prompts["agent"]:
        # an agent turn as `clover run` sends it: the agent's system prompt, tool schemas, request
        text = lm.render_chat([{"role": "system", "content": system},
                               {"role": "user", "content": case["request"]}], tools=schemas)
        cases.append(("agent", lm.encode(text), case))
    ar = RunTotals("ar", None)
    runs = [RunTotals(f"t={t}", t) for t in thresholds] if lm.is_diffusion else []
    # speed-ups that change tokens are off by default; each is measured against the exact default
    options = ([RunTotals(f"t={thresholds[0]}+eos_confine", thresholds[0], "eos_confine")]
               if runs and "eos_confine" in lm.family.row.options else [])
    for i, (kind, ids, _) in enumerate(cases):
        if progress:
            progress(f"prompt {i + 1}/{len(cases)} ({kind})")
        heal = kind == "code"  # a raw completion: its last token is backed up (engine/healing.py)
        ar_cfg = GenerationConfig(max_new_tokens=max_new_tokens, block_size=1 if lm.is_diffusion else None,
                                  token_healing=heal)
        ar.add(kind, engine.generate(ids, ar_cfg))
        for run in runs:
            run.add(kind, engine.generate(ids, GenerationConfig(max_new_tokens=max_new_tokens,
                                                                threshold=run.threshold,
                                                                token_healing=heal)))
        for run in options:
            run.add(kind, engine.generate(ids, GenerationConfig(
                max_new_tokens=max_new_tokens, threshold=run.threshold, token_healing=heal,
                family=lm.family.row.settings(**{run.option: True}))))

    def summary(run: RunTotals) -> dict[str, Any]:
        parse_ok, calls_ok, calls_right, agree = [], [], [], []
        for (kind, ids, text), (_, ar_ids, _), (_, _, case) in zip(run.outputs, ar.outputs, cases):
            if kind == "code":
                parse_ok.append(code_parses(case, text))
            else:
                valid, right = tool_call_quality(text, case)
                calls_ok.append(valid)
                calls_right.append(right)
            agree.append(agreement(ids, ar_ids))
        tps = run.tokens / run.seconds if run.seconds else 0.0
        ar_tps = ar.tokens / ar.seconds if ar.seconds else 0.0
        return {
            "threshold": run.threshold, "tokens": run.tokens, "forwards": run.forwards,
            "tpf": round(run.tokens / run.forwards, 3) if run.forwards else 0.0,
            "steps_per_block": round(sum(run.steps) / len(run.steps), 3) if run.steps else 0.0,
            "tokens_per_second": round(tps, 2),
            "speedup_vs_ar": round(tps / ar_tps, 3) if ar_tps else 0.0,
            "overhead": round(1 - run.forward_seconds / run.seconds, 4) if run.seconds else 0.0,
            "parse_rate": _rate(parse_ok), "tool_call_rate": _rate(calls_ok),
            "tool_call_correct_rate": _rate(calls_right),
            "agreement_with_ar": round(sum(agree) / len(agree), 4) if agree else 0.0,
            "tpf_code": _tpf(run, "code"), "tpf_agent": _tpf(run, "agent"),
            # decode speed by kind of prompt: block diffusion pays off where the model is sure
            "tokens_per_second_code": _tps(run, "code"), "tokens_per_second_agent": _tps(run, "agent"),
            "speedup_code": _ratio(_tps(run, "code"), _tps(ar, "code")),
            "speedup_agent": _ratio(_tps(run, "agent"), _tps(ar, "agent")),
        }

    def option_summary(run: RunTotals) -> dict[str, Any]:
        exact = next(r for r in runs if r.threshold == run.threshold and r.option is None)
        same = [a[1] == b[1] for a, b in zip(run.outputs, exact.outputs)]
        out = summary(run)
        out.update(option=run.option, identical_to_exact=_rate(same),
                   speedup_vs_exact=_ratio(run.tokens / run.seconds if run.seconds else None,
                                           exact.tokens / exact.seconds if exact.seconds else None))
        return out

    ar_summary = summary(ar)
    ar_summary.pop("threshold")
    return {"model": lm.name, "block_size": lm.block_size, "prompts": len(cases),
            "max_new_tokens": max_new_tokens, "ar": ar_summary, "runs": [summary(r) for r in runs],
            "options": [option_summary(r) for r in options]}


def _rate(values: list[bool]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _tpf(run: RunTotals, kind: str) -> float | None:
    """TPF over the outputs of one kind of prompt (code or agent)."""
    pairs = [(len(ids), f) for (k, ids, _), f in zip(run.outputs, run.forwards_per_output) if k == kind]
    forwards = sum(f for _, f in pairs)
    return round(sum(t for t, _ in pairs) / forwards, 3) if forwards else None


def _tps(run: RunTotals, kind: str) -> float | None:
    """Decode tokens/s over the outputs of one kind of prompt."""
    pairs = [(len(ids), sec) for (k, ids, _), sec in zip(run.outputs, run.seconds_per_output) if k == kind]
    seconds = sum(sec for _, sec in pairs)
    return round(sum(t for t, _ in pairs) / seconds, 2) if seconds > 0 else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def format_table(report: dict[str, Any]) -> str:
    """A readable table of the report."""
    head = (f"{'run':>8} {'TPF':>6} {'steps/blk':>9} {'tok/s':>8} {'speedup':>8} {'overhead':>8} "
            f"{'parse':>6} {'call':>6} {'right':>6} {'agree':>6}")
    rows = [f"model {report['model']} (block {report['block_size']}), {report['prompts']} prompts, "
            f"max {report['max_new_tokens']} new tokens", head]

    def fmt(label: str, r: dict) -> str:
        def pct(x):
            return "  -  " if x is None else f"{100 * x:5.1f}%"
        return (f"{label:>8} {r['tpf']:6.2f} {r['steps_per_block']:9.2f} {r['tokens_per_second']:8.1f} "
                f"{r['speedup_vs_ar']:7.2f}x {100 * r['overhead']:7.1f}% {pct(r['parse_rate'])} "
                f"{pct(r['tool_call_rate'])} {pct(r['tool_call_correct_rate'])} {pct(r['agreement_with_ar'])}")

    rows.append(fmt("AR", report["ar"]))
    rows += [fmt(f"t={r['threshold']}", r) for r in report["runs"]]
    if report["runs"]:
        rows.append("by kind of prompt (TPF, speedup vs AR): " + "; ".join(
            f"t={r['threshold']}: agent {_num(r['tpf_agent'])}, {_num(r['speedup_agent'])}x, "
            f"code {_num(r['tpf_code'])}, {_num(r['speedup_code'])}x" for r in report["runs"]))
    for r in report.get("options", []):
        same = r["identical_to_exact"]
        rows.append(f"option {r['option']} at t={r['threshold']} (off by default): TPF {r['tpf']:.2f}, "
                    f"{_num(r['speedup_vs_exact'])}x the exact default, outputs identical "
                    f"{'-' if same is None else f'{100 * same:.0f}%'}")
    return "\n".join(rows)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def plot(report: dict[str, Any], path: str) -> None:
    """TPF and speedup against threshold; needs the optional matplotlib extra."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = report["runs"]
    xs = [r["threshold"] for r in runs]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, [r["tpf"] for r in runs], "o-", label="TPF")
    ax.plot(xs, [r["speedup_vs_ar"] for r in runs], "s-", label="speedup vs AR")
    ax.set_xlabel("threshold")
    ax.set_title(f"clover bench: {report['model']}")
    ax.invert_xaxis()
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
