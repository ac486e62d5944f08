"""The recorded agent session and its replay (`clover bench --session`): the fixture's
prompts grow by pure extension as the agent encodes them, and the replay reports per-step reuse,
prefill, identical outputs cold vs warm, trims past the context window, and the targets."""
from __future__ import annotations

import dataclasses
import json

import pytest
from in_process import clover

from clover_cli.bench.session import (FIXTURE, load_session, replay, session_prompts, step_prompts,
                                      targets)

BLOCK = 32


@pytest.fixture(scope="module")
def bundled_lm():
    from clover_cli.engine.loader import load_model

    return load_model("tiny")


@pytest.fixture(scope="module")
def small_ckpt(tmp_path_factory):
    """2 layers of width 64 on the bundled tokenizer, block 32, 8K positions: the fixture's first
    steps fit, and a replay step costs milliseconds."""
    from clover_cli.engine.loader import bundled_tiny_dir
    from tiny_checkpoints import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("sess") / "m", "clover", block_size=BLOCK,
                                 logit_scale=12.0, tokenizer_dir=bundled_tiny_dir(),
                                 max_position_embeddings=8192)


def test_fixture_is_twenty_agent_steps_whose_prompts_extend_each_other(bundled_lm):
    from clover_cli.agent.parsing import parse_tool_calls
    from clover_cli.tools.registry import TOOL_NAMES

    assert FIXTURE.stat().st_size < 200_000
    session = load_session()
    assert len(session.turns) == 20
    assert [m["role"] for m in session.head] == ["system", "user"]
    assert "You are Clover" in session.head[0]["content"]
    assert tuple(t["function"]["name"] for t in session.tools) == TOOL_NAMES
    names = set()
    for assistant, tool in session.turns:  # stored as the agent stores them
        (call,) = assistant["tool_calls"]
        parsed = parse_tool_calls(assistant["content"]).calls
        assert [(c.name, c.arguments) for c in parsed] == [(call["function"]["name"],
                                                           call["function"]["arguments"])]
        assert tool["tool_call_id"] == call["id"] and tool["name"] == call["function"]["name"]
        names.add(tool["name"])
    assert {"read_file", "grep", "run_shell", "edit_file", "repo_map"} <= names
    prompts = step_prompts(bundled_lm, session)
    opening = bundled_lm.tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
    for before, after in zip(prompts, prompts[1:]):
        # the bundled template does not rewrite history: each prompt is the previous one plus
        # the recorded answer and the next tool result
        assert len(after) > len(before) and after[:len(before)] == before
    assert all(p[-len(opening):] == opening for p in prompts)
    assert 10_000 <= len(prompts[-1]) <= 13_000
    sizes = [len(b) - len(a) for a, b in zip(prompts, prompts[1:])]
    assert max(sizes) > 1000 and min(sizes) < 100  # a source read and a short edit result


def test_past_the_recording_turns_cycle_and_an_overfull_prompt_drops_the_oldest_turns(bundled_lm):
    session = load_session()
    full = step_prompts(bundled_lm, session, 22)
    assert full[21][:len(full[20])] == full[20] and full[20][:len(full[19])] == full[19]
    grown = len(full[21]) - len(full[20])
    assert grown == len(full[1]) - len(full[0])  # step 22 repeats step 2's turn
    budget = 4000
    prompts = list(session_prompts(bundled_lm, session, 8, budget, trim_to=0.5))
    from clover_cli.agent.encode import encode_conversation

    head = encode_conversation(bundled_lm, session.head, session.tools)[1]  # system, task, opening
    assert all(p.ids[:len(head)] == head for p in prompts)  # a trim keeps the system prompt and task
    assert all(len(p.ids) <= budget for p in prompts)
    first = next(p for p in prompts if p.dropped)
    assert first.step == next(k for k, ids in enumerate(full, 1) if len(ids) > budget)
    assert first.kept_from == 1 + first.dropped and len(first.ids) < len(full[first.step - 1])
    later = prompts[prompts.index(first):]
    for a, b in zip(later, later[1:]):
        if not b.dropped:  # after a trim the session grows by extension again
            assert len(b.ids) > len(a.ids) and b.ids[:len(a.ids)] == a.ids


