"""The block-diffusion trainer behind `clover train` (SDAR / BD3-LM objective, see blockdiff.py).

Output directory layout (resumable):
  OUT/model/            Hugging Face-shaped checkpoint (fp32 while training)
  OUT/optimizer.pt      AdamW state + RNG states
  OUT/train_state.json  step, tokens seen, elapsed seconds, the TrainConfig
  OUT/log.jsonl         one JSON record per logged step / evaluation
"""
from __future__ import annotations

import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch

from clover_cli.training import blockdiff, modeling
from clover_cli.training.data import AR_LAYOUT, BD_LAYOUT, LAYOUTS, CodeSource, Mixture, PackedChatSource


@dataclass
class TrainConfig:
    out: str
    size: str = modeling.DEFAULT_SIZE
    from_dir: str | None = None  # adapt an AR checkpoint
    tokenizer_dir: str | None = None  # reuse a tokenizer (else: trained from local source)
    vocab_size: int = 4096
    seq_len: int = 256
    batch_size: int = 8
    grad_accum: int = 1
    lr: float = 1e-3
    min_lr_ratio: float = 0.1
    warmup: int = 100
    steps: int = 2000  # total optimizer steps (a resumed run continues up to this)
    weight_decay: float = 0.1
    seed: int = 0
    dtype: str = "float32"  # float32 | bfloat16 (training compute dtype)
    device: str = "cpu"
    block_size: int = 32
    ar_fraction: float = 0.0  # share of micro-batches with the auxiliary AR layout (block 1)
    mix: dict = field(default_factory=lambda: {"code": 1.0})  # source name -> weight
    log_every: int = 10
    eval_every: int = 200
    save_every: int = 200
    max_minutes: float | None = None
    threads: int | None = 1
    attn: str = "sdpa"  # "sdpa" | "eager" (both exact with the float mask)
    transcripts_file: str | None = None  # JSONL of transcript records (see transcripts.py)
    distill_file: str | None = None  # JSONL of AR-mode completions (see distill.py)
    distill_drop_loops: bool = True  # leave out completions with a token loop (distill.token_loop)
    distill_parsing_only: bool = False  # keep only completions that parse (rejection sampling)
    code_root: str | None = None  # train on the .py files under this dir (default: the machine's)
    real_names: float = 0.5  # share of copy/call names drawn from real packages (names.harvest)
    vocab_names: float = 0.25  # share built from the tokenizer's word tokens (names.vocab_thing)
    eos_fill: bool = True  # score the rest of an answer's last block as EOS (blockdiff.eos_fill)
    grow_layers: int = 0  # block expansion of the --from model (modeling.grow_layers)
    train_new_only: bool = False  # train only the grown layers (LLaMA Pro); the rest frozen

    def __post_init__(self) -> None:
        if self.size not in modeling.SIZES:
            raise ValueError(f"size must be one of {', '.join(modeling.SIZES)}, got {self.size!r}")
        if self.seq_len % self.block_size:
            raise ValueError("seq_len must be a multiple of block_size")
        if self.attn not in ("sdpa", "eager"):
            raise ValueError("attn must be sdpa or eager")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError("dtype must be float32 or bfloat16")
        if not 0.0 <= self.ar_fraction <= 1.0:
            raise ValueError("ar_fraction must be in [0, 1]")
        if not (0.0 <= self.real_names <= 1.0 and 0.0 <= self.vocab_names <= 1.0
                and self.real_names + self.vocab_names <= 1.0):
            raise ValueError("real_names and vocab_names must be in [0, 1] with a sum <= 1")
        if self.batch_size < 1 or self.grad_accum < 1 or self.steps < 1:
            raise ValueError("batch_size, grad_accum and steps must be >= 1")
        if (self.grow_layers and not self.from_dir) or (self.train_new_only and not self.grow_layers):
            raise ValueError("--grow-layers needs --from DIR; --train-new-only needs --grow-layers")


