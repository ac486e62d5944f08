"""The table `clover bench --session` prints (the report of session.replay)."""
from __future__ import annotations


def _mb(n: int) -> str:
    return f"{n / 2 ** 20:.1f}"


def format_report(r: dict) -> str:
    """Per step: context, appended, the cold run's prefill / step time, the warm run's reused,
    prefilled, prefill / decode / step time, memory; then totals, speed-up, identity, targets."""
    cuda = "cuda_max_allocated_mb" in r
    lines = [
        f"session replay: {r['model']} ({r['parameters']:,} parameters, {r['dtype']}, {r['device']}), "
        f"block {r['block_size']}, window {r['context_window']}, {r['decode_tokens']} tokens decoded "
        f"per step at {r['threshold']}; {len(r['steps'])} steps of {r['fixture']}",
    ]
    if not r["prefix_reuse"]:
        lines.append("note: this engine has no prefix reuse (Engine takes no cache_mb): both runs are cold")
    mem = "cuda MB" if cuda else "rss MB"
    lines.append(f"{'':>19}| {'cold':^17} | {'warm':^44} |")
    lines.append(f"{'step':>4} {'ctx':>6} {'append':>6} | {'prefill s':>9} {'step s':>7} | {'reused':>6} "
                 f"{'prefill':>7} {'prefill s':>9} {'decode s':>8} {'fwd':>3} {'step s':>6} | {'ids':>3} {mem:>8} "
                 f"{'cache MB':>8}")
    for row in r["steps"]:
        c, w = row["cold"], row["warm"]
        mark = f"  trim: dropped {row['dropped_turns']} turn(s)" if row["trimmed"] else ""
        memory = w["cuda_max_allocated_mb"] if cuda else w["rss_mb"]
        lines.append(
            f"{row['step']:>4} {row['context_tokens']:>6} {row['appended_tokens']:>6} | "
            f"{c['prefill_seconds']:>9.3f} {c['step_seconds']:>7.3f} | {w['reused_tokens']:>6} "
            f"{w['prefilled_tokens']:>7} {w['prefill_seconds']:>9.3f} {w['decode_seconds']:>8.3f} "
            f"{w['forwards']:>3} {w['step_seconds']:>6.3f} | {'=' if row['identical'] else 'DIF':>3} {memory:>8.1f} "
            f"{_mb(w['cache_bytes']):>8}{mark}")
    speed = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
    lines += [
        f"total: cold {r['cold_seconds']:.2f} s (prefill {r['cold_prefill_seconds']:.2f} s, "
        f"{r['cold_prefilled_tokens']:,} tokens prefilled), warm {r['warm_seconds']:.2f} s (prefill "
        f"{r['warm_prefill_seconds']:.2f} s, {r['warm_prefilled_tokens']:,} prefilled, "
        f"{r['warm_reused_tokens']:,} reused); speed-up {speed}",
        f"generated ids identical cold vs warm at every step: {'yes' if r['identical_ids'] else 'NO'}",
        f"peak RSS {r['peak_rss_mb']:.1f} MB"
        + (f", CUDA max allocated {r['cuda_max_allocated_mb']:.1f} MB" if cuda else "")
        + f"; prefix cache {_mb(r['prefix_cache_bytes'])} MB at the end "
          f"(max {_mb(r['max_prefix_cache_bytes'])} MB)",
    ]
    names = {"prefill_bounded": "(a) warm prefill <= appended + 2 blocks",
             "flat_decode": "(b) warm step time less prefill stays flat",
             "speedup": "(c) warm >= 4x faster than cold"}
    for key, label in names.items():
        t = r["targets"][key]
        verdict = {True: "PASS", False: "FAIL", None: "n/a "}[t["ok"]]
        lines.append(f"{verdict} {label}: {t['detail']}")
    return "\n".join(lines)
