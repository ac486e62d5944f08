"""`clover train`: train (or keep training) the block-diffusion model; `--export` ships one.

The trainer (clover_cli/training) is the `train` extra: what it needs beyond the base install is
listed under `train` in pyproject.toml, and a missing module is one line naming the extra.
"""
from __future__ import annotations

import importlib

import click

EXTRA = "pip install 'clover-cli[train]'"


def trainer_module(name: str):
    """clover_cli.training.<name>, or one line (exit 1) naming the module it lacks and the extra."""
    try:
        return importlib.import_module(f"clover_cli.training.{name}")
    except ImportError as exc:
        raise click.ClickException(f"clover train needs {exc.name or exc}: {EXTRA}") from None


def _mix(text: str) -> dict:
    out = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, _, weight = part.partition(":")
        try:
            out[name.strip()] = float(weight) if weight else 1.0
        except ValueError:
            raise click.BadParameter(f"bad mix entry {part!r}; expected NAME:WEIGHT") from None
    known = {"code", "curriculum", "dense_copy", "calls", "calls_sys", "transcripts", "transcripts_sys",
             "distill"}
    if not out or not set(out) <= known:
        raise click.BadParameter(f"mix names must be among {', '.join(sorted(known))}")
    return out


@click.command("train")
@click.option("--out", "out", default="runs/tiny", show_default=True, help="Output dir (resumable).")
@click.option("--from", "from_dir", default=None,
              help="Start from a checkpoint dir: an autoregressive one is adapted, a block-diffusion "
                   "one (`tiny` = the bundled model) is trained further; its training record carries "
                   "over into train_state.json (base, totals).")