def lr_at(cfg: TrainConfig, step: int) -> float:
    """Linear warmup then cosine decay to min_lr_ratio * lr."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    p = min(1.0, (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * p)))


def _tokenizer(cfg: TrainConfig, out: Path):
    from transformers import AutoTokenizer

    from clover_cli.training import corpus
    from clover_cli.training import tokenizer as T

    if (out / "model" / "tokenizer.json").exists():
        return AutoTokenizer.from_pretrained(str(out / "model"))
    if cfg.tokenizer_dir:
        return AutoTokenizer.from_pretrained(cfg.tokenizer_dir)
    if cfg.from_dir:
        tok = AutoTokenizer.from_pretrained(cfg.from_dir)
        missing = [t for t in T.SPECIAL_TOKENS if t not in tok.get_vocab()]
        if missing:
            tok.add_special_tokens({"additional_special_tokens": missing})
        tok.mask_token = "<|mask|>"
        if not tok.chat_template:
            tok.chat_template = T.chat_template()
        return tok
    files = list(corpus.python_files(split="train"))
    random.Random(cfg.seed).shuffle(files)
    return T.save_hf_tokenizer(T.train_tokenizer(files, cfg.vocab_size), out / "tokenizer")


def _model(cfg: TrainConfig, out: Path, tok):
    from transformers import AutoModelForCausalLM

    if (out / "model" / "config.json").exists():
        model = AutoModelForCausalLM.from_pretrained(str(out / "model"), dtype=torch.float32,
                                                     attn_implementation=cfg.attn)
    elif cfg.from_dir:
        model = modeling.adapt_from_ar(Path(cfg.from_dir), tok, cfg.block_size, cfg.attn)
        if cfg.grow_layers:
            model = modeling.grow_layers(model, cfg.grow_layers)
    else:
        model = modeling.build_model(modeling.new_config(tok, cfg.size, block_size=cfg.block_size),
                                     attn=cfg.attn)
    return model.to(device=cfg.device, dtype=getattr(torch, cfg.dtype))


# Row lengths measured with the copy-invariant tokenizer: synthetic calls 63-88 tokens, copy /
# recall chats up to ~150, calls behind the agent's real system prompt and tool schemas
# 1,119-1,142, transcripts median 166 (p90 459). Longer examples are skipped by the packer.
# transcripts_sys: the same transcripts behind the system prompt (~1,140 + 166 median tokens).
CHAT_LEN = {"curriculum": 160, "calls": 128, "calls_sys": 1152, "transcripts": 512,
            "transcripts_sys": 1664}


def _real_names(cfg: TrainConfig, tok, split: str, echo: Callable[[str], None] | None = None):
    """The name pool for copy and call data (None when cfg.real_names and cfg.vocab_names are
    0): real names of the training split's packages, never of the held-out transcript
    repositories, and names built from the tokenizer's word tokens."""
    from clover_cli.training import names, transcripts

    share = cfg.real_names + cfg.vocab_names
    if share <= 0 or split != "train":
        return None
    roots = [Path(cfg.code_root)] if cfg.code_root else None
    pool = names.harvest(roots, exclude_repo=transcripts.is_heldout_repo, share=share) \
        if cfg.real_names > 0 else names.RealNames((), (), (), share)
    words = names.vocab_words(tok) if cfg.vocab_names > 0 else ()
    pool = replace(pool, words=words, word_share=cfg.vocab_names / share)
    if echo:
        real = (f"{cfg.real_names:.0%} real ({len(pool.identifiers)} identifiers, "
                f"{len(pool.modules)} files, {len(pool.dirs)} directories)"
                if pool.identifiers or pool.modules or pool.dirs else
                "no real names (none found under the code roots)")
        echo(f"names for copy/call data: {real}, {cfg.vocab_names:.0%} built from "
             f"{len(words)} vocabulary words, the rest synthetic")
    return pool or None


def _sources(cfg: TrainConfig, tok, split: str = "train",
             echo: Callable[[str], None] | None = None) -> dict:
    """The data sources named in cfg.mix (see data.py; rows of CHAT_LEN tokens for chats)."""
    from clover_cli.training import corpus, curriculum, transcripts

    src: dict = {}
    want = {k for k, w in cfg.mix.items() if w > 0}
    if "code" in want:
        files = list(corpus.python_files([Path(cfg.code_root)], split="all")) \
            if cfg.code_root else None
        src["code"] = CodeSource(tok, split, files=files, n=cfg.seq_len)
    real = _real_names(cfg, tok, split, echo) if want & {"curriculum", "dense_copy", "calls",
                                              "calls_sys"} else None
    if "curriculum" in want:
        src["curriculum"] = PackedChatSource(
            tok, lambda r: curriculum.curriculum_chat(r, tok, real), CHAT_LEN["curriculum"])
    if "dense_copy" in want:
        src["dense_copy"] = curriculum.DenseCopySource(tok, cfg.seq_len, real)
    if "calls" in want:
        src["calls"] = PackedChatSource(
            tok, lambda r: transcripts.synthetic_call_chat(r, tok, real=real),
            CHAT_LEN["calls"])
    if "calls_sys" in want:
        src["calls_sys"] = PackedChatSource(
            tok, lambda r: transcripts.synthetic_call_chat(r, tok, p_system=1.0, real=real),
            CHAT_LEN["calls_sys"])
    if "transcripts" in want:
        pool = transcripts.load_rendered(Path(cfg.transcripts_file), split, tok) \
            if cfg.transcripts_file else []
        if not pool:
            raise ValueError("mix has transcripts but --transcripts FILE gave none for " + split)
        src["transcripts"] = PackedChatSource(tok, lambda r: r.choice(pool),
                                              CHAT_LEN["transcripts"])
    if "transcripts_sys" in want:  # what `clover run` sends: call AND answer behind the prompt
        pool_sys = transcripts.load_rendered(Path(cfg.transcripts_file), split, tok,
                                             with_system=True) if cfg.transcripts_file else []
        if not pool_sys:
            raise ValueError("mix has transcripts_sys but --transcripts FILE gave none for "
                             + split)
        src["transcripts_sys"] = PackedChatSource(tok, lambda r: r.choice(pool_sys),
                                                  CHAT_LEN["transcripts_sys"])
    if "distill" in want:
        if not cfg.distill_file:
            raise ValueError("mix has distill but no --distill FILE was given")
        from clover_cli.training import distill
        src["distill"] = distill.source(cfg.distill_file, tok, cfg.seq_len,
                                        cfg.distill_drop_loops, echo, cfg.distill_parsing_only)
    return src


