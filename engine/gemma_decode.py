"""DiffusionGemma decoding: canvases denoised from uniform noise (docs/engine.md, "DiffusionGemma").

The network is transformers' own `DiffusionGemmaForBlockDiffusion` (no checkpoint code); the
sampling loop is ours, written from reading transformers' `generation_diffusion_gemma.py` and the
entropy-bounded sampler of Ben-Hamu et al. 2025 ("Accelerated Sampling from Masked Diffusion Models
via Entropy Bounded Unmasking", arXiv:2505.24857). Per canvas of `canvas_length` positions:

1. the causal encoder writes the keys/values of the tokens not yet cached (the prompt, then each
   finished canvas) into the cache; the decoder only reads it;
2. the canvas starts as uniform random ids; each denoising step n = N..1 runs the bidirectional
   decoder on it (with the previous step's logits as self-conditioning), divides the logits by
   the temperature t_min + (t_max - t_min) * n / N, samples a token at every position, accepts the
   lowest-entropy positions whose summed entropy minus their largest stays within the entropy
   bound, and puts fresh uniform noise at every other position;
3. the canvas is done after N steps, or earlier when the argmax canvas has been the same for
   `stability_threshold` steps and the mean entropy is below `confidence_threshold`; the argmax
   canvas of the last step is the canvas's output.

Generation stops after the first canvas holding an EOS (the output is cut after it) or after
ceil(max_new_tokens / canvas_length) canvases: whole canvases, as the reference returns them.

Exactness: random numbers are drawn from torch's global generator in the reference's order (one
randint per canvas, then per step one multinomial and one randint, same shapes), and the float
arithmetic follows it, so with the same seed the ids equal `model.generate(input_ids)`'s.
"""
from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch

from .config import GenerationConfig
from .decode_loop import DecodeLoop, PrefillInfo, Unit
from .events import DenoiseStep
from .runtime import ForwardRunner, TextStreamer, hidden_token_ids

# transformers' DiffusionGemmaGenerationConfig defaults, used where generation_config.json is silent
DEFAULTS = {"max_new_tokens": 256, "max_denoising_steps": 48, "entropy_bound": 0.1, "t_min": 0.4,
            "t_max": 0.8, "stability_threshold": 1, "confidence_threshold": 0.005}


class GemmaSettingsError(ValueError):
    """generation_config.json holds a value the sampler cannot use; message is one line."""


