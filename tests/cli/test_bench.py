"""`clover bench --json` on a tiny random model returns every field with consistent values."""
from __future__ import annotations

import json

from click.testing import CliRunner

from clover_cli.cli import cli
from clover_cli.bench.speed import agreement, code_parses


def test_bench_json_has_every_field(tiny_dirs, tmp_path):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({
        "code": ["def f(x):\n", "import os\n"],
        "agent": [{"request": "Where is parse_header defined?", "tool": ["grep"], "arg": "parse_header"}],
    }))
    out = CliRunner().invoke(cli, ["bench", "--model", str(tiny_dirs["clover"]), "--prompts", str(prompts),
                                   "--thresholds", "0.95,0.5", "--max-new-tokens", "12", "--json"],
                             prog_name="clover")  # in-process: no second torch import
    assert out.exit_code == 0 and out.exception is None, (out.stderr, out.exception)
    report = json.loads(out.stdout)
    assert report["model"] == "clover" and report["prompts"] == 3
    assert report["ar"]["tpf"] == 1.0 and report["ar"]["agreement_with_ar"] == 1.0
    assert [r["threshold"] for r in report["runs"]] == [0.95, 0.5]
    for run in report["runs"]:
        for key in ("threshold", "tpf", "tokens_per_second", "speedup_vs_ar", "overhead", "parse_rate",
                    "tool_call_rate", "agreement_with_ar", "steps_per_block", "tool_call_correct_rate"):
            assert key in run
        assert run["tpf"] >= 1.0 and 0.0 <= run["agreement_with_ar"] <= 1.0
        assert 0.0 <= run["parse_rate"] <= 1.0 and run["tool_call_rate"] is not None
        # speed by kind of prompt: tokens/s and speedup vs AR mode for code and agent turns
        for kind in ("code", "agent"):
            assert run[f"tokens_per_second_{kind}"] > 0
            ar_tps = report["ar"][f"tokens_per_second_{kind}"]
            assert run[f"speedup_{kind}"] == round(run[f"tokens_per_second_{kind}"] / ar_tps, 3)
    # a speed-up that can change tokens is measured against the exact default, off by default
    (option,) = report["options"]
    assert option["option"] == "eos_confine" and option["threshold"] == 0.95
    assert 0.0 <= option["identical_to_exact"] <= 1.0 and option["tokens"] > 0


def test_quality_proxies():
    assert code_parses("def f(x):\n", "    return x + 1\n")
    assert not code_parses("def f(x):\n", "    return (x +\n")
    assert agreement([1, 2, 3], [1, 2, 4, 5]) == 0.5
    assert agreement([], []) == 1.0


def test_agent_turns_are_rendered_as_clover_run_sends_them(monkeypatch):
    """Each agent prompt carries the agent's system prompt and the tool schemas before the
    request (a bench on a prompt shape the agent never produces would measure the wrong thing)."""
    from types import SimpleNamespace

    import clover_cli.engine.engine as decode
    from clover_cli.bench.speed import agent_system_prompt, run_bench

    rendered = []

    class FakeLM:
        name, block_size, is_diffusion = "fake", 32, False

        def encode(self, text):
            return [1, 2, 3]

        def render_chat(self, messages, tools=None):
            rendered.append((messages, tools))
            return "x"

    stats = SimpleNamespace(generated_tokens=1, forwards=1, total_seconds=0.01, prefill_seconds=0.0,
                            forward_seconds=0.01, steps_per_block=(1,))

    class FakeEngine:
        def __init__(self, lm):
            pass

        def generate(self, ids, cfg):
            return SimpleNamespace(stats=stats, token_ids=(5,), text="")

    monkeypatch.setattr(decode, "Engine", FakeEngine)
    run_bench(FakeLM(), {"code": [], "agent": [{"request": "list docs", "tool": ["list_files"],
                                                "arg": "docs"}]}, [], 4)
    (messages, tools), = rendered
    assert messages[0] == {"role": "system", "content": agent_system_prompt()}
    assert "Clover" in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": "list docs"}
    assert {t["function"]["name"] for t in tools} >= {"grep", "read_file", "list_files"}
