"""The public checkpoints of the families Clover runs, with their sizes (docs/engine.md,
"Checkpoints users run"; `clover models` shows them). Nothing here touches the network.

Every figure carries its source. `params` is the number of floating-point weights (what
engine/fit.py's `weight_size` sums from the safetensors headers and re-casts to the compute dtype);
`fixed_bytes` is what is stored in another type (none of these releases has any). `params_from`:

- "index": `metadata.total_size` of the release's `model.safetensors.index.json` (bytes of bfloat16
  weights) / 2, read from a public copy of that file (named in `source`);
- "config": computed exactly from the released `config.json` (named in `source`) — the Qwen2/Qwen3
  and LLaDA formulas in `dense_params` (they reproduce every "index" figure above to the unit), or,
  for the mixture-of-experts models, the element count of the network built from that config on
  torch's meta device (`scripts/catalog_counts.py` recomputes them);
- None: neither the index nor the config was reachable; the size is unknown and shown as "?".

The config fields are those engine/fit.py's `engine_bytes` uses (layers, KV heads, head_dim,
vocabulary, context length, how many layers keep a KV cache).
"""
from __future__ import annotations

from dataclasses import dataclass, field

# public copies of the released files (each a GitHub repository and path)
_DARE = "github.com/hxhcreate/DARE models/"
_SDAR = "github.com/JetAstra/SDAR training/model/"
_FDLLM7 = "github.com/Satgoy152/DualDiffusion FastDLLM_inferencing/Fast_dLLM_v2_7B/"
_CONFORMANCE = "tests/engine/conformance/configs/"


@dataclass(frozen=True)
class Checkpoint:
    """One public checkpoint and the figures `clover models` needs."""

    repo: str  # ORG/NAME on the Hub
    family: str  # engine/families.py Family.name
    params: int | None
    params_from: str | None  # "index" | "config" | None
    source: str  # where params and the config fields come from
    config: dict = field(default_factory=dict)  # released config.json fields (sizes only)
    attention_layers: int | None = None  # layers with a KV cache (the rest: Gated DeltaNet state)
    note: str = ""
    fixed_bytes: int = 0

    @property
    def spec(self) -> str:
        return f"hf:{self.repo}"

    @property
    def family_name(self) -> str:
        """The family column of `clover models` (engine/families.py's table)."""
        from .families import short_name

        return short_name(self.family, recurrent=self.attention_layers is not None)

    def bytes_in(self, width: float) -> int | None:
        """Weight bytes at `width` bytes per floating parameter (None when params are unknown)."""
        return None if self.params is None else int(self.params * width) + self.fixed_bytes

    def engine_config(self) -> dict:
        """The config keys engine/fit.py's `engine_bytes` reads, in the names it reads them."""
        c = self.config
        layers = c.get("num_hidden_layers", c.get("n_layers"))
        raw = {"num_hidden_layers": layers,
               "num_attention_heads": c.get("num_attention_heads", c.get("n_heads")),
               "num_key_value_heads": c.get("num_key_value_heads", c.get("n_kv_heads")),
               "head_dim": c.get("head_dim"), "hidden_size": c.get("hidden_size", c.get("d_model")),
               "vocab_size": c.get("vocab_size"),
               "max_position_embeddings": c.get("max_position_embeddings", c.get("max_sequence_length"))}
        if self.attention_layers is not None and layers:
            raw["layer_types"] = (["full_attention"] * self.attention_layers
                                  + ["linear_attention"] * (layers - self.attention_layers))
        return {k: v for k, v in raw.items() if v is not None}


