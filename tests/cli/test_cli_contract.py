"""The CLI contract: fast help without torch, `clover generate --json`, exit codes.

The logic runs in-process through click's CliRunner (no torch import per case); one case runs
the real `python -m clover_cli.cli` process end to end, marked slow."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clover_cli.cli import COMMANDS
from in_process import clover

PY = sys.executable


def _run(*args):
    """`clover ARGS` in-process (tests/in_process.py)."""
    return clover(*args)


@pytest.mark.slow
def test_generate_json_in_a_real_process(tiny_dirs):
    out = subprocess.run([PY, "-m", "clover_cli.cli", "generate", "--model", str(tiny_dirs["clover"]),
                          "--raw", "--json", "--prompt", "def add(a, b):", "--max-new-tokens", "8"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    obj = json.loads(out.stdout)
    assert 0 < len(obj["token_ids"]) <= 8 and obj["finish_reason"] in ("eos", "length")


@pytest.mark.parametrize("argv", [["--help"]] + [[name, "--help"] for name in sorted(COMMANDS)],
                         ids=lambda a: " ".join(a))
def test_help_does_not_import_torch_or_transformers(argv):
    code = ("import sys\nfrom clover_cli.cli import cli\n"
            f"try:\n    cli.main({argv!r}, prog_name='clover', standalone_mode=False)\n"
            "except SystemExit:\n    pass\n"
            "heavy = [m for m in ('torch', 'transformers', 'textual') if m in sys.modules]\n"
            "print('HEAVY=' + ','.join(heavy))\n")
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "HEAVY=\n" in out.stdout, out.stdout


def test_generate_json_contract(tiny_dirs):
    out = _run("generate", "--model", str(tiny_dirs["clover"]), "--raw", "--json", "--prompt",
               "def add(a, b):", "--max-new-tokens", "20", "--threshold", "0.5")
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    assert len(lines) == 1
    obj = json.loads(lines[0])
    for key in ("text", "token_ids", "prompt_ids", "forwards", "blocks", "tpf", "seconds",
                "tokens_per_second", "finish_reason"):
        assert key in obj
    assert 0 < len(obj["token_ids"]) <= 20
    assert obj["finish_reason"] in ("eos", "length")
    assert obj["tpf"] == pytest.approx(len(obj["token_ids"]) / obj["forwards"], rel=1e-3)
    # --raw: the prompt is tokenized as is
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(tiny_dirs["clover"]))
    assert obj["prompt_ids"] == tok.encode("def add(a, b):")


def test_generate_raw_heals_the_prompt_end():
    """--raw backs up the last prompt token: the bundled tokenizer merges a newline with the
    indentation after it, so the first generated token must start with the removed newline."""
    from transformers import AutoTokenizer

    from clover_cli.engine.loader import bundled_tiny_dir

    prefix = "def f(n):\n    if n:\n        return n\n"
    tok = AutoTokenizer.from_pretrained(str(bundled_tiny_dir()))
    for flag, healed in ((), True), (("--no-token-healing",), False):
        out = _run("generate", "--model", "tiny", "--raw", "--json", "--prompt", prefix,
                   "--max-new-tokens", "4", *flag)
        assert out.returncode == 0, out.stderr
        obj = json.loads(out.stdout)
        assert obj["token_healing"] is healed
        assert obj["prompt_ids"] == tok.encode(prefix)  # the prompt as given, either way
        if healed:
            assert tok.decode(obj["token_ids"][:1]).startswith("\n")
            # the text continues the prompt: the newline it already ends with is not repeated
            assert obj["text"] == tok.decode(obj["token_ids"], skip_special_tokens=True)[1:]
    chat = _run("generate", "--model", "tiny", "--json", "--prompt", "hi", "--max-new-tokens", "2")
    assert json.loads(chat.stdout)["token_healing"] is False


def test_generate_chat_template_and_streaming(tiny_dirs, tmp_path):
    prompt = tmp_path / "p.txt"
    prompt.write_text("hello")
    out = _run("generate", "--model", str(tiny_dirs["ar"]), "--prompt-file", str(prompt),
               "--max-new-tokens", "5", "--json")
    obj = json.loads(out.stdout)
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(tiny_dirs["ar"]))
    templ = tok.apply_chat_template([{"role": "user", "content": "hello"}], tokenize=False,
                                    add_generation_prompt=True)
    assert obj["prompt_ids"] == tok.encode(templ, add_special_tokens=False)
    text = _run("generate", "--model", str(tiny_dirs["ar"]), "--prompt", "hi", "--max-new-tokens", "5")
    assert text.returncode == 0 and "TPF" in text.stderr


def test_generate_names_the_family_it_detected(tiny_dirs):
    """docs/engine.md, "Families": a stderr line in text mode, `family` keys in --json."""
    text = _run("generate", "--model", str(tiny_dirs["clover"]), "--raw", "--prompt", "x",
                "--max-new-tokens", "2")
    assert text.returncode == 0, text.stderr
    assert f"clover: {tiny_dirs['clover'].name}: Clover block diffusion (qwen3, block " in text.stderr
    ar = _run("generate", "--model", str(tiny_dirs["ar"]), "--raw", "--json", "--prompt", "x",
              "--max-new-tokens", "2")
    obj = json.loads(ar.stdout)
    assert (obj["family"], obj["family_label"]) == ("ar", "autoregressive (qwen3)")
    assert "clover:" not in ar.stderr  # --json keeps stderr for errors


def test_every_family_has_a_label():
    from clover_cli.engine.families import FAMILY_LABELS, Family, describe

    assert describe(Family("sdar", True, "qwen3", 5, 4)) == "SDAR block diffusion (qwen3, block 4)"
    assert describe(Family("diffusion_gemma", True, "diffusion_gemma", None, 256)) == \
        "DiffusionGemma canvas diffusion (diffusion_gemma, canvas 256)"
    assert describe(Family("ar", False, "qwen3_5_moe", recurrent=True)) == \
        "autoregressive (Gated DeltaNet hybrid, qwen3_5_moe)"
    from clover_cli.engine.families import detect_family

    # one config per branch of detect_family: each family it returns is described with its label
    configs = [{"model_type": "qwen3", "mask_token_id": 5}, {"model_type": "sdar", "mask_token_id": 5},
               {"model_type": "Fast_dLLM_Qwen"}, {"model_type": "llada2_moe"}, {"model_type": "Dream"},
               {"model_type": "LLaDA"}, {"model_type": "diffusion_gemma"},
               {"model_type": "qwen3_next", "mask_token_id": 5}, {"model_type": "qwen3_next"},
               {"model_type": "llama"}]
    families = [detect_family(cfg) for cfg in configs]
    assert {f.name for f in families} == set(FAMILY_LABELS)
    for family in families:
        assert describe(family).startswith(FAMILY_LABELS[family.name] + " ("), family.name


@pytest.mark.parametrize("args, words", [
    (["--model", "/no/such/dir", "--prompt", "x"], "unknown model spec"),
    (["--model", "hf:nobody/none", "--prompt", "x"], "not in the local Hugging Face cache"),
    (["--model", "tiny"], "exactly one of --prompt"),
    (["--model", "tiny", "--prompt", "x", "--threshold", "2"], "threshold"),
])
def test_generate_bad_input_exits_2_with_one_line(args, words):
    out = _run("generate", *args)
    assert out.returncode == 2
    assert words in out.stderr
    assert "Traceback" not in out.stderr


def test_broken_checkpoint_one_line(tiny_dirs, tmp_path):
    import shutil
    d = tmp_path / "broken"
    shutil.copytree(tiny_dirs["clover"], d)
    (d / "model.safetensors").write_bytes(b"garbage")
    out = _run("generate", "--model", str(d), "--prompt", "x")
    assert out.returncode == 2
    errs = [line for line in out.stderr.splitlines() if line.startswith("clover: error:")]
    assert len(errs) == 1 and "Traceback" not in out.stderr
