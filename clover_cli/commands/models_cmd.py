"""`clover models`: which checkpoint to run here (docs/engine.md, "Checkpoints users run").

`clover models` lists the public checkpoints of the families Clover runs (engine/catalog.py): the
weights' size in each precision, whether each is in the local Hugging Face cache, and whether it
fits each device of this machine now (weights + the engine's need against free memory, as the
loader checks it: engine/fit.py). `clover models pull hf:ORG/NAME` downloads one (engine/hub.py:
safetensors only, progress on stderr, resumes after a kill) and then says whether it fits.
"""
from __future__ import annotations

import json
import sys

import click

SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


@click.group("models", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object: the machine and every checkpoint.")
@click.pass_context
def models(ctx: click.Context, as_json: bool) -> None:
    """List the checkpoints Clover runs, their sizes, and whether each fits this machine now."""
    if ctx.invoked_subcommand is not None:
        return
    report = _report()
    if as_json:
        click.echo(json.dumps(report, indent=1))
    else:
        click.echo(_table(report))


@models.command("pull")
@click.argument("spec")
def pull(spec: str) -> None:
    """Download SPEC (hf:ORG/NAME) into the Hugging Face cache, then check it fits this machine."""
    from clover_cli.engine import hub

    repo = _repo_of(spec)
    snap = hub.cached_snapshot(repo)
    try:
        if hub.snapshot_complete(snap):
            click.echo(f"clover: hf:{repo} is already in the cache: {snap}", err=True)
        elif hub.env_offline():
            raise hub.HubError(f"hf:{repo}: downloads are off (HF_HUB_OFFLINE=1)")
        else:
            snap = hub.download(repo)
    except hub.HubError as e:
        _fail(str(e))
    except KeyboardInterrupt:
        click.echo(f"\nclover: interrupted; `clover models pull hf:{repo}` again resumes", err=True)
        sys.exit(130)
    click.echo(str(snap))
    for line in _fit_lines(snap):
        click.echo(line)


def _fail(message: str) -> None:
    click.echo(f"clover: error: {message}", err=True)
    sys.exit(2)


def _repo_of(spec: str) -> str:
    from clover_cli.engine.spec import SpecError, parse_spec

    text = spec.strip()
    if not text.startswith("hf:") and text.count("/") == 1:
        text = "hf:" + text
    try:
        parsed = parse_spec(text) if text.startswith("hf:") else None
    except SpecError as e:
        _fail(str(e))
    if parsed is None or parsed.kind != "hf":
        _fail(f"clover models pull takes hf:ORG/NAME, got {spec!r}")
    return parsed.value


def _devices(machine) -> list[tuple[str, str, list[str]]]:
    """(device, name, precisions tried best first) for each device, the CPU always."""
    from clover_cli.engine.fit import QUANTIZED_BYTES_PER_PARAM

    quant = list(QUANTIZED_BYTES_PER_PARAM)
    out = [(f"cuda:{g.index}", g.name, ["bfloat16" if g.bf16 else "float16"] + quant) for g in machine.cuda]
    if machine.mps:
        out.append(("mps", "Apple MPS", ["float16"] + quant))
    return out + [("cpu", "CPU", ["float32", "bfloat16"] + quant)]


def _fit(size, raw: dict, device: str, name: str, formats: list[str], machine, free) -> dict:
    """The first precision in `formats` whose weights + engine need fit `free` bytes."""
    from clover_cli.engine.fit import QUANTIZED_BYTES_PER_PARAM, engine_bytes
    from clover_cli.engine.placement import Placement

    if size is None or free is None:
        return {"fits": None, "as": None, "need_bytes": None}
    compute = formats[0] if formats[0] not in QUANTIZED_BYTES_PER_PARAM else "bfloat16"
    need = None
    for fmt in formats:
        quantized = fmt in QUANTIZED_BYTES_PER_PARAM
        placement = Placement(device, compute if quantized else fmt, name, fmt if quantized else "")
        weights = size.bytes_quantized(fmt) if quantized else size.bytes_in(fmt)
        need = weights + engine_bytes(raw, placement)
        if need <= free:
            return {"fits": True, "as": fmt, "need_bytes": need}
    return {"fits": False, "as": None, "need_bytes": need}


def _size(c, raw: dict):
    """A catalog row's WeightSize (None: unknown). --quantize leaves the embeddings and the output
    head in the compute dtype (engine/quantize.py): counted as untied, vocab x hidden each."""
    from clover_cli.engine.fit import WeightSize

    if c.params is None:
        return None
    embeddings = 2 * int(raw.get("vocab_size") or 0) * int(raw.get("hidden_size") or 0)
    return WeightSize(c.params, c.fixed_bytes, matrix_params=max(0, c.params - embeddings))


def _report(machine=None) -> dict:
    """The machine's devices and every catalog checkpoint: sizes, cache state, fit per device
    (`machine`: engine/placement.py's Machine, probed when None)."""
    from clover_cli.engine import hub
    from clover_cli.engine.catalog import CATALOG
    from clover_cli.engine.fit import QUANTIZED_BYTES_PER_PARAM, free_bytes
    from clover_cli.engine.placement import DTYPE_BYTES, probe_machine

    machine = machine or probe_machine()
    devices = [(d, n, f, free_bytes(d, machine)) for d, n, f in _devices(machine)]
    widths = {"float32": DTYPE_BYTES["float32"], "bfloat16": DTYPE_BYTES["bfloat16"], **QUANTIZED_BYTES_PER_PARAM}
    rows = []
    for c in CATALOG:
        raw = c.engine_config()
        size = _size(c, raw)
        rows.append({"spec": c.spec, "repo": c.repo, "family": c.family, "family_name": c.family_name,
                     "params": c.params, "params_from": c.params_from, "fixed_bytes": c.fixed_bytes,
                     "source": c.source, "note": c.note, "config": raw,
                     "bytes": {k: (None if size is None else size.bytes_quantized(k)
                                   if k in QUANTIZED_BYTES_PER_PARAM else c.bytes_in(w)) for k, w in widths.items()},
                     "cached": hub.cache_state(c.repo),
                     "fits": {d: _fit(size, raw, d, n, f, machine, free) for d, n, f, free in devices}})
    return {"devices": [{"device": d, "name": n, "free_bytes": free} for d, n, _, free in devices],
            "quantized_formats": list(QUANTIZED_BYTES_PER_PARAM), "cache": str(hub.hf_cache_dir()),
            "checkpoints": rows}


def _gib(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def _cell(fit: dict) -> str:
    if fit["fits"] is None:
        return "?"
    return f"yes ({SHORT.get(fit['as'], fit['as'])})" if fit["fits"] else "no"


def _table(report: dict) -> str:
    """The report as aligned text columns, with what the columns mean below."""
    sizes = ["float32", "bfloat16"] + report["quantized_formats"]
    devices = [d["device"] for d in report["devices"]]
    head = ["family", "spec", "params"] + [SHORT.get(s, s) for s in sizes] + ["cached"] + devices
    body = [[r["family_name"], r["spec"], "?" if r["params"] is None else f"{r['params'] / 1e9:.2f}B"]
            + [_gib(r["bytes"][s]) for s in sizes] + [r["cached"] or "-"]
            + [_cell(r["fits"][d]) for d in devices] for r in report["checkpoints"]]
    widths = [max(len(str(row[i])) for row in [head] + body) for i in range(len(head))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip() for row in [head] + body]
    free = ", ".join(f"{d['device']} ({d['name']}) {_gib(d['free_bytes'])}" for d in report["devices"])
    lines += ["", f"Free memory now: {free}. A device column says whether weights + the engine's need "
              "(KV cache of 8,192 tokens, logits, runtime) fit it now, and in which precision.",
              f"Cached: in {report['cache']} (\"partial\": a download was cut off; pulling again resumes it).",
              "Run one: clover --model hf:ORG/NAME (downloads on first use), or fetch it first: "
              "clover models pull hf:ORG/NAME. Sizes and sources: clover models --json, docs/engine.md."]
    return "\n".join(lines)


def _fit_lines(snap) -> list[str]:
    """After a pull: whether the downloaded checkpoint (its real headers) fits each device."""
    from clover_cli.engine.fit import free_bytes, weight_size
    from clover_cli.engine.placement import probe_machine

    try:
        size = weight_size(snap)
        raw = json.loads((snap / "config.json").read_text())
    except (OSError, ValueError) as e:
        return [f"fit: cannot read the checkpoint's headers or config ({e})"]
    machine = probe_machine()
    out = [f"weights: {size.params:,} parameters ({_gib(size.bytes_in('bfloat16'))} in bfloat16)"]
    for device, name, formats in _devices(machine):
        free = free_bytes(device, machine)
        fit = _fit(size, raw, device, name, formats, machine, free)
        if fit["fits"] is None:
            out.append(f"fits {device} ({name}): unknown (free memory unknown)")
        elif fit["fits"]:
            out.append(f"fits {device} ({name}): yes in {fit['as']} (needs {_gib(fit['need_bytes'])}, "
                       f"{_gib(free)} free)")
        else:
            out.append(f"fits {device} ({name}): no (needs {_gib(fit['need_bytes'])} even in {formats[-1]}, "
                       f"{_gib(free)} free)")
    return out
