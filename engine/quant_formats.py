"""The `--quantize` choice as text (docs/engine.md, "Quantized weights"): its names, its
environment variable and its check. No torch here: the CLI's settings loader checks the value
before anything heavy is imported; engine/quantize.py does the quantizing."""
from __future__ import annotations

QUANTIZE_ENV = "CLOVER_QUANTIZE"
QUANTIZE_CHOICES = ("none", "int8", "int4")
_NONE = ("", "none", "off", "no", "0", "false")


class QuantizeChoiceError(ValueError):
    """A --quantize value that names no format; str() is one line."""


def check_quantize_text(value: object) -> str:
    """`value` normalised to none, int8 or int4; QuantizeChoiceError naming the choices."""
    text = str(value if value is not None else "").strip().lower()
    if text in _NONE:
        return "none"
    if text not in QUANTIZE_CHOICES:
        raise QuantizeChoiceError(f"quantize must be int8, int4 or none, got {value!r}")
    return text


def weight_format(value: object) -> str:
    """The Placement.weight_format of a choice: "" for none, else the format's name."""
    text = check_quantize_text(value)
    return "" if text == "none" else text
