"""The in-process engine backend: specs `tiny`, a checkpoint directory, `hf:ORG/NAME`, `smollm2`.

Maps engine events to agent events: BlockCommitted -> BlockText (thinking=True inside
<think>...</think>), DenoiseStep -> DenoiseProgress. Repetition control and progressive ending
are on by default (the model card's advice for long agent turns).

Prefix reuse (docs/agent.md, "Prompt prefix"): the ids the model generated for each completion
are kept (kept_ids.py) and spliced back in when that text is in the next prompt, so every step's
prompt starts with the previous step's prompt and answer, token for token, and the engine can
reuse its cache of them. `reset_cache()` forgets both when a conversation ends.
"""
from __future__ import annotations

import threading
from typing import Any, Iterator

from clover_cli.agent.backends.base import BackendError, Completion, ModelBackend, StreamItem
from clover_cli.agent.markup import MarkupSplitter, block_texts
from clover_cli.agent.backends.kept_ids import KeptIds, completion_ids
from clover_cli.agent.events import DenoiseProgress
from clover_cli.agent.encode import encode_conversation


class EngineBackend(ModelBackend):
    """Runs the model in this process through clover_cli.engine."""

    def __init__(self, spec: str, threshold: float | None = None, device: str | None = None,
                 dtype: Any = None, lm: Any = None, repetition_penalty: float = 1.05,
                 progressive_ending: bool = True, temperature: float = 0.0, top_p: float = 1.0,
                 seed: int | None = None, denoise_events: bool = True, cache_mb: float | None = None,
                 diffusion_mode: str | None = None, quantize: str | None = None) -> None:
        super().__init__(threshold)
        from clover_cli.engine.engine import Engine
        from clover_cli.engine.loader import ModelLoadError, load_model

        if lm is None:
            try:
                lm = load_model(spec, device=device, dtype=dtype, quantize=quantize)
            except ModelLoadError as e:
                raise BackendError(str(e)) from None
        from clover_cli.engine.fullattn_decode import mode_label, resolve_mode

        try:  # a mode for a family without modes is one line (engine/fullattn_decode.py)
            self.diffusion_mode = resolve_mode(lm.family.name, diffusion_mode)
        except ValueError as e:
            raise BackendError(str(e)) from None
        self.mode_label = mode_label(lm.family.name, self.diffusion_mode)
        if threshold is None and lm.family.default_threshold is not None:
            self.threshold = lm.family.default_threshold  # none set: the family's own (Fast-dLLM v1)
        self.lm = lm
        self.engine = Engine(lm, cache_mb=cache_mb)  # cache_mb: None the engine's default, 0 no reuse
        self.name = lm.name
        self.is_diffusion = bool(lm.is_diffusion)
        self.block_size = int(lm.block_size)
        self.context_window = int(lm.context_window)
        self.repetition_penalty = repetition_penalty
        from clover_cli.engine.settings import from_options

        # the family's own settings (engine/settings.py): the ones its class has of these
        self.settings = from_options(lm.family.row.settings, {"progressive_ending": progressive_ending,
                                                              "diffusion_mode": self.diffusion_mode})
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self.denoise_events = denoise_events
        self._piece_cache: dict[int, str] = {}
        self._kept = KeptIds()
        family_stops = getattr(getattr(lm, "family", None), "stop_ids", None) or ()
        self._eos = frozenset(int(i) for i in (*(lm.eos_token_ids or ()), *family_stops))

    @property
    def info(self) -> dict[str, Any]:
        """The base info, plus `mode` where the family decodes in a mode of its own (status line):
        full-attention diffusion's cache mode; DiffusionGemma's canvas and sampler, which take no
        threshold; LLaDA2.1's token editing."""
        info = dict(super().info)
        placement = self.lm.placement  # device · dtype · weight format (engine/placement.py)
        info.update(placement=placement.label(), device=placement.device, dtype=placement.dtype,
                    weight_format=placement.weights)
        row = self.lm.family.row  # the family table (engine/families.py)
        if self.mode_label:
            info["mode"] = self.mode_label
        elif row.sampler:  # its own sampler: no threshold, a canvas rather than blocks
            info.update(mode=f"{row.unit} {self.block_size} · {row.sampler}", threshold=None,
                        block_size=None)
        elif row.editor:
            from clover_cli.engine.edit_decode import is_llada21

            if is_llada21(self.lm):
                info["mode"] = "token editing"
        return info

    def prompt_ids(self, messages: list[dict], tools: list[dict]) -> list[int]:
        """The token ids of the rendered conversation, ending with the assistant's turn opening;
        message contents are encoded with special tokens split, earlier answers as the ids the
        model generated for them (clover_cli/agent/encode.py)."""
        return encode_conversation(self.lm, messages, tools, self._kept)[1]

    def reset_cache(self) -> None:
        """A new conversation: drop the engine's kept prompt caches and the kept answer ids."""
        self._kept.clear()
        clear = getattr(self.engine, "clear_cache", None)
        if clear is not None:
            clear()

    def close(self) -> None:
        self.reset_cache()

    def count_tokens(self, messages: list[dict], tools: list[dict]) -> int:
        return len(self.prompt_ids(messages, tools))

    def _piece(self, token_id: int) -> str:
        piece = self._piece_cache.get(token_id)
        if piece is None:
            piece = self._piece_cache[token_id] = self.lm.decode([token_id])
        return piece

    def stream(self, messages: list[dict], tools: list[dict], *, max_new_tokens: int = 2048,
               cancel: threading.Event | None = None) -> Iterator[StreamItem]:
        from clover_cli.engine.config import GenerationConfig
        from clover_cli.engine.events import BlockCommitted, DenoiseStep, GenerationResult
        import torch

        prompt, ids = encode_conversation(self.lm, messages, tools, self._kept)
        room = self.context_window - len(ids)
        if room < 1:
            raise BackendError(f"the prompt ({len(ids)} tokens) does not fit the context window "
                               f"({self.context_window} tokens)")
        cfg = GenerationConfig(max_new_tokens=min(max_new_tokens, room), threshold=self.threshold,
                               temperature=self.temperature, top_p=self.top_p, seed=self.seed,
                               repetition_penalty=self.repetition_penalty, family=self.settings)
        # the template may open the thinking section in the prompt itself
        tail = prompt.rstrip()
        splitter = MarkupSplitter(inside=tail.endswith("<think>"))
        result = None
        last_block = 0
        try:
            for ev in self.engine.stream(ids, cfg, cancel=cancel):
                if isinstance(ev, DenoiseStep):
                    if self.denoise_events and self.is_diffusion:
                        pieces = tuple("" if m else self._piece(t) for t, m in zip(ev.token_ids, ev.masked))
                        yield DenoiseProgress(ev.block_index, ev.step, pieces, tuple(ev.masked))
                elif isinstance(ev, BlockCommitted):
                    last_block = ev.block_index
                    yield from block_texts(splitter, ev.text, ev.block_index)
                elif isinstance(ev, GenerationResult):
                    result = ev
        except (MemoryError, torch.OutOfMemoryError) as exc:  # CUDA / MPS OOM; the CPU's MemoryError
            raise BackendError(self._out_of_memory(len(ids), exc)) from None
        yield from block_texts(splitter, "", last_block, final=True)
        if result is None:
            raise BackendError("the engine ended without a result")
        text, opened = result.text, ""
        if splitter_opened(prompt) and "</think>" in text and "<think>" not in text:
            opened = "<think>"
            text = opened + text
        own = completion_ids(self.lm.tokenizer, result.token_ids, text, opened, self._eos)
        if own is not None:
            self._kept.put(text, own)
        yield Completion(text, result.finish_reason, stats=result.stats.as_dict())


    def _out_of_memory(self, prompt_tokens: int, exc: BaseException) -> str:
        """Free what the engine kept, halve its cache budget, and say so in one line: the turn
        ends, the session and its history stay (docs/engine.md, "Placement")."""
        cache = self.engine.prefix_cache
        cache.clear()
        cache.budget //= 2
        self._kept.clear()
        import gc

        gc.collect()
        placement = self.lm.placement
        if placement.kind == "cuda":
            import torch

            torch.cuda.empty_cache()
        return (f"out of memory on {placement.device} ({placement.device_name}) while answering a "
                f"{prompt_tokens}-token prompt; the prefix cache now keeps at most "
                f"{cache.budget >> 20} MiB. Shorten the conversation (/compact or /clear), or load the "
                "model on another device or in a smaller dtype (--device, --dtype)")


def splitter_opened(prompt: str) -> bool:
    """True when the chat template left a <think> section open at the end of the prompt."""
    return prompt.rstrip().endswith("<think>")
