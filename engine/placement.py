"""Where a model runs: device and precision, chosen once at load (docs/engine.md, "Placement").

`resolve_placement(device, dtype)` turns the user's choice (`auto`, `cpu`, `cuda`, `cuda:N`, `mps`;
`auto`, `float32`, `bfloat16`, `float16`) into a Placement for this machine: `auto` is CUDA when
torch sees a GPU, else MPS, else the CPU; bfloat16 on a CUDA GPU that has it (compute capability
8.0+, else float16), float16 on MPS, float32 on the CPU. What the machine has is a `Machine`,
probed from torch once (`probe_machine`) or built by a caller (tests fake CUDA and MPS with it).

A choice the machine cannot honour (`--device cuda` on a CPU build) is a PlacementError whose
message is one line. Nothing here reads a tensor; torch is imported only by `probe_machine`.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

DEVICE_ENV = "CLOVER_DEVICE"
DTYPE_ENV = "CLOVER_DTYPE"
DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")  # and cuda:N
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")
DTYPE_BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}
_DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d{1,3})?)$")


class PlacementError(ValueError):
    """A device or dtype this machine cannot honour; str() is one line for the user."""


@dataclass(frozen=True)
class CudaDevice:
    """One CUDA GPU as torch sees it."""

    index: int
    name: str
    capability: tuple[int, int] = (8, 0)
    total_bytes: int = 0

    @property
    def bf16(self) -> bool:
        """Native bfloat16 matmuls (Ampere, compute capability 8.0, and later)."""
        return self.capability[0] >= 8


@dataclass(frozen=True)
class Machine:
    """The accelerators this process can use; `probe_machine()` fills it from torch."""

    cuda: tuple[CudaDevice, ...] = ()
    mps: bool = False
    cuda_build: str | None = None  # torch.version.cuda (None: a CPU-only torch build)
    torch_version: str = ""
    free_bytes: dict = field(default_factory=dict, compare=False)  # device -> bytes, when known


@dataclass(frozen=True)
class Placement:
    """The device, compute dtype and weight format a model is loaded in."""

    device: str  # "cpu", "cuda:0", "mps"
    dtype: str  # "float32", "bfloat16", "float16" (or float64, for tests)
    device_name: str = "CPU"
    weight_format: str = ""  # "" = the compute dtype; a quantized format's name otherwise

    @property
    def kind(self) -> str:
        return self.device.split(":")[0]

    @property
    def weights(self) -> str:
        return self.weight_format or self.dtype

    def label(self) -> str:
        """The short form front ends show: `cuda:0 · bfloat16`, `cpu · float32 · int8`."""
        parts = [self.device, self.dtype]
        if self.weight_format and self.weight_format != self.dtype:
            parts.append(self.weight_format)
        return " · ".join(parts)

    def as_dict(self) -> dict:
        return {"device": self.device, "device_name": self.device_name, "dtype": self.dtype,
                "weight_format": self.weights}

    def torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)


_PROBED: list[Machine] = []


def probe_machine(refresh: bool = False) -> Machine:
    """What torch sees on this machine (cached for the process). Counting CUDA devices does not
    create a CUDA context."""
    if _PROBED and not refresh:
        return _PROBED[0]
    import torch

    gpus = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            gpus.append(CudaDevice(i, props.name, (props.major, props.minor), int(props.total_memory)))
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    machine = Machine(tuple(gpus), mps, getattr(torch.version, "cuda", None), torch.__version__)
    _PROBED[:] = [machine]
    return machine


def check_device_text(value: str) -> str:
    """`value` normalised (lower case, `cuda:0` kept), or PlacementError naming the choices."""
    text = str(value).strip().lower()
    if not _DEVICE_RE.match(text):
        raise PlacementError(f"device must be auto, cpu, cuda, cuda:N or mps, got {value!r}")
    return text


def check_dtype_text(value: str) -> str:
    """`value` normalised; also accepts bf16 / fp16 / fp32 / half / float."""
    text = str(value).strip().lower()
    text = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32",
            "float": "float32"}.get(text, text)
    if text not in DTYPE_CHOICES:
        raise PlacementError(f"dtype must be one of {', '.join(DTYPE_CHOICES)}, got {value!r}")
    return text


def _pick_device(wanted: str, machine: Machine) -> tuple[str, str]:
    """(device, its name) for a checked device choice."""
    if wanted == "auto":
        if machine.cuda:
            return "cuda:0", machine.cuda[0].name
        if machine.mps:
            return "mps", "Apple MPS"
        return "cpu", "CPU"
    if wanted == "cpu":
        return "cpu", "CPU"
    if wanted == "mps":
        if not machine.mps:
            raise PlacementError("--device mps: torch sees no MPS device (Apple silicon with macOS 12.3+ "
                                 "only); use --device auto or cpu")
        return "mps", "Apple MPS"
    index = int(wanted.split(":")[1]) if ":" in wanted else 0
    if not machine.cuda:
        why = (f"this torch ({machine.torch_version}) is a CPU-only build" if machine.cuda_build is None
               else "no GPU is visible (check the driver and CUDA_VISIBLE_DEVICES)")
        raise PlacementError(f"--device {wanted}: torch sees no CUDA GPU ({why}); use --device auto or cpu")
    if index >= len(machine.cuda):
        raise PlacementError(f"--device {wanted}: this machine has {len(machine.cuda)} CUDA device(s) "
                             f"(cuda:0..cuda:{len(machine.cuda) - 1})")
    return f"cuda:{index}", machine.cuda[index].name


def _pick_dtype(wanted: str, device: str, machine: Machine) -> str:
    kind = device.split(":")[0]
    gpu = machine.cuda[int(device.split(":")[1])] if kind == "cuda" else None
    if wanted == "auto":
        if gpu is not None:
            return "bfloat16" if gpu.bf16 else "float16"
        return "float16" if kind == "mps" else "float32"
    if wanted == "bfloat16" and gpu is not None and not gpu.bf16:
        raise PlacementError(f"--dtype bfloat16: {gpu.name} (compute capability "
                             f"{gpu.capability[0]}.{gpu.capability[1]}) has no bfloat16 matmuls; "
                             "use --dtype float16 or auto")
    return wanted


def resolve_placement(device: str | None = None, dtype: str | None = None,
                      machine: Machine | None = None) -> Placement:
    """The Placement for a device and dtype choice (None: $CLOVER_DEVICE / $CLOVER_DTYPE, else
    auto); raises PlacementError (one line) for a choice this machine cannot honour."""
    wanted_device = check_device_text(device or os.environ.get(DEVICE_ENV, "").strip() or "auto")
    raw_dtype = dtype or os.environ.get(DTYPE_ENV, "").strip() or "auto"
    wanted_dtype = raw_dtype if raw_dtype == "float64" else check_dtype_text(raw_dtype)
    machine = machine or probe_machine()
    name, device_name = _pick_device(wanted_device, machine)
    return Placement(name, _pick_dtype(wanted_dtype, name, machine), device_name)


def cpu_placement(dtype: str = "float32") -> Placement:
    """The CPU in `dtype` (what a GGUF conversion or a test without a choice gets)."""
    return Placement("cpu", dtype, "CPU")