def dense_params(c: dict) -> int:
    """Parameters of a dense Qwen2/Qwen3-shaped (SDAR, Fast-dLLM v2, Dream) or LLaDA 1.x config:
    embeddings (+ an untied head), per layer q/k/v/o (+ Qwen2's q/k/v biases or Qwen3's q/k norms),
    a gated MLP and two norms, and the final norm."""
    if "d_model" in c:  # LLaDA 1.x names: wte, ff_out, q/k/v/attn_out, ff_proj/up_proj/ff_out, 2 norms
        d, inner, kv = c["d_model"], c["mlp_hidden_size"], c["n_kv_heads"] * (c["d_model"] // c["n_heads"])
        per = 2 * d * d + 2 * d * kv + 3 * d * inner + 2 * d
        return c["vocab_size"] * d * (1 if c.get("weight_tying") else 2) + c["n_layers"] * per + d
    h, hd = c["hidden_size"], c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    per = h * q + 2 * h * kv + q * h + 3 * h * c["intermediate_size"] + 2 * h
    per += (q + 2 * kv) if c.get("qkv_bias") else 0
    per += 2 * hd if c.get("qk_norm") else 0
    return c["vocab_size"] * h * (1 if c.get("tie_word_embeddings") else 2) + c["num_hidden_layers"] * per + h


def _sdar(h, layers, heads, inter):
    return {"vocab_size": 151936, "hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": inter,
            "max_position_embeddings": 32768, "tie_word_embeddings": False, "qk_norm": True}


_QWEN25_7B = {"vocab_size": 152064, "hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
              "num_key_value_heads": 4, "intermediate_size": 18944, "tie_word_embeddings": False,
              "qkv_bias": True}

CATALOG: tuple[Checkpoint, ...] = (
    Checkpoint("JetLM/SDAR-1.7B-Chat", "sdar", 2_031_739_904, "config",
               f"config.json: {_DARE}SDAR-1dot7B-Chat/config.json (= {_CONFORMANCE}sdar_1.7b_chat.json)",
               _sdar(2048, 28, 16, 6144), note="smallest block-diffusion chat model; block 4"),
    Checkpoint("JetLM/SDAR-4B-Chat", "sdar", 4_411_424_256, "index",
               f"index total_size 8822848512: {_SDAR}SDAR-4B-Chat/model.safetensors.index.json (config beside it)",
               _sdar(2560, 36, 32, 9728), note="block 4"),
    Checkpoint("JetLM/SDAR-8B-Chat", "sdar", 8_190_735_360, "index",
               f"index total_size 16381470720: {_SDAR}SDAR-8B-Chat/model.safetensors.index.json (config beside it)",
               _sdar(4096, 36, 32, 12288), note="block 4"),
    Checkpoint("Efficient-Large-Model/Fast_dLLM_v2_1.5B", "fast_dllm_v2", 1_543_714_304, "config",
               f"config: {_CONFORMANCE}fast_dllm_v2_1.5b.reconstructed.json (its released config.json was not "
               "reachable; the base Qwen2.5-1.5B-Instruct's shape, tied embeddings)",
               {"vocab_size": 151936, "hidden_size": 1536, "num_hidden_layers": 28, "num_attention_heads": 12,
                "num_key_value_heads": 2, "intermediate_size": 8960, "max_position_embeddings": 32768,
                "tie_word_embeddings": True, "qkv_bias": True},
               note="block 32, sub-blocks of 8; size assumes the base model's shape"),
    Checkpoint("Efficient-Large-Model/Fast_dLLM_v2_7B", "fast_dllm_v2", 7_615_616_512, "index",
               f"index total_size 15231233024: {_FDLLM7}model.safetensors.index.json (config beside it)",
               {**_QWEN25_7B, "max_position_embeddings": 32768}, note="block 32, sub-blocks of 8"),
    Checkpoint("inclusionAI/LLaDA2.0-mini", "llada2", 16_255_643_392, "config",
               f"config: {_CONFORMANCE}llada2_mini.reconstructed.json (the release's keys as quoted in public "
               "code); count: engine/models/llada2.py built on the meta device",
               {"vocab_size": 157184, "hidden_size": 2048, "num_hidden_layers": 20, "num_attention_heads": 16,
                "num_key_value_heads": 4, "head_dim": 128, "max_position_embeddings": 32768},
               note="MoE, 256 experts, 8 per token; block 32"),
    Checkpoint("inclusionAI/LLaDA2.1-mini", "llada2", 16_255_643_392, "config",
               "LLaDA2.0-mini's network and configuration class (its released modeling code); same count",
               {"vocab_size": 157184, "hidden_size": 2048, "num_hidden_layers": 20, "num_attention_heads": 16,
                "num_key_value_heads": 4, "head_dim": 128, "max_position_embeddings": 32768},
               note="LLaDA2.0-mini with token editing (--edit)"),
    Checkpoint("Dream-org/Dream-v0-Instruct-7B", "dream", 7_615_616_512, "index",
               f"index total_size 15231233024: {_DARE}Dream-v0-Instruct-7B/model.safetensors.index.json "
               "(config beside it)",
               {**_QWEN25_7B, "max_position_embeddings": 131072},
               note="full-attention diffusion; Fast-dLLM dual cache by default"),
    Checkpoint("GSAI-ML/LLaDA-8B-Instruct", "llada", 8_015_581_184, "index",
               f"index total_size 16031162368: {_DARE}LLaDA-8B-Instruct/model.safetensors.index.json "
               "(config beside it)",
               {"vocab_size": 126464, "d_model": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 32,
                "mlp_hidden_size": 12288, "max_sequence_length": 4096, "weight_tying": False},
               note="full-attention diffusion; 4,096-token context"),
    Checkpoint("google/diffusiongemma-26B-A4B-it", "diffusion_gemma", None, None,
               "name: transformers 5.24's DiffusionGemmaConfig docstring; neither its config.json nor its index "
               "was reachable, so its size is unknown here",
               {"vocab_size": 262144}, note="MoE, 26B total / 4B active (its name); canvas 256"),
    Checkpoint("Qwen/Qwen3-Next-80B-A3B-Instruct", "ar", 79_674_391_296, "config",
               "config: transformers 5.24's Qwen3NextConfig() (documented as this checkpoint; hidden 2048, "
               "head_dim 256, GDN heads 16/32 of 128, attention every 4th layer agree with the release as quoted "
               "in public code); count: transformers' Qwen3NextForCausalLM on the meta device, without the "
               "release's multi-token-prediction weights (a lower bound)",
               {"vocab_size": 151936, "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 16,
                "num_key_value_heads": 2, "head_dim": 256, "max_position_embeddings": 262144},
               attention_layers=12, note="GDN hybrid MoE (512 experts), autoregressive"),
    Checkpoint("Qwen/Qwen3.5-35B-A3B", "ar", 35_114_261_360, "config",
               "config: transformers 5.24's Qwen3_5MoeConfig() (documented as this checkpoint); count: "
               "Qwen3_5MoeForConditionalGeneration on the meta device, vision tower included (453,650,672), "
               "without the release's multi-token-prediction weights (a lower bound)",
               {"vocab_size": 248320, "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16,
                "num_key_value_heads": 2, "head_dim": 256},
               attention_layers=10, note="GDN hybrid MoE (256 experts), autoregressive; text model loaded"),
)



def find(repo: str) -> Checkpoint | None:
    """The catalog entry for `ORG/NAME` (case-insensitive), or None."""
    key = repo.lower()
    return next((c for c in CATALOG if c.repo.lower() == key), None)


DEMO_NOTICE = ("tiny is the bundled demo model (a few MB: it shows how Clover works, it does not code); "
               "`clover models` lists real checkpoints and whether they fit this machine, then "
               "`clover --model hf:ORG/NAME`")


def demo_notice(spec) -> str | None:
    """The one-line demo notice when `spec` (a string, or None for the default) is the bundled
    `tiny`; None otherwise or for a spec that does not parse."""
    from .spec import SpecError, parse_spec

    try:
        return DEMO_NOTICE if parse_spec(spec if spec is None else str(spec)).kind == "tiny" else None
    except SpecError:
        return None
