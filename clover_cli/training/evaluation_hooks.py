"""Evaluation run during training: held-out losses, copy accuracy and TPF (block decoding)."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

from clover_cli.engine.config import DEFAULT_THRESHOLD
from clover_cli.training import curriculum, names, transcripts
from clover_cli.training.data import CodeSource, chat_example, fixed_batches
from clover_cli.training.evaluate import bd_generate

_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)

# Phrasings that are NOT in requests.json (never seen in training): the held-out eval asks the
# held-out repositories' requests in these words too ("phrasings not in the templates").
NOVEL_PHRASES = {
    "show": ["Could you open {X} for me?", "I want to read {X}", "view {X}",
             "give me the contents of {X}"],
    "define": ["In which file is {X} defined?", "where can I find the definition of {X}?",
               "Where does {X} live?", "find where {X} is defined"],
    "uses": ["where is {X} referenced?", "look for usages of {X}", "which places use {X}?",
             "search the code for {X}"],
    "list": ["what's in the {X} folder?", "show me the files under {X}",
             "list everything in {X}", "what does the directory {X} contain?"],
    "tests": ["are the tests green?", "please run the test suite now", "execute the tests"],
}


def parse_call(text: str, strict: bool = False) -> tuple[str, dict] | None:
    """(name, arguments) of the first call in text, or None.

    Default: the call as the agent reads it (clover_cli.agent.parsing), i.e. what `clover run`
    would execute — a stray brace after the JSON object (`...}}}</tool_call>`, a frequent
    block-decoding slip of the bundled model) or a call cut off at the end is still that call.
    strict: the `<tool_call>` body must be exactly one JSON object (how the trainer's logs of
    runs/nano5, the fourth bundled model's run, were measured up to step 14,200)."""
    if not strict:
        from clover_cli.agent.parsing import parse_tool_calls

        calls = parse_tool_calls(text).calls
        if not calls or not isinstance(calls[0].arguments, dict):
            return None
        return calls[0].name, dict(calls[0].arguments)
    m = _CALL_RE.search(text)
    if not m:
        return None
    try:
        obj = json.loads(m.group(1))
        return obj["name"], obj["arguments"]
    except (ValueError, KeyError, TypeError):
        return None


def call_prompts(tok, n: int, seed: int, records: list[dict] | None = None,
                 with_tools: bool | None = None, novel: bool = False) -> list[tuple]:
    """(prompt text, expected tool, expected args) for synthetic names or held-out records.

    with_tools: None = as recorded; True = the agent's system prompt and tool schemas in front
    (what `clover run` sends); False = no system section. novel: the request re-worded with a
    NOVEL_PHRASES phrasing of its kind."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if records:
            rec = records[i % len(records)]
            msgs = [dict(m) for m in rec["messages"][:-3] if m["role"] != "system"]
            if novel and rec.get("kind") in NOVEL_PHRASES:
                msgs[-1]["content"] = rng.choice(NOVEL_PHRASES[rec["kind"]]).replace(
                    "{X}", rec.get("x", ""))
            use = rec.get("with_tools") if with_tools is None else with_tools
            tools = None
            if use:
                tools = transcripts.agent_prefix()[1]
                sys_text = transcripts.agent_system(rec.get("root", "/repo"))
                msgs = [{"role": "system", "content": sys_text}] + msgs
            out.append((tok.apply_chat_template(msgs, tools=tools, add_generation_prompt=True,
                                                tokenize=False), rec["tool"], rec["arguments"]))
            continue
        text = transcripts.synthetic_call_chat(rng, tok, wide=False)  # a fixed set
        head, _, tail = text.rpartition("<|im_start|>assistant\n")
        call = parse_call(tail)
        out.append((head + "<|im_start|>assistant\n", call[0], call[1]))
    return out


def call_accuracy(model, tok, prompts: list[tuple], block_size: int, threshold: float = DEFAULT_THRESHOLD,
                  generate=None) -> dict:
    """Share of prompts whose decoded call names the right tool with exactly the right args.

    generate: a bd_generate-shaped decoder (default: bd_generate, the uncached one the trainer
    uses on its in-memory model; evaluate_dir passes the engine)."""
    decode = generate or bd_generate
    mask_id = int(model.config.mask_token_id)
    eos = (tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>"))
    right = valid = strict = tokens = forwards = 0
    for prompt, tool, args in prompts:
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        out, nf = decode(model, ids, mask_id, eos, block_size, max_new=64, threshold=threshold)
        tokens += len(out)
        forwards += nf
        text = tok.decode(out, skip_special_tokens=False)
        got = parse_call(text)
        valid += got is not None and got[0] == tool
        right += got == (tool, args)
        strict += parse_call(text, strict=True) == (tool, args)
    n = max(len(prompts), 1)
    return {"call_valid": valid / n, "call_exact": right / n, "call_exact_strict": strict / n,
            "tpf": tokens / max(forwards, 1)}


_FACT_RE = re.compile(r"[\w./-]+\.py\b|\b\d+\b")


def answer_grounding(model, tok, records: list[dict], block_size: int, generate=None,
                     max_new: int = 48) -> dict:
    """After the right call and its real tool result, does the model's answer state the facts
    of the reference answer? Facts: the file paths (`*.py`) and numbers (line, match and file
    counts) in the transcript's own final answer; an answer is grounded when it contains all of
    them. Records whose reference states no fact are skipped."""
    decode = generate or bd_generate
    mask_id = int(model.config.mask_token_id)
    eos = (tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>"))
    grounded = n = 0
    examples: list[tuple[str, str]] = []
    for rec in records:
        facts = set(_FACT_RE.findall(rec["messages"][-1]["content"]))
        if not facts:
            continue
        msgs = [m for m in rec["messages"][:-1] if m["role"] != "system"]
        prompt = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        out, _ = decode(model, ids, mask_id, eos, block_size, max_new=max_new, threshold=DEFAULT_THRESHOLD)
        text = tok.decode(out, skip_special_tokens=True)
        said = set(_FACT_RE.findall(text))
        n += 1
        grounded += facts <= said
        examples.append((rec["messages"][-1]["content"], text.strip()))
    return {"answer_grounded": grounded / max(n, 1), "answer_n": n, "answer_examples": examples[:5]}


def copy_accuracy(model, tok, n: int, seed: int, block_size: int, generate=None) -> float:
    """Pure copy: the assistant must repeat a synthetic name exactly."""
    decode = generate or bd_generate
    rng = random.Random(seed)
    mask_id = int(model.config.mask_token_id)
    eos = (tok.convert_tokens_to_ids("<|im_end|>"),)
    ok = 0
    for _ in range(n):
        text = curriculum.copy_chat(rng, tok)
        head, _, tail = text.rpartition("<|im_start|>assistant\n")
        want = tail.split("<|im_end|>")[0]
        ids = tok(head + "<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
        out, _ = decode(model, ids, mask_id, eos, block_size, max_new=32)
        ok += tok.decode(out, skip_special_tokens=True).strip() == want
    return ok / max(n, 1)


def _teacher_forced(model, ex):
    """AR-mode (block size 1) argmax at every scored position of a chat example, given the true
    tokens before it -> (predictions [L], ids [L], scored answer positions without <|im_end|>)."""
    import torch

    from clover_cli.training import blockdiff

    mask_id = int(model.config.mask_token_id)
    device = next(model.parameters()).device
    ids = torch.tensor([ex.ids], device=device)
    ok = torch.tensor([ex.loss_ok], device=device)
    size = ids.shape[1]
    noisy = torch.where(ok, torch.full_like(ids, mask_id), ids)
    dtype = next(model.parameters()).dtype
    mask4 = blockdiff.additive_mask(blockdiff.bd_allowed(size, 1, device), dtype)
    pos = torch.arange(size, device=device)
    with torch.no_grad():
        logits = model(input_ids=torch.cat([noisy, ids], 1), attention_mask=mask4,
                       position_ids=torch.cat([pos, pos])[None]).logits[0, :size].float()
    logits[:, mask_id] = float("-inf")
    return logits.argmax(-1), ids[0], ok[0].nonzero().flatten().tolist()[:-1]


def copy_positions(model, tok, n: int, seed: int, positions: int = 6) -> list[float]:
    """Teacher-forced copy accuracy by position, in AR mode (block size 1): for pure-copy chats,
    the share of examples whose k-th answer token is the argmax given the true tokens before it.
    Position 0 is finding where the name starts; later positions are induction (copy the token
    that followed the previous one in the request)."""
    rng = random.Random(seed)
    hits: list[list[int]] = [[] for _ in range(positions)]
    for _ in range(n):
        pred, ids, answer = _teacher_forced(model, chat_example(tok, curriculum.copy_chat(rng, tok)))
        for k, i in enumerate(answer[:positions]):
            hits[k].append(int(pred[i] == ids[i]))
    return [round(sum(h) / len(h), 3) if h else 0.0 for h in hits]


class _One:
    """A name pool that always gives one name (for copy_chat)."""
    share = 1.0

    def __init__(self, name: str):
        self.name = name

    def thing(self, rng, kind=None) -> str:
        return self.name


def word_copy(model, tok, n: int, seed: int, compound: bool = False) -> float:
    """Teacher-forced exact copy of names made of one vocabulary word token drawn uniformly and
    one synthetic word (`ptr_data`, `ku_pending`): the share copied whole. A copy circuit for
    every token scores high; per-token copying learnt from frequent names does not (the fourth
    model copied 19% of 300 such names, 0% of those whose word the real-name pool lacked).
    `compound`: the vocabulary part is two words with nothing between them (`shelf`-like pieces,
    `ptrpending_data`), which the fifth model mangled in the card's demo."""
    rng = random.Random(seed)
    words = [w for w in names.vocab_words(tok) if w.islower() and len(w) > 2]
    ok = 0
    for _ in range(n):
        w = rng.choice(words) + (rng.choice(words) if compound else "")
        name = f"{names.word(rng)}_{w}" if rng.random() < 0.5 else f"{w}_{names.word(rng)}"
        pred, ids, answer = _teacher_forced(
            model, chat_example(tok, curriculum.copy_chat(rng, tok, _One(name))))
        ok += all(int(pred[i]) == int(ids[i]) for i in answer)
    return round(ok / max(n, 1), 3)


def make_evaluator(trainer, n_code_rows: int = 8, n_calls: int = 20):
    """A closure computing the eval dict for the trainer's current model."""
    from clover_cli.training.blockdiff import heldout_loss

    cfg, tok = trainer.cfg, trainer.tok
    code_rows = list(fixed_batches(CodeSource(tok, "eval"), n_code_rows, cfg.seq_len, seed=7))
    synth = call_prompts(tok, n_calls, seed=4242)
    held_recs = []
    if cfg.transcripts_file and Path(cfg.transcripts_file).exists():
        held_recs = transcripts.load_records(Path(cfg.transcripts_file), "eval")
    held = call_prompts(tok, min(n_calls, len(held_recs)), 0, held_recs) if held_recs else []
    held_rows = [chat_example(tok, transcripts.render(tok, r)) for r in held_recs[:16]]

    def evaluate(tr) -> dict:
        m = tr.model
        res = {"code_loss": round(heldout_loss(m, code_rows, cfg.block_size, tr.mask_id), 4),
               "copy": copy_accuracy(m, tok, 10, 99, cfg.block_size),
               # teacher-forced copy, mean over name positions 0-5: moves long before "copy"
               "copy_tf": round(sum(p := copy_positions(m, tok, 20, 11)) / len(p), 3),
               "word_copy_tf": word_copy(m, tok, 40, 5)}
        res.update({"synth_" + k: round(v, 3)
                    for k, v in call_accuracy(m, tok, synth, cfg.block_size).items()})
        if held:
            res["transcript_loss"] = round(heldout_loss(m, held_rows, cfg.block_size,
                                                        tr.mask_id), 4)
            res.update({"heldout_" + k: round(v, 3)
                        for k, v in call_accuracy(m, tok, held, cfg.block_size).items()})
        return res

    return evaluate


def engine_generator(model_dir: str):
    """A bd_generate-shaped decoder backed by the engine (cached, stops at EOS as `clover` does)."""
    from clover_cli.engine.config import GenerationConfig
    from clover_cli.engine.engine import Engine
    from clover_cli.engine.loader import load_model

    engine = Engine(load_model(model_dir))

    def generate(model, ids, mask_id, eos, block_size=32, max_new=64, threshold=DEFAULT_THRESHOLD):
        result = engine.generate(list(ids), GenerationConfig(max_new_tokens=max_new, threshold=threshold))
        return list(result.token_ids), result.stats.forwards

    return generate


def evaluate_dir(model_dir: str, transcripts_file: str, n: int = 30, seed: int = 0) -> dict:
    """Measured numbers for a model card: held-out call accuracy/TPF with and without the agent
    prefix, synthetic-name call accuracy, pure copy, held-out code and transcript loss. Calls and
    copies are decoded by the engine (what `clover` runs), at threshold 0.95."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from clover_cli.training.blockdiff import heldout_loss

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 attn_implementation="sdpa").eval()
    bs, mask_id = int(model.config.block_size), int(model.config.mask_token_id)
    gen = engine_generator(model_dir)
    recs = transcripts.load_records(Path(transcripts_file), "eval")
    random.Random(seed).shuffle(recs)
    recs = recs[:n]
    code_rows = list(fixed_batches(CodeSource(tok, "eval"), 16, 256, seed=7))
    res = {"n": len(recs), "repos": sorted({r["repo"] for r in recs}),
           "code_loss": heldout_loss(model, code_rows, bs, mask_id),
           "transcript_loss": heldout_loss(
               model, [chat_example(tok, transcripts.render(tok, r)) for r in recs], bs, mask_id),
           "copy": copy_accuracy(model, tok, n, 99, bs, gen),
           "copy_by_position_teacher_forced": copy_positions(model, tok, max(n, 40), 11),
           "word_copy_teacher_forced": word_copy(model, tok, 300, 1),
           "compound_copy_teacher_forced": word_copy(model, tok, 300, 2, compound=True)}
    for key, wt, novel in (("heldout", False, False), ("heldout_agent_prefix", True, False),
                           ("heldout_novel", False, True),
                           ("heldout_novel_agent_prefix", True, True)):
        res.update({f"{key}_{k}": v for k, v in call_accuracy(
            model, tok, call_prompts(tok, len(recs), 0, recs, with_tools=wt, novel=novel),
            bs, generate=gen).items()})
    res.update({"synth_" + k: v for k, v in
                call_accuracy(model, tok, call_prompts(tok, n, 4242), bs, generate=gen).items()})
    res.update(answer_grounding(model, tok, recs, bs, generate=gen))
    return res


if __name__ == "__main__":  # pragma: no cover
    import sys
    print(json.dumps(evaluate_dir(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3
                                  else 30), indent=2))
