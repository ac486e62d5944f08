"""Self-distillation data: the model's own AR-mode completions of code prompts.

Block decoding at threshold 0.95 commits more than one token per forward only where the model is
that sure of a position *before* the positions left of it are known. On real source code a small
model rarely is: the next token of real code has several good candidates. The model's own greedy
AR-mode continuation of a prompt has none of that ambiguity (each token is a deterministic function
of what precedes it), so training the block-diffusion objective on those continuations teaches
the parallel mode to reproduce what AR mode writes, with confidence it can commit. This is the
idea of dParallel's certainty-forcing distillation on the model's own trajectories (Chen et al.
2025, "dParallel: Learnable Parallel Decoding for dLLMs") and of consistency LLMs trained on their
own Jacobi fixed points (Kou et al. 2024, "CLLMs"); the code here is our own.

`generate` writes one JSON record per line: {"prompt", "completion", "file", "finish"} where
prompt + completion is the full text (the completion is what `Engine.generate` returned in AR
mode with token healing, exactly as `clover bench` decodes its AR-mode code runs).
`DistillSource` packs those records into training rows; only the completion is scored, rows
are only ever trained in the block-diffusion layout (AR mode is the teacher, see trainer.py), and
completions with a token loop are left out by default.

The prompts come from the training split of the machine's code corpus (held-out files never),
shaped like the bench's code prompts: a top-level `def` / `class` and the next 0-3 lines, now and
then behind the file's first import lines.
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Callable, Iterator

from clover_cli.training import corpus
from clover_cli.training.data import BD_LAYOUT, Example, PackedChatSource

_START = re.compile(r"^(async def|def|class) \w+")
_IMPORT = re.compile(r"^(import|from) \w")
MAX_PROMPT_CHARS = 400
MAX_LINE_CHARS = 100


def code_prompt(text: str, rng: random.Random) -> str | None:
    """A bench-shaped prompt cut from one source file, or None when the file has no usable
    top-level def/class. It ends with a newline, as a prompt typed in an editor does."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if _START.match(line)]
    if not starts:
        return None
    i = rng.choice(starts)
    k = rng.choice((1, 1, 2, 2, 3, 4))
    body = []
    for line in lines[i:i + k]:
        if not line.strip():  # the head ends at the first blank line
            break
        if len(line) > MAX_LINE_CHARS:
            return None
        body.append(line)
    head = ""
    imports = [line for line in lines[:40] if _IMPORT.match(line) and len(line) <= MAX_LINE_CHARS]
    if imports and rng.random() < 0.25:
        head = "".join(imports[:rng.choice((1, 1, 2))]) + "\n\n"
    prompt = head + "".join(body)
    if not prompt.endswith("\n"):
        prompt += "\n"
    return prompt if len(prompt) <= MAX_PROMPT_CHARS else None


def _groups(files: list[Path]) -> list[list[Path]]:
    """Files grouped by top-level module or package under their corpus root, so that one huge
    package (transformers has thousands of near-identical model files) does not dominate."""
    roots = corpus.source_roots()
    groups: dict[str, list[Path]] = {}
    for path in files:
        key = path.parent.as_posix()
        for root in roots:
            if path.is_relative_to(root):
                key = path.relative_to(root).parts[0]
                break
        groups.setdefault(key, []).append(path)
    return [groups[k] for k in sorted(groups)]


def prompts(files: list[Path], n: int, seed: int) -> Iterator[tuple[str, str]]:
    """n (file, prompt) pairs: a random package or module, then a random file of it (a file
    may give several prompts)."""
    rng = random.Random(seed)
    groups = _groups(files)
    made = tries = 0
    while made < n:
        tries += 1
        if tries > 50 * n + 1000:
            raise ValueError(f"only {made} code prompts found in {len(files)} files (wanted {n})")
        path = rng.choice(rng.choice(groups))
        text = corpus.read_source(path)
        prompt = code_prompt(text, rng) if text else None
        if prompt:
            made += 1
            yield str(path), prompt


