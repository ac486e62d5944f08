"""`clover generate --remasking / --cfg-scale` (LLaDA 1.x exact mode's own options; docs/engine.md,
"Families") on the families that do not take them: the defaults run everywhere, anything else is
one line and exit 2 (docs/design.md, "The family table"); the engine refuses them too. Their
effect on LLaDA itself: tests/engine/conformance/test_llada_options.py."""
from __future__ import annotations

import json

import pytest

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.loader import load_model
from clover_cli.engine.settings import LladaSettings
from in_process import clover

DEFAULTS = ("--remasking", "low_confidence", "--cfg-scale", "0")


def _args(model, *flags):
    return ("generate", "--model", str(model), "--raw", "--prompt", "x", "--max-new-tokens", "2", *flags)


@pytest.mark.parametrize("kind", ["clover", "sdar", "fast_dllm_v2", "hybrid", "ar"])
def test_the_defaults_run_on_every_family(tiny_dirs, kind):
    out = clover(*_args(tiny_dirs[kind], "--json", *DEFAULTS))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["token_ids"]


@pytest.mark.parametrize("kind, short", [("clover", "Clover"), ("ar", "AR")])
@pytest.mark.parametrize("flags", [["--remasking", "random"], ["--cfg-scale", "1.5"],
                                   ["--cfg-scale", "0.5", "--remasking", "random"]])
def test_a_value_the_family_does_not_take_is_one_line(tiny_dirs, kind, short, flags):
    out = clover(*_args(tiny_dirs[kind], *flags))
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and out.stdout == "" and len(lines) == 1, out.stderr
    named = ", ".join(sorted({"--remasking", "--cfg-scale"} & set(flags), key=lambda f: f.strip("-")))
    assert lines[0].startswith(f"clover: error: {named} does not apply to {short}")


def test_bad_values_are_usage_errors():
    for flags in (["--remasking", "top"], ["--cfg-scale", "-1"]):
        out = clover(*_args("tiny", *flags))
        assert out.returncode == 2 and flags[0] in out.stderr


def test_the_help_names_them():
    text = clover("generate", "--help").stdout
    assert "--remasking [low_confidence|random]" in text and "--cfg-scale" in text


def test_the_settings_check_them_and_the_engine_refuses_them_elsewhere():
    for bad in ({"remasking": "top"}, {"cfg_scale": -0.5}, {"cfg_scale": "1"}):
        with pytest.raises(ValueError, match="remasking must be|cfg_scale must be"):
            LladaSettings(**bad)
    assert LladaSettings(cfg_scale=2).cfg_scale == 2.0
    engine = Engine(load_model("tiny"))
    for settings, name in (({"remasking": "random"}, "remasking"), ({"cfg_scale": 1.0}, "cfg_scale")):
        with pytest.raises(ValueError, match=f"{name} applies to LLaDA 1.x checkpoints only; this model is Clover"):
            engine.generate([1, 2, 3], GenerationConfig(max_new_tokens=2, family=LladaSettings(**settings)))
    defaults = GenerationConfig(max_new_tokens=2, family=LladaSettings(remasking="low_confidence", cfg_scale=0.0))
    assert engine.generate([1, 2, 3], defaults).token_ids
