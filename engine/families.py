"""Checkpoint families (docs/engine.md, families table; docs/design.md, "The family table").

`detect_family` reads a config into a `Family`: diffusion or autoregressive, which mask id and
block size, whether logits are shifted by one (position i-1 predicts token i, Fast-dLLM v2 /
Dream). The family table below (`ROWS`) says everything else the code asks of a family: its
decoder, its load hook, the generation options it takes and its own settings class
(engine/settings.py), its labels and its tool-call markup.
This module is the only place a family's name is compared (tests/engine/test_family_table.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .settings import (ALL_NAMES, ARSettings, BlockSettings, EditSettings, LladaSettings, ModeSettings, Settings,
                       asks_nothing, for_family)


class FamilyError(ValueError):
    """The config does not describe a checkpoint we can run; message is one line."""


@dataclass(frozen=True)
class Family:
    name: str  # "clover" | "sdar" | "fast_dllm_v2" | "llada2" | "dream" | "llada" | "hybrid" |
    #   "diffusion_gemma" | "ar"
    is_diffusion: bool
    hf_model_type: str  # the transformers model_type the weights load as
    mask_token_id: int | None = None
    block_size: int = 1
    shifted_logits: bool = False  # True: logits at i-1 predict token i
    recurrent: bool = False  # GDN layers carry history as recurrent state
    # what the family's own reference generate does (docs/engine.md, "Families"):
    first_token_rule: bool = False  # a block's first token is the previous position's argmax,
    #   committed before any denoise step (Fast-dLLM v2)
    sub_block: int | None = None  # positions decoded in order inside a block (Fast-dLLM v2: 8)
    stop_ids: tuple[int, ...] | None = None  # the reference's own stop tokens (None: the
    #   checkpoint's EOS ids)
    default_threshold: float | None = None  # the family's own commit threshold, used when the
    #   user sets none (Fast-dLLM v1's 0.9 for Dream / LLaDA 1.x); None: DEFAULT_THRESHOLD
    mask_in_softmax: bool = False  # confidence = softmax over every logit, mask token's included
    #   (the mask is still never a prediction); False: its logit is dropped first (ours)
    steps: int | None = None  # the reference's denoise steps per block (LLaDA2: 32, capped at the
    #   budget): step i commits at least its share of the block (engine/transfer_schedule.py)

    @property
    def row(self) -> FamilyRow:
        """This family's row of the family table (ROWS below)."""
        return FAMILIES[self.name]


# model types transformers can run autoregressively here (checked at load time too)
AR_MODEL_TYPES = {"llama", "qwen2", "qwen3", "mistral", "gemma", "gemma2", "phi3", "qwen3_moe",
                  "qwen2_moe", "olmo", "olmo2", "granite", "smollm3", "gpt2", "gpt_neox"}