def test_clover_bench_session_json_reports_each_step_cold_and_warm(small_ckpt, bundled_lm):
    out = clover("bench", "--session", "--model", str(small_ckpt), "--steps", "3",
                 "--decode-tokens", "8", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["decode_tokens"] == 8 and report["block_size"] == BLOCK and report["threshold"] == 0.95
    assert report["recorded_steps"] == 20 and report["prefix_reuse"] is True
    expected = step_prompts(bundled_lm, load_session(), 3)  # same tokenizer as the checkpoint
    rows = report["steps"]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert [r["context_tokens"] for r in rows] == [len(p) for p in expected]
    assert rows[0]["appended_tokens"] == len(expected[0])
    assert [r["appended_tokens"] for r in rows[1:]] == [len(b) - len(a) for a, b in zip(expected, expected[1:])]
    for r in rows:
        assert not r["trimmed"] and r["identical"] is True
        cold, warm = r["cold"], r["warm"]
        assert cold["token_ids"] == warm["token_ids"] and 1 <= len(cold["token_ids"]) <= 8
        for key in ("reused_tokens", "prefilled_tokens", "prefill_seconds", "decode_seconds",
                    "step_seconds", "rss_mb", "peak_rss_mb", "cache_bytes", "first_block_seconds"):
            assert key in cold and key in warm
        assert cold["reused_tokens"] == 0 and cold["cache_bytes"] == 0
        assert r["context_tokens"] - BLOCK <= cold["prefilled_tokens"] <= r["context_tokens"]
        assert warm["step_seconds"] >= warm["prefill_seconds"] >= 0 and warm["peak_rss_mb"] > 0
    assert rows[0]["warm"]["reused_tokens"] == 0
    for r in rows[1:]:  # the previous step's prompt comes from the cache
        assert r["warm"]["reused_tokens"] > 0
        assert r["warm"]["prefilled_tokens"] <= r["appended_tokens"] + 2 * BLOCK
        assert r["warm"]["reused_tokens"] + r["warm"]["prefilled_tokens"] <= r["context_tokens"]
    assert rows[-1]["warm"]["cache_bytes"] > 0 and report["prefix_cache_bytes"] > 0
    assert report["identical_ids"] is True and report["warm_reused_tokens"] > 0
    assert report["targets"]["prefill_bounded"]["ok"] is True
    assert set(report["targets"]) == {"prefill_bounded", "flat_decode", "speedup"}


@pytest.mark.slow
def test_replay_past_the_window_trims_and_keeps_outputs_identical(small_ckpt):
    from clover_cli.engine.loader import load_model

    lm = dataclasses.replace(load_model(str(small_ckpt)), context_window=4096)
    report = replay(lm, load_session(), steps=6, decode_tokens=8)
    rows = report["steps"]
    trimmed = [r for r in rows if r["trimmed"]]
    assert trimmed and all(r["context_tokens"] <= 4096 - 8 for r in rows)
    t = trimmed[0]
    assert t["dropped_turns"] >= 1 and t["kept_from_step"] == 1 + t["dropped_turns"]
    assert t["appended_tokens"] < t["context_tokens"]  # the system prompt and task are unchanged
    assert t["warm"]["reused_tokens"] <= t["context_tokens"] - t["appended_tokens"]
    assert report["identical_ids"] is True
    # the cache stays within one entry per kept prompt: it never holds more than the steps' prompts
    assert report["max_prefix_cache_bytes"] > 0


def _row(step, ctx, appended, prefilled, step_s, prefill_s, trimmed=False, cold_s=0.5):
    run = dict(prefilled_tokens=prefilled, step_seconds=step_s, prefill_seconds=prefill_s)
    return dict(step=step, context_tokens=ctx, appended_tokens=appended, trimmed=trimmed, warm=run,
                cold=dict(run, step_seconds=cold_s))


def test_targets_pass_and_fail_on_the_issue_s_limits():
    good = [_row(1, 1000, 1000, 1000, 0.5, 0.4)] + [
        _row(k, 1000 + 100 * k, 100, 100 + 2 * BLOCK, 0.11, 0.01) for k in range(2, 21)]
    t = targets(good, BLOCK, reuse=True)
    assert t["prefill_bounded"]["ok"] and t["flat_decode"]["ok"]
    assert t["speedup"]["ok"] is False and "3.86x" in t["speedup"]["detail"]  # 10.0 s / 2.59 s
    bad = [dict(r) for r in good]
    bad[5] = _row(6, 1600, 100, 100 + 2 * BLOCK + 1, 0.11, 0.01)
    bad[19] = _row(20, 3000, 100, 100, 0.16, 0.0, cold_s=20.0)  # 0.16 > 1.5 x 0.10
    t = targets(bad, BLOCK, reuse=True)
    assert t["prefill_bounded"]["ok"] is False and "[6]" in t["prefill_bounded"]["detail"]
    assert t["flat_decode"]["ok"] is False and t["speedup"]["ok"] is True
    bad[5]["trimmed"] = True  # a trimmed step rewrote history: not held to the bound
    assert targets(bad, BLOCK, reuse=True)["prefill_bounded"]["ok"] is True
    assert all(v["ok"] is None for v in targets(good, BLOCK, reuse=False).values())


def test_targets_defined_on_twenty_steps_are_not_judged_on_fewer():
    """`bench --session --steps 5`: the prefill bound holds at every step and is judged; step 20's
    flat decode and the 20-step speed-up are n/a, their measurement kept, the reason said."""
    from clover_cli.bench.session_report import format_report

    rows = [_row(1, 1000, 1000, 1000, 0.5, 0.4)] + [
        _row(k, 1000 + 100 * k, 100, 100 + 2 * BLOCK + 1, 0.5, 0.01) for k in range(2, 6)]
    t = targets(rows, BLOCK, reuse=True)
    assert t["prefill_bounded"]["ok"] is False  # judged at any length
    for key in ("flat_decode", "speedup"):
        assert t[key]["ok"] is None
        assert t[key]["detail"].endswith("; the target is for 20 steps, this replay ran 5")
    assert "1.00x (>= 4x)" in t["speedup"]["detail"]
    report = dict(model="m", parameters=1, dtype="float32", device="cpu", block_size=BLOCK,
                  context_window=4096, decode_tokens=8, threshold=0.95, fixture="f", prefix_reuse=True,
                  steps=[], cold_seconds=2.5, cold_prefill_seconds=0.0, cold_prefilled_tokens=0,
                  warm_seconds=2.5, warm_prefill_seconds=0.0, warm_prefilled_tokens=0, warm_reused_tokens=0,
                  speedup=1.0, identical_ids=True, peak_rss_mb=1.0, prefix_cache_bytes=0,
                  max_prefix_cache_bytes=0, targets=t)
    verdicts = [line.split()[0] for line in format_report(report).splitlines()[-3:]]
    assert verdicts == ["FAIL", "n/a", "n/a"]


def test_session_options_are_checked_before_any_model_loads(tmp_path):
    out = clover("bench", "--steps", "3")
    assert out.returncode == 2 and "--session" in out.stderr
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"messages": []}))
    out = clover("bench", "--session", str(bad), "--model", "tiny", "--json")
    assert out.returncode == 2 and "not a session fixture" in out.stderr and out.stdout == ""