@click.option("--size", default=None, help="Size preset for a model trained from scratch: micro | nano (default) | mini | small.")
@click.option("--tokenizer", "tokenizer_dir", default=None, help="Reuse a tokenizer directory.")
@click.option("--vocab-size", default=4096, show_default=True)
@click.option("--steps", default=2000, show_default=True, help="Total optimizer steps.")
@click.option("--seq-len", default=256, show_default=True)
@click.option("--batch-size", default=8, show_default=True)
@click.option("--grad-accum", default=1, show_default=True)
@click.option("--lr", default=1e-3, show_default=True)
@click.option("--warmup", default=100, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--dtype", type=click.Choice(["float32", "bfloat16"]), default="float32", show_default=True)
@click.option("--device", default="cpu", show_default=True, help="cpu | cuda")
@click.option("--mix", "mix", default="code:1", show_default=True,
              help="Data mixture, e.g. code:0.3,curriculum:0.2,calls:0.2,transcripts:0.3")
@click.option("--transcripts", "transcripts_file", default=None, help="Transcripts JSONL file.")
@click.option("--distill", "distill_file", default=None,
              help="Self-distillation JSONL (--make-distill) for the mix's `distill` source.")
@click.option("--distill-drop-loops/--distill-keep-loops", "distill_drop_loops", default=True,
              show_default=True,
              help="Leave out distillation records whose completion loops on a 1-3 token pattern.")
@click.option("--distill-parsing-only", "distill_parsing_only", is_flag=True, default=False,
              help="Keep only distillation records whose prompt + completion parses (as "
                   "`clover bench` judges code): train the parallel mode on the teacher's "
                   "good completions only.")
@click.option("--grow-layers", "grow_layers", default=0, show_default=True, type=click.IntRange(0),
              help="With --from: insert this many decoder layers, each a copy of the one before "
                   "with its output projections zeroed, so the grown model starts out computing "
                   "exactly what --from did (block expansion, LLaMA Pro).")
@click.option("--train-new-only", "train_new_only", is_flag=True, default=False,
              help="With --grow-layers: train only the inserted layers; every other weight stays "
                   "as --from had it.")
@click.option("--ar-fraction", default=0.0, show_default=True,
              help="Share of micro-batches with the auxiliary AR (block size 1) layout.")
@click.option("--real-names", "real_names", default=0.5, show_default=True, type=float,
              help="Share of names in copy and call data drawn from real packages (the training "
                   "split's, never the held-out repositories'); 0 = synthetic names only.")
@click.option("--vocab-names", "vocab_names", default=0.25, show_default=True, type=float,
              help="Share of names in copy and call data built from the tokenizer's own word "
                   "tokens, drawn uniformly (so every token gets copy practice); with "
                   "--real-names at most 1, the rest synthetic.")
@click.option("--eos-fill/--no-eos-fill", "eos_fill", default=True, show_default=True,
              help="Train the rest of an answer's last block as EOS (what decoding must fill "
                   "after the answer ends).")
@click.option("--eval-every", default=200, show_default=True)
@click.option("--save-every", default=200, show_default=True)
@click.option("--log-every", default=10, show_default=True)
@click.option("--max-minutes", default=None, type=float, help="Stop (and save) after this long.")
@click.option("--threads", default=1, show_default=True, help="torch CPU threads.")
@click.option("--attn", type=click.Choice(["sdpa", "eager"]), default="sdpa", show_default=True)
@click.option("--no-eval", is_flag=True, help="Skip held-out evaluation.")
@click.option("--make-transcripts", "make_transcripts", default=0, type=int,
              help="Generate this many agent transcripts into --transcripts FILE and exit.")
@click.option("--tests-share", "tests_share", default=0.1, show_default=True, type=float,
              help="With --make-transcripts: share of 'run the tests' transcripts on generated "
                   "repositories (1 = only those).")
@click.option("--make-distill", "make_distill", default=0, type=click.IntRange(0),
              help="Write this many AR-mode completions of training-split code prompts by the "
                   "--from model (default: tiny) into --distill FILE (appends) and exit.")
@click.option("--export", "export", nargs=2, default=None, metavar="SRC DEST",
              help="Export a checkpoint (run dir or model dir) to DEST in bf16, keeping DEST's README.md.")
def train(out, from_dir, size, tokenizer_dir, vocab_size, steps, seq_len, batch_size, grad_accum,
          lr, warmup, seed, dtype, device, mix, transcripts_file, ar_fraction, real_names,
          vocab_names, eos_fill,
          eval_every, save_every, log_every, max_minutes, threads, attn, no_eval, make_transcripts, tests_share, export,
          distill_file, make_distill, distill_drop_loops, distill_parsing_only, grow_layers,
          train_new_only):
    """Train the block-diffusion model (SDAR/BD3-LM objective); resumes from OUT if present."""
    if export:
        modeling = trainer_module("modeling")
        try:
            dest = modeling.export_model(export[0], export[1])
        except (FileNotFoundError, OSError, ValueError) as e:
            raise click.ClickException(str(e)) from None
        click.echo(f"exported {export[0]} -> {dest}")
        return
    if make_transcripts:
        if not transcripts_file:
            raise click.UsageError("--make-transcripts needs --transcripts FILE")
        generate = trainer_module("transcripts").generate
        counts: dict = {}
        if not 0.0 <= tests_share <= 1.0:
            raise click.UsageError("--tests-share must be between 0 and 1")
        try:
            for rec in generate(transcripts_file, make_transcripts, seed=seed, p_system=0.0,
                                p_tests=tests_share):
                counts[rec["split"]] = counts.get(rec["split"], 0) + 1
        except ValueError as e:
            raise click.ClickException(str(e)) from None
        click.echo(f"wrote {transcripts_file}: {counts}")
        return
    if make_distill:
        _make_distill(make_distill, distill_file, from_dir or "tiny", seed)
        return
    make_evaluator = trainer_module("evaluation_hooks").make_evaluator
    training = trainer_module("trainer")
    TrainConfig, Trainer = training.TrainConfig, training.Trainer

    if from_dir == "tiny":
        from clover_cli.engine.loader import bundled_tiny_dir
        from_dir = str(bundled_tiny_dir())

    try:
        cfg = TrainConfig(out=out, **({"size": size} if size else {}), from_dir=from_dir, tokenizer_dir=tokenizer_dir,
                          vocab_size=vocab_size, seq_len=seq_len, batch_size=batch_size,
                          grad_accum=grad_accum, lr=lr, warmup=warmup, steps=steps, seed=seed,
                          dtype=dtype, device=device, mix=_mix(mix), ar_fraction=ar_fraction,
                          log_every=log_every, eval_every=eval_every, save_every=save_every,
                          max_minutes=max_minutes, threads=threads, attn=attn,
                          transcripts_file=transcripts_file, real_names=real_names,
                          vocab_names=vocab_names, eos_fill=eos_fill,
                          distill_file=distill_file, distill_drop_loops=distill_drop_loops,
                          distill_parsing_only=distill_parsing_only, grow_layers=grow_layers,
                          train_new_only=train_new_only)
        trainer = Trainer(cfg, echo=lambda s: click.echo(s))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    trainer.run(None if no_eval else make_evaluator(trainer))
    click.echo(f"saved {out}/model (export: clover train --export {out} DEST)")


def _make_distill(n: int, path: str | None, teacher: str, seed: int) -> None:
    """`--make-distill N`: the teacher's AR-mode completions, with a progress line per 5%."""
    if not path:
        raise click.UsageError("--make-distill needs --distill FILE")
    distill = trainer_module("distill")
    from clover_cli.engine.loader import ModelLoadError

    step = max(1, n // 20)

    def progress(done: int, total: int) -> None:
        if done % step == 0 or done == total:
            click.echo(f"distill {done}/{total}", err=True)

    try:
        done = distill.generate(teacher, path, n, seed=seed, progress=progress)
    except (ModelLoadError, ValueError, OSError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"wrote {done} completions by {teacher} to {path}")