HYBRID_MODEL_TYPES = {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"}
FAST_DLLM_MASK_ID = 151665
FAST_DLLM_STOP_TOKEN = 151645  # <|im_end|>: the reference generate's stop_token default
FAST_DLLM_SUB_BLOCK = 8  # the reference's small_block_size default
DREAM_TYPES = {"dream", "Dream"}
LLADA1_TYPES = {"llada", "LLaDA"}  # LLaDA 1.x / 1.5 (LLaDAModelLM)
DREAM_MASK_ID = 151666
LLADA1_MASK_ID = 126336


def detect_family(config: dict[str, Any], *, block_size: int | None = None) -> Family:
    """Pick the family from a raw config.json dict; raises FamilyError with a one-line reason."""
    model_type = str(config.get("model_type", "")).strip()
    if not model_type:
        raise FamilyError("config.json has no model_type")
    mask_id = config.get("mask_token_id")
    cfg_block = config.get("block_size", config.get("bd_size"))

    def _block(default: int | None) -> int:
        value = block_size or cfg_block or default
        if value is None:
            raise FamilyError(f"{model_type} checkpoint has no block_size; pass --block-size")
        if not isinstance(value, int) or not 1 <= value <= 1024:
            raise FamilyError(f"bad block_size {value!r} in config")
        return value

    if model_type == "diffusion_gemma":  # encoder + denoising decoder (engine/gemma_decode.py)
        canvas = config.get("canvas_length", 256)
        if not isinstance(canvas, int) or not 1 <= canvas <= 4096:
            raise FamilyError(f"bad canvas_length {canvas!r} in config")
        return Family("diffusion_gemma", True, "diffusion_gemma", None, canvas)
    if model_type in DREAM_TYPES or model_type in LLADA1_TYPES:
        # full-attention diffusion (engine/fullattn_decode.py): no block structure of their own;
        # block_size is the Fast-dLLM v1 cached modes' block (32)
        dream = model_type in DREAM_TYPES
        mask = mask_id if mask_id is not None else (DREAM_MASK_ID if dream else LLADA1_MASK_ID)
        return Family("dream" if dream else "llada", True, model_type.lower(), int(mask),
                      _block(32), shifted_logits=dream, default_threshold=0.9)
    if model_type == "Fast_dLLM_Qwen" or model_type.lower() == "fast_dllm_qwen":
        mask = mask_id if mask_id is not None else FAST_DLLM_MASK_ID
        # the reference stops at its own stop token only (never generation_config's extra EOS
        # ids); the released config's eos_token_id is that token (151645)
        eos = config.get("eos_token_id")
        stop = eos if isinstance(eos, int) else FAST_DLLM_STOP_TOKEN
        return Family("fast_dllm_v2", True, "qwen2", int(mask), _block(32), shifted_logits=True,
                      first_token_rule=True, sub_block=FAST_DLLM_SUB_BLOCK, stop_ids=(int(stop),),
                      mask_in_softmax=True)
    if model_type == "sdar":
        if mask_id is None:
            raise FamilyError("sdar checkpoint has no mask_token_id in config.json")
        return Family("sdar", True, "qwen3", int(mask_id), _block(4), mask_in_softmax=True)
    if model_type == "llada2_moe":
        # engine/models/llada2.py; the reference generate's defaults: mask 156895, eos 156892
        eos = config.get("eos_token_id")
        return Family("llada2", True, "llada2_moe", int(mask_id if mask_id is not None else 156895),
                      _block(32), stop_ids=(int(eos) if isinstance(eos, int) else 156892,),
                      mask_in_softmax=True, steps=32)
    if model_type in HYBRID_MODEL_TYPES:
        if mask_id is None:
            if cfg_block is not None:
                raise FamilyError(f"{model_type} config has block_size but no mask_token_id")
            # a released (autoregressive) Qwen3.5 / Qwen3-Next: greedy decoding on the AR path
            return Family("ar", False, model_type, recurrent=True)
        return Family("hybrid", True, model_type, int(mask_id), _block(32), recurrent=True)
    if mask_id is not None or cfg_block is not None:
        if mask_id is None:
            raise FamilyError(f"{model_type} config has block_size but no mask_token_id")
        if model_type not in {"qwen3", "qwen2", "llama"}:
            raise FamilyError(f"unknown block-diffusion architecture {model_type!r}")
        return Family("clover", True, model_type, int(mask_id), _block(32))
    if model_type in AR_MODEL_TYPES:
        return Family("ar", False, model_type)
    raise FamilyError(f"unknown architecture {model_type!r} (supported: block-diffusion Qwen3/SDAR, "
                      "Fast-dLLM v2, DiffusionGemma, Qwen3.5/Qwen3-Next hybrids, AR Llama/Qwen2/Qwen3 and similar)")


# ---- the family table (docs/design.md, "The family table") ----

# the GenerationConfig options a family may take, by name (`clover generate`'s flags are named the
# same); the universal ones (budget, seed, stop strings) are not listed. The rest of a family's
# options are its settings class's fields (engine/settings.py).
BLOCK_COMMON = frozenset({"threshold", "temperature", "top_p", "block_size", "repetition_penalty", "token_healing"})
FULLATTN_COMMON = frozenset({"threshold", "temperature", "top_p", "block_size"})
# AR decoding takes its sampler's options; the threshold holds trivially at one token per forward
# (a block of one), as do sub-blocks and EOS confinement (settings.asks_nothing at block 1)
AR_COMMON = frozenset({"threshold", "temperature", "top_p", "repetition_penalty", "token_healing"})
OPTIONS = BLOCK_COMMON | FULLATTN_COMMON | AR_COMMON | ALL_NAMES
# the markup a family's chat template teaches for a tool call (clover_cli/agent/parsing.py reads both)
TOOL_CALL_MARKUP = {"hermes": ("<tool_call>", "</tool_call>"), "gemma": ("<|tool_call>", "<tool_call|>")}


@dataclass(frozen=True)
class FamilyRow:
    """One row of the family table: what the rest of the code asks of a family, by lookup."""

    name: str  # Family.name
    label: str  # what `clover generate` and the status line call it (`describe`)
    short: str  # the family column of `clover models`
    decoder: str  # "module:Class" under engine/: the decoder a request runs (imported on use)
    network: str  # load hook (engine/loader.py): "auto" (our Qwen module where it runs the
    #   checkpoint and native modules are on, else transformers'), "own:qwen" / "own:llada1" /
    #   "own:llada2" (our engine/models/ module, always) or "gemma" (engine/gemma_load.py)
    common: frozenset[str]  # the GenerationConfig options (above) its decode takes
    settings: type[Settings] = Settings  # its own settings class (engine/settings.py)
    tool_calls: str = "hermes"  # its tool-call markup (TOOL_CALL_MARKUP)
    editor: str | None = None  # "module:Class": the decoder when token editing is on (LLaDA2.1)
    unit: str = "block"  # what its unit of decoding is called
    sampler: str | None = None  # its own sampler, which takes no threshold; None: the threshold
    #   rule (or AR's)
    sampler_note: str = ""  # why the options it does not take do not apply (the error's tail)
    modes: bool = False  # decodes in the full-attention modes exact / prefix / dual
    own_attention: bool = False  # keeps its network's attention (no block-causal kernels)
    prompt_reuse: bool = True  # token healing and the prefix cache on its prompt path
    fuse_in_half: bool = True  # in bfloat16 / float16 the commit's forward may run the next
    #   block's first step too; False: its released generate runs them as two forwards, and in
    #   half precision the fused one rounds differently (SDAR; docs/engine.md, "In bfloat16")
    confidence_dtype: str = "float32"  # the dtype its reference takes the confidence's softmax in
    #   (greedy): "logits" (the network's output dtype, bfloat16 on a GPU; the token is then the
    #   argmax of those probabilities), "float32" or "float64"; a float64 model keeps float64
    #   (docs/engine.md, "In bfloat16")

    def decoder_class(self, *, editing: bool = False) -> type:
        """The decoder class (the editor when `editing`), imported from engine/."""
        import importlib

        module, _, cls = (self.editor if editing and self.editor else self.decoder).partition(":")
        return getattr(importlib.import_module(f"{__package__}.{module}"), cls)

    @property
    def call_markup(self) -> tuple[str, str]:
        """The opening and closing text of one tool call in this family's markup."""
        return TOOL_CALL_MARKUP[self.tool_calls]

    @property
    def options(self) -> frozenset[str]:
        """Every option its decode takes: the common ones and its settings' fields."""
        return self.common | self.settings.names()

    def settings_for(self, given: Settings | None, block: int) -> Settings:
        """`given` as this family's settings class (settings.for_family): SettingsError, one
        line, for a field it does not take set to anything its decode lacks."""
        return for_family(self.settings, given, block=block, family=self.short, takers=takers)

    def refused(self, given: dict[str, Any], block: int) -> list[str]:
        """The options in `given` (name -> value) this family cannot honour: ones it does not
        take, set to anything but the state it already has (`asks_nothing`)."""
        return [o for o, v in given.items() if o not in self.options and not asks_nothing(o, v, block)]


_GEMMA_NOTE = ("it samples with its entropy-bound sampler, set by the checkpoint's "
               "generation_config.json")
_BLOCK, _AR = "block_decode:BlockDecoder", "ar_decode:ARDecoder"
_FULLATTN, _GEMMA = "fullattn_decode:FullAttnDecoder", "gemma_decode:GemmaDecoder"
ROWS = (
    FamilyRow("clover", "Clover block diffusion", "Clover", _BLOCK, "auto", BLOCK_COMMON, BlockSettings),
    FamilyRow("sdar", "SDAR block diffusion", "SDAR", _BLOCK, "auto", BLOCK_COMMON, BlockSettings,
              confidence_dtype="logits", fuse_in_half=False),
    FamilyRow("fast_dllm_v2", "Fast-dLLM v2 block diffusion", "Fast-dLLM v2", _BLOCK, "auto", BLOCK_COMMON,
              BlockSettings, confidence_dtype="logits"),
    FamilyRow("llada2", "LLaDA2 block diffusion (MoE)", "LLaDA2", _BLOCK, "own:llada2", BLOCK_COMMON,
              EditSettings, editor="edit_decode:EditDecoder"),
    FamilyRow("hybrid", "Gated DeltaNet hybrid block diffusion", "GDN hybrid", _BLOCK, "auto", BLOCK_COMMON,
              BlockSettings),
    FamilyRow("dream", "Dream full-attention diffusion", "Dream", _FULLATTN, "own:qwen", FULLATTN_COMMON,
              ModeSettings, modes=True, own_attention=True, prompt_reuse=False, confidence_dtype="logits"),
    FamilyRow("llada", "LLaDA 1.x full-attention diffusion", "LLaDA 1.x", _FULLATTN, "own:llada1",
              FULLATTN_COMMON, LladaSettings, modes=True, own_attention=True, prompt_reuse=False,
              confidence_dtype="logits"),  # exact; the Fast-dLLM v1 modes: float64 (fullattn_decode.py)
    FamilyRow("diffusion_gemma", "DiffusionGemma canvas diffusion", "DiffusionGemma", _GEMMA, "gemma",
              frozenset(), tool_calls="gemma", unit="canvas", sampler="entropy-bound",
              sampler_note=_GEMMA_NOTE, own_attention=True, prompt_reuse=False),
    FamilyRow("ar", "autoregressive", "AR", _AR, "auto", AR_COMMON, ARSettings),
)
FAMILIES = {row.name: row for row in ROWS}


def takers(option: str) -> str:
    """The families whose decode takes `option`, e.g. `Dream and LLaDA 1.x`."""
    names = [row.short for row in ROWS if option in row.options]
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names) or "no"