def _base_totals(cfg: TrainConfig, out: Path) -> dict | None:
    """What a `--from` run continues, when the start checkpoint was itself trained by us (its
    train_state.json; e.g. the bundled model trained further on a new machine, where its run
    directory is gone): {from, steps, tokens, elapsed} summed over its own lineage. Taken from
    OUT/train_state.json once this run has saved, so a later change to the --from directory (say,
    exporting this run over it) does not rewrite the record."""
    own = out / "train_state.json"
    if own.exists():
        base = json.loads(own.read_text()).get("base")
        if base or not cfg.from_dir:
            return base
    if not cfg.from_dir:
        return None
    src = Path(cfg.from_dir) / "train_state.json"
    if not src.exists():
        return None  # an AR checkpoint from elsewhere: no training record of ours
    state = json.loads(src.read_text())
    totals = state.get("totals") or {"steps": state["step"], "tokens": state["tokens"],
                                     "elapsed": state["elapsed"]}
    return {"from": str(cfg.from_dir), **{k: totals[k] for k in ("steps", "tokens", "elapsed")}}


class Trainer:
    """Owns model, optimizer, data and the output directory; `run()` trains until cfg.steps."""

    def __init__(self, cfg: TrainConfig, echo: Callable[[str], None] = print):
        self.cfg = cfg
        self.echo = echo
        self.out = Path(cfg.out)
        self.out.mkdir(parents=True, exist_ok=True)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        self.tok = _tokenizer(cfg, self.out)
        self.model = _model(cfg, self.out, self.tok)
        self.mask_id = int(self.model.config.mask_token_id)
        self.pad_id = self.tok.convert_tokens_to_ids("<|pad|>")
        self.eos_id = self.tok.convert_tokens_to_ids("<|im_end|>")
        if cfg.train_new_only:
            n = self.model.config.num_hidden_layers - cfg.grow_layers
            new = modeling.new_layer_indices(n, cfg.grow_layers)
            echo(f"training only the grown layers {new}: "
                 f"{modeling.train_only_layers(self.model, new):,} parameters, the rest frozen")
        params = [p for p in self.model.parameters() if p.requires_grad]
        decay, other = [p for p in params if p.dim() >= 2], [p for p in params if p.dim() < 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                      {"params": other, "weight_decay": 0.0}],
                                     lr=cfg.lr, betas=(0.9, 0.95))
        self.step, self.tokens, self.elapsed = 0, 0, 0.0
        self.rng = random.Random(cfg.seed)
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.base = _base_totals(cfg, self.out)
        self._resume()
        self.mix = Mixture(_sources(cfg, self.tok, echo=echo), cfg.mix, self.pad_id)

    def _resume(self) -> None:
        state_path, opt_path = self.out / "train_state.json", self.out / "optimizer.pt"
        if not (state_path.exists() and opt_path.exists()):
            return
        state = json.loads(state_path.read_text())
        self.step, self.tokens, self.elapsed = state["step"], state["tokens"], state["elapsed"]
        blob = torch.load(opt_path, weights_only=False)
        try:
            self.opt.load_state_dict(blob["optimizer"])
        except ValueError as e:  # parameter groups changed (e.g. adapted model): restart optimizer
            self.echo(f"optimizer state not reused: {e}")
        self.rng.setstate(blob["python_rng"])
        self.gen.set_state(blob["torch_gen"])
        self.echo(f"resumed from {self.out} at step {self.step}")

    def save(self) -> None:
        """Checkpoint model (fp32), optimizer, RNG and step; atomic per file."""
        modeling.save_checkpoint(self.model, self.tok, self.out / "model", dtype=torch.float32)
        blob = {"optimizer": self.opt.state_dict(), "python_rng": self.rng.getstate(),
                "torch_gen": self.gen.get_state()}
        tmp = self.out / "optimizer.pt.tmp"
        torch.save(blob, tmp)
        tmp.replace(self.out / "optimizer.pt")
        state = {"step": self.step, "tokens": self.tokens, "elapsed": self.elapsed,
                 "params": modeling.param_count(self.model), "config": asdict(self.cfg)}
        if self.base:
            state["base"] = self.base
            state["totals"] = {"steps": self.base["steps"] + self.step,
                               "tokens": self.base["tokens"] + self.tokens,
                               "elapsed": self.base["elapsed"] + self.elapsed}
        (self.out / "train_state.json").write_text(json.dumps(state, indent=2) + "\n")
        (self.out / "model" / "train_state.json").write_text(json.dumps(state, indent=2) + "\n")

    def log(self, rec: dict) -> None:
        """Append one record to OUT/log.jsonl."""
        with open(self.out / "log.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")

    def micro_step(self) -> tuple[float, str, int]:
        """One forward/backward on a fresh micro-batch; returns (loss, kind, tokens)."""
        cfg = self.cfg
        ids, ok, pad = self.mix.batch(self.rng, cfg.batch_size * cfg.seq_len)  # [B, N] each
        ids, ok, pad = ids.to(cfg.device), ok.to(cfg.device), pad.to(cfg.device)
        ar = self.rng.random() < cfg.ar_fraction and self.mix.allows_ar()
        loss, count = blockdiff.bd_forward_loss(
            self.model, ids, 1 if ar else cfg.block_size, self.mask_id, self.gen, loss_ok=ok,
            pad=pad, full_mask=ar, fill_id=self.eos_id if cfg.eos_fill else None)
        (loss / cfg.grad_accum).backward()
        return float(loss.detach()), AR_LAYOUT if ar else BD_LAYOUT, ids.numel()

    def run(self, evaluate: Callable[["Trainer"], dict] | None = None) -> dict:
        """Train up to cfg.steps (or max_minutes); returns the last log record."""
        cfg = self.cfg
        self.model.train()
        t_start = time.time()
        window_t, window_tok, losses = time.time(), 0, {layout: [] for layout in LAYOUTS}
        self._window_start = self.step
        last: dict = {}
        while self.step < cfg.steps:
            for g in self.opt.param_groups:
                g["lr"] = lr_at(cfg, self.step)
            for _ in range(cfg.grad_accum):
                loss, kind, ntok = self.micro_step()
                losses[kind].append(loss)
                window_tok += ntok
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
            self.step += 1
            if self.step % cfg.log_every == 0 or self.step == cfg.steps:
                dt = time.time() - window_t
                self.tokens += window_tok
                self.elapsed += dt
                rec = {"step": self.step, "lr": lr_at(cfg, self.step),
                       "loss": _mean(losses[BD_LAYOUT]), "ar_loss": _mean(losses[AR_LAYOUT]),
                       "tok_s": window_tok / max(dt, 1e-9), "tokens": self.tokens,
                       "elapsed_s": round(self.elapsed, 1)}
                eta = _eta_minutes(cfg, self.step, self.step - self._window_start, dt,
                                   time.time() - t_start)
                self.echo(f"step {self.step}/{cfg.steps} {progress_bar(self.step, cfg.steps)} "
                          f"loss {_fmt(rec['loss'])} ar {_fmt(rec['ar_loss'])} "
                          f"lr {rec['lr']:.2e} {rec['tok_s']:.0f} tok/s "
                          f"{self.elapsed / 60:.1f} min, ETA {eta:.0f} min")
                self.log(rec)
                last = rec
                window_t, window_tok, losses = time.time(), 0, {layout: [] for layout in LAYOUTS}
                self._window_start = self.step
            if evaluate and (self.step % cfg.eval_every == 0 or self.step == cfg.steps):
                self.model.eval()
                ev = {"step": self.step, "eval": evaluate(self)}
                self.model.train()
                self.echo("eval " + json.dumps(ev["eval"]))
                self.log(ev)
                window_t = time.time()
            if self.step % cfg.save_every == 0 or self.step == cfg.steps:
                self.save()
            if cfg.max_minutes and time.time() - t_start > cfg.max_minutes * 60:
                self.echo(f"time limit reached at step {self.step}")
                self.save()
                break
        return last


def progress_bar(step: int, total: int, width: int = 20) -> str:
    """`[#######.............]  35%`: the share of optimizer steps done."""
    frac = min(1.0, step / max(total, 1))
    done = int(round(frac * width))
    return "[" + "#" * done + "." * (width - done) + f"] {100 * frac:3.0f}%"


def _eta_minutes(cfg: TrainConfig, step: int, window_steps: int, window_s: float,
                 run_s: float) -> float:
    """Minutes left at the last window's speed, capped by --max-minutes."""
    left = (cfg.steps - step) * window_s / max(window_steps, 1) / 60
    if cfg.max_minutes:
        left = min(left, max(0.0, cfg.max_minutes - run_s / 60))
    return left


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `clover train`")