@dataclass(frozen=True)
class GemmaSettings:
    """The sampler's settings, read from the checkpoint's generation_config.json."""

    max_new_tokens: int = DEFAULTS["max_new_tokens"]
    max_denoising_steps: int = DEFAULTS["max_denoising_steps"]
    entropy_bound: float = DEFAULTS["entropy_bound"]
    t_min: float | None = DEFAULTS["t_min"]  # None (with t_max): no temperature schedule
    t_max: float | None = DEFAULTS["t_max"]
    stability_threshold: int | None = DEFAULTS["stability_threshold"]  # None: no adaptive stop
    confidence_threshold: float | None = DEFAULTS["confidence_threshold"]
    eos_token_ids: tuple[int, ...] | None = None  # None: generation_config.json names none

    def __post_init__(self) -> None:
        if not isinstance(self.max_denoising_steps, int) or self.max_denoising_steps < 1:
            raise GemmaSettingsError(f"max_denoising_steps must be a positive integer, got {self.max_denoising_steps!r}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise GemmaSettingsError(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        if not isinstance(self.entropy_bound, (int, float)) or self.entropy_bound <= 0:
            raise GemmaSettingsError(f"sampler_config.entropy_bound must be > 0, got {self.entropy_bound!r}")
        if self.t_min is not None and self.t_max is not None and not 0 <= self.t_min < self.t_max:
            raise GemmaSettingsError(f"need 0 <= t_min < t_max, got t_min={self.t_min}, t_max={self.t_max}")
        if self.stability_threshold is not None and (not isinstance(self.stability_threshold, int)
                                                     or self.stability_threshold < 0):
            raise GemmaSettingsError(f"stability_threshold must be an integer >= 0, got {self.stability_threshold!r}")
        if self.confidence_threshold is not None and self.confidence_threshold <= 0:
            raise GemmaSettingsError(f"confidence_threshold must be > 0, got {self.confidence_threshold!r}")

    @property
    def adaptive_stop(self) -> bool:
        return self.stability_threshold is not None and self.confidence_threshold is not None

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "GemmaSettings":
        """From a generation_config.json dict; a key it lacks takes the reference's default."""
        def pick(key: str) -> Any:
            value = raw.get(key)
            return DEFAULTS[key] if value is None else value

        sampler = raw.get("sampler_config")
        bound = sampler.get("entropy_bound") if isinstance(sampler, dict) else None
        eos = raw.get("eos_token_id")
        eos_ids = (eos,) if isinstance(eos, int) else tuple(eos) if isinstance(eos, list) else None
        # a schedule exists only when both ends are set (the reference's rule): the defaults fill
        # both ends, so a file that sets neither still gets the default schedule
        return cls(max_new_tokens=pick("max_new_tokens"), max_denoising_steps=pick("max_denoising_steps"),
                   entropy_bound=DEFAULTS["entropy_bound"] if bound is None else bound,
                   t_min=pick("t_min"), t_max=pick("t_max"),
                   stability_threshold=pick("stability_threshold"),
                   confidence_threshold=pick("confidence_threshold"), eos_token_ids=eos_ids)

    @classmethod
    def from_dir(cls, directory: Path) -> "GemmaSettings":
        path = Path(directory) / "generation_config.json"
        if not path.is_file():
            return cls()
        try:
            raw = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise GemmaSettingsError(f"{path.name}: not valid JSON ({exc.__class__.__name__})") from None
        if not isinstance(raw, dict):
            raise GemmaSettingsError(f"{path.name}: not a JSON object")
        return cls.from_dict(raw)


def settings_of(lm) -> GemmaSettings:
    return lm.extra.get("gemma_settings") or GemmaSettings()


class GemmaDecoder:
    """One DiffusionGemma generation (batch of one). Iterate `run()` for events."""

    def __init__(self, lm, prompt_ids: list[int], cfg: GenerationConfig,
                 cancel: threading.Event | None = None):
        """cfg.max_new_tokens is the budget: the output is the whole canvases that cover it, cut
        after the first EOS; cfg.seed seeds torch's global generator; cfg.stop is honoured; the
        threshold-rule settings do not apply."""
        if not prompt_ids:
            raise ValueError("empty prompt: DiffusionGemma needs at least one prompt token")
        self.lm, self.cfg, self.cancel = lm, cfg, cancel
        self.prompt = list(prompt_ids)
        self.settings = settings_of(lm)
        self.model = lm.model
        self.config = lm.model.config
        self.L = int(self.config.canvas_length)
        self.vocab = int(self.config.text_config.vocab_size)
        eos = self.settings.eos_token_ids
        self.eos = tuple(eos) if eos is not None else tuple(lm.eos_token_ids)
        self.budget = cfg.max_new_tokens
        self.device = lm.device
        self.streamer = TextStreamer(lm.tokenizer, hidden_token_ids(lm.tokenizer, self.eos, None))
        self.runner = ForwardRunner(lm.model)  # times the decoder forwards (the network is called here)
        self.info = PrefillInfo(prefilled=len(self.prompt))

    # -- one canvas ----------------------------------------------------------------------------

    def _temperature(self, step: int) -> torch.Tensor | None:
        """t_min + (t_max - t_min) * step / N as a float32 scalar tensor, computed as the
        reference does (an int32 step tensor), so the scaled logits match it bit for bit."""
        s = self.settings
        if s.t_min is None or s.t_max is None:
            return None
        n = torch.tensor(step, device=self.device, dtype=torch.int32)
        return s.t_min + ((s.t_max - s.t_min) * (n / s.max_denoising_steps))

    def _accept(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(accepted mask [1, L], entropy [1, L]): the lowest-entropy positions whose entropy sum
        minus its largest term is within the bound (Ben-Hamu et al. 2025)."""
        entropy = torch.distributions.Categorical(logits=logits).entropy()  # [1, L]
        ordered, order = torch.sort(entropy, dim=-1, descending=False)
        keep = torch.cumsum(ordered, dim=-1) - ordered <= self.settings.entropy_bound  # [1, L]
        accepted = torch.scatter(torch.zeros_like(keep), -1, order, keep)
        return accepted, entropy

    def _decoder(self, canvas, self_cond, masks, cache, positions) -> torch.Tensor:
        t = time.perf_counter()
        out = self.model(decoder_input_ids=canvas, self_conditioning_logits=self_cond,
                         decoder_attention_mask=masks, cache=cache, decoder_position_ids=positions)
        self.runner.done(t, out.logits)
        return out.logits  # [1, L, V] float32, soft-capped

    # -- the generation ------------------------------------------------------------------------

    def run(self) -> Iterator:
        loop = DecodeLoop(prompt=self.prompt, cfg=self.cfg, eos=self.eos, streamer=self.streamer,
                          runner=self.runner, cancel=self.cancel, prefill=self.info)
        with torch.no_grad():
            yield from loop.run(self._canvases())

    def _canvases(self) -> Iterator:
        """Canvas after canvas: the encoder caches what the decoder has not seen, the canvas is
        denoised (DenoiseStep events), its argmax is a Unit (cut after its first EOS)."""
        from transformers import DynamicCache  # the network's own cache class

        L, V = self.L, self.vocab
        if self.cfg.seed is not None:
            torch.manual_seed(self.cfg.seed)  # the global generator: the reference draws from it
        dev = self.device
        encoder, decoder = self.model.model.encoder, self.model.model.decoder
        cache = DynamicCache(config=self.config.get_text_config(decoder=True))
        pending = torch.tensor([self.prompt], dtype=torch.long, device=dev)  # [1, P]: not cached yet
        cur = len(self.prompt)
        enc_pos = torch.arange(0, cur, dtype=torch.int32, device=dev)[None]
        dec_pos = torch.arange(cur, cur + L, dtype=torch.int32, device=dev)[None]  # [1, L]
        seen = torch.ones((1, cur), dtype=torch.bool, device=dev)  # 2-D mask of cached positions
        dec_seen = torch.nn.functional.pad(seen, (0, L), value=True)
        for index in range(math.ceil(self.budget / L)):
            # 1. the encoder caches what the decoder has not seen (the prompt, then the last canvas)
            t = time.perf_counter()
            dummy = torch.empty((1, pending.shape[1], 0), dtype=self.model.dtype, device=dev)
            enc_masks = encoder.create_masks_for_generate(config=self.config, inputs_embeds=dummy,
                                                          attention_mask=seen, cache=cache,
                                                          position_ids=enc_pos)
            encoder(input_ids=pending, attention_mask=enc_masks, cache=cache, position_ids=enc_pos)
            if index == 0:
                self.info.seconds = time.perf_counter() - t
            # 2. the canvas: uniform noise, denoised step N..1
            canvas = torch.randint(low=0, high=V, size=(1, L), device=dev)  # [1, L]
            masks = decoder.create_diffusion_decoder_attention_mask(
                config=self.config, inputs_embeds=canvas.unsqueeze(-1), cache=cache,
                decoder_attention_mask=dec_seen)
            argmax = yield from self._denoise(index, canvas, masks, cache, dec_pos)
            # 3. the argmax canvas is the output; the next canvas's encoder pass caches it
            new = argmax[0].tolist()
            eos_at = next((i for i, tok in enumerate(new) if tok in self.eos), -1)
            yield Unit(tuple(new[:eos_at + 1] if eos_at >= 0 else new), eos=eos_at >= 0)
            pending = argmax
            cur += L
            seen = torch.nn.functional.pad(seen, (0, L), value=True)
            dec_seen = torch.nn.functional.pad(dec_seen, (0, L), value=True)
            enc_pos, dec_pos = dec_pos, torch.arange(cur, cur + L, dtype=torch.int32, device=dev)[None]

    def _denoise(self, index: int, canvas, masks, cache, dec_pos):
        """One canvas's denoise steps, N..1 (yields a DenoiseStep each); returns the argmax
        canvas. Each step samples every position, keeps the accepted ones and redraws the rest
        as noise, in the reference's draw order."""
        s, L, V, dev = self.settings, self.L, self.vocab, self.device
        embed_dtype = self.model.model.decoder.embed_tokens.weight.dtype
        argmax, self_cond, history = canvas, None, None
        steps = 0
        for step in range(s.max_denoising_steps, 0, -1):
            logits = self._decoder(canvas, self_cond, masks, cache, dec_pos)  # [1, L, V]
            temp = self._temperature(step)
            if temp is not None:
                logits = logits / temp
            probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
            sampled = torch.multinomial(probs.view(-1, V), num_samples=1).view(1, L)
            argmax = torch.argmax(logits, dim=-1)  # [1, L]: the canvas's draft
            accepted, entropy = self._accept(logits)
            kept = torch.where(accepted, sampled, canvas)
            noise = torch.randint(low=0, high=V, size=(1, L), device=dev)
            canvas = torch.where(~accepted, noise, kept)
            done = False
            if s.adaptive_stop:
                stable = True
                if s.stability_threshold:
                    if history is None:
                        history = [None] * s.stability_threshold
                    stable = all(h is not None and torch.equal(h, argmax) for h in history)
                    history = history[1:] + [argmax]
                done = stable and bool(entropy.mean(dim=-1)[0] < s.confidence_threshold)
            self_cond = logits.to(embed_dtype)
            steps += 1
            yield DenoiseStep(index, steps, tuple(argmax[0].tolist()), tuple((~accepted[0]).tolist()),
                              int(accepted.sum()))
            if done:
                break
        return argmax