def generate(model_spec: str, out: str | Path, n: int, seed: int = 0, max_new_tokens: int = 64,
             files: list[Path] | None = None,
             progress: Callable[[int, int], None] | None = None) -> int:
    """Write n AR-mode completions of training-split code prompts to `out` (JSONL); returns n.
    Appends to an existing file, so a stopped run can be topped up with another seed."""
    from clover_cli.engine.config import GenerationConfig
    from clover_cli.engine.engine import Engine
    from clover_cli.engine.loader import load_model

    files = files if files is not None else list(corpus.python_files(split="train"))
    if not files:
        raise ValueError("no training-split Python files found for code prompts")
    lm = load_model(model_spec)
    engine = Engine(lm)
    cfg = GenerationConfig(max_new_tokens=max_new_tokens,
                           block_size=1 if lm.is_diffusion else None, token_healing=True)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = 0
    with open(out, "a", encoding="utf-8") as f:
        for path, prompt in prompts(files, n, seed):
            result = engine.generate(lm.encode(prompt), cfg)
            f.write(json.dumps({"prompt": prompt, "completion": result.text, "file": path,
                                "finish": result.finish_reason}) + "\n")
            f.flush()
            done += 1
            if progress:
                progress(done, n)
    return done


def load(path: str | Path) -> list[dict]:
    """The records of a distillation file (blank lines skipped; a bad line is a clear error)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read the distillation file {path}: {e}") from None
    recs = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec.get("prompt"), str) or not isinstance(rec.get("completion"), str):
                raise ValueError("needs string fields prompt and completion")
        except (ValueError, AttributeError) as e:
            raise ValueError(f"{path}:{lineno}: not a distillation record ({e})") from None
        recs.append(rec)
    return recs


def example(tokenizer, rec: dict, eot: int) -> Example:
    """prompt + completion tokenized as one text (what healing makes the decoder produce);
    scored: every token that ends inside the completion, and the EOS when the teacher ended."""
    text = rec["prompt"] + rec["completion"]
    enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    cut = len(rec["prompt"])
    ids = list(enc["input_ids"])
    ok = [end > cut for _, end in enc["offset_mapping"]]
    if rec.get("finish") == "eos":
        ids.append(eot)
        ok.append(True)
    return Example(ids, ok)


def token_loop(ids: list[int], repeats: int = 4, max_period: int = 3) -> bool:
    """Does the sequence hold a loop of a 1-3 token pattern repeated `repeats` times in a row
    (`a a a a`, `is_is_is_is`, four `"` tokens)? Line-level repetition is not a token loop."""
    for period in range(1, max_period + 1):
        run = 0
        for i in range(period, len(ids)):
            run = run + 1 if ids[i] == ids[i - period] else 0
            if run >= period * (repeats - 1):
                return True
    return False


class DistillSource(PackedChatSource):
    """Rows packed from distillation records, separated by <|endoftext|>; the first record of a
    row starts at position 0, where a prompt sits at inference."""

    layouts = (BD_LAYOUT,)  # never the AR layout: AR mode is the teacher these records came from

    def __init__(self, tokenizer, records: list[dict], n: int = 256, drop_loops: bool = True,
                 parsing_only: bool = False):
        """drop_loops: leave out records whose completion holds a token loop (token_loop). A
        small teacher's loops are the easiest thing to learn in parallel: trained on them, the
        block mode filled whole blocks with one token (`not not not ...`) at high confidence.
        parsing_only: keep only records whose prompt + completion parses as `clover bench`
        judges code (rejection sampling on the teacher's own outputs, as in STaR, Zelikman et
        al. 2022, and RFT, Yuan et al. 2023), so the parallel mode learns the teacher's good
        completions rather than all of them."""
        total = len(records)
        if parsing_only:
            from clover_cli.bench.speed import code_parses

            records = [r for r in records if code_parses(r["prompt"], r["completion"])]
        if not records:
            raise ValueError("the distillation file has no records"
                             + (" whose completion parses" if parsing_only else ""))
        eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
        examples = [ex for ex in (example(tokenizer, r, eot) for r in records)
                    if len(ex.ids) < n and any(ex.loss_ok)
                    and not (drop_loops and token_loop([i for i, ok in zip(ex.ids, ex.loss_ok)
                                                        if ok]))]
        self.kept, self.total = len(examples), total
        if not examples:
            raise ValueError(f"no distillation record fits a row of {n} tokens")
        super().__init__(tokenizer, lambda rng: rng.choice(examples), n, encode=False)


def source(path: str, tokenizer, n: int, drop_loops: bool,
           echo: Callable[[str], None] | None = None,
           parsing_only: bool = False) -> DistillSource:
    """The trainer's `distill` source from a file; says how many records it kept."""
    src = DistillSource(tokenizer, load(path), n, drop_loops=drop_loops, parsing_only=parsing_only)
    if echo:
        left_out = [w for w, on in (("token loops", drop_loops),
                                    ("completions that do not parse", parsing_only)) if on]
        echo(f"distillation records: {src.kept} of {src.total} kept"
             + (f" ({' and '.join(left_out)} left out)" if left_out else ""))
    return src