def settled(lm, cfg: Any) -> Any:
    """`cfg` (a GenerationConfig) with its `family` settings as the class of `lm`'s family (the
    defaults where it has none): what every decoder reads. SettingsError (one line) for a
    setting the family does not take (settings.for_family)."""
    import dataclasses

    row = lm.family.row
    settings = row.settings_for(cfg.family, int(cfg.block_size or lm.block_size or 1))
    return cfg if settings is cfg.family else dataclasses.replace(cfg, family=settings)


def with_modes() -> tuple[str, ...]:
    """The families that decode in the full-attention modes (engine/fullattn_parts.py)."""
    return tuple(row.name for row in ROWS if row.modes)


def short_name(name: str, *, recurrent: bool = False) -> str:
    """The family column of `clover models` (a Gated DeltaNet AR release: `GDN hybrid (AR)`)."""
    row = FAMILIES[name]
    return f"GDN hybrid ({row.short})" if recurrent and row.decoder == _AR else row.short


def describe(family: Family) -> str:
    """One line naming the detected family for the user, e.g. `SDAR block diffusion (sdar, block 4)`."""
    row = family.row
    if not family.is_diffusion:
        kind = "Gated DeltaNet hybrid, " if family.recurrent else ""
        return f"{row.label} ({kind}{family.hf_model_type})"
    return f"{row.label} ({family.hf_model_type}, {row.unit} {family.block_size})"
