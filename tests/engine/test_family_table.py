"""The family table (engine/families.py; docs/design.md, "The family table") is the one place a
family's name is compared: a walk over the source finds every comparison with, and every table
keyed by, a family's name elsewhere. The table's rows are complete (every family detect_family
returns, every catalog checkpoint) and its options rule holds for every family and option."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from clover_cli.engine.families import FAMILIES, OPTIONS, ROWS, asks_nothing, describe, detect_family

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("engine", "kernels", "tools", "prompts", "clover_cli")
TABLE = "engine/families.py"


def _strings(node: ast.AST) -> list[str]:
    """The string constants of a constant or of a tuple / list / set of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def name_uses(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) for each family name compared (==, !=, in, a match case), keying a dict
    literal with two or more family names, or listed with another family name in a literal."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            hits = [s for part in (node.left, *node.comparators) for s in _strings(part) if s in names]
        elif isinstance(node, ast.MatchValue):
            hits = [s for s in _strings(node.value) if s in names]
        elif isinstance(node, ast.Dict):
            hits = [s for k in node.keys if k is not None for s in _strings(k) if s in names]
            hits = hits if len(hits) >= 2 else []
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            hits = [s for s in _strings(node) if s in names]
            hits = hits if len(hits) >= 2 else []
        else:
            continue
        found += [(node.lineno, s) for s in hits]
    return found


def family_name_uses(root: Path) -> dict[tuple[str, str], list[int]]:
    """(file, family name) -> lines, over the product's source under `root` but the table."""
    names = set(FAMILIES)
    uses: dict[tuple[str, str], list[int]] = {}
    for top in ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel == TABLE:
                continue
            for line, name in name_uses(path.read_text(encoding="utf-8"), names):
                uses.setdefault((rel, name), []).append(line)
    return uses


def test_no_family_name_is_compared_outside_the_table():
    uses = family_name_uses(REPO)
    assert not uses, f"compare a family through engine/families.py's table, not its name: {uses}"


def test_the_walk_finds_each_kind_of_comparison():
    names = set(FAMILIES)
    source = ("a = lm.family.name == 'dream'\nb = name in ('llada', 'x')\nc = {'sdar': 1, 'ar': 2}\n"
              "d = ('hybrid', 'clover')\nmatch f:\n    case 'llada2':\n        pass\n"
              "e = {'ar': []}\ng = ('ar',)\nh = x == 'qwen3'\n")
    assert [n for _, n in name_uses(source, names)] == \
        ["dream", "llada", "sdar", "ar", "hybrid", "clover", "llada2"]


CONFIGS = {  # a config.json of each family, as detect_family reads it
    "clover": {"model_type": "qwen3", "mask_token_id": 5, "block_size": 4},
    "sdar": {"model_type": "sdar", "mask_token_id": 5, "block_size": 4},
    "fast_dllm_v2": {"model_type": "Fast_dLLM_Qwen"},
    "llada2": {"model_type": "llada2_moe"},
    "hybrid": {"model_type": "qwen3_next", "mask_token_id": 5, "block_size": 4},
    "dream": {"model_type": "Dream"},
    "llada": {"model_type": "llada"},
    "diffusion_gemma": {"model_type": "diffusion_gemma", "canvas_length": 16},
    "ar": {"model_type": "llama"},
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_detected_family_has_a_row_that_names_it(name):
    family = detect_family(CONFIGS[name])
    assert family.name == name and family.row is FAMILIES[name]
    assert describe(family).startswith(FAMILIES[name].label + " (")
    assert family.row.decoder_class().__name__.endswith("Decoder")  # it imports


def test_the_table_covers_every_family_and_catalog_checkpoint():
    from clover_cli.engine.catalog import CATALOG

    assert set(CONFIGS) == set(FAMILIES) and len(ROWS) == len(FAMILIES)
    assert {c.family for c in CATALOG} <= set(FAMILIES)
    assert {row.tool_calls for row in ROWS} == {"hermes", "gemma"}
    assert FAMILIES["diffusion_gemma"].call_markup == ("<|tool_call>", "<tool_call|>")
    for row in ROWS:
        assert row.options <= OPTIONS
        assert row.network in ("auto", "gemma", "own:qwen", "own:llada1", "own:llada2")


# each option with a value that asks for something (any family that does not take it refuses
# it) and the values that ask for nothing (every family accepts them); block: the family's own 16
ASKING = {"threshold": 0.9, "temperature": 0.5, "top_p": 0.9, "block_size": 8, "sub_block_size": 4,
          "repetition_penalty": 1.2, "progressive_ending": True, "token_healing": True,
          "eos_confine": True, "editing": True, "editing_threshold": 0.8, "max_post_steps": 4,
          "diffusion_steps": 8, "remasking": "random", "cfg_scale": 1.5, "diffusion_mode": "exact",
          "diffusion_alg": "entropy", "prefill_chunk_blocks": 2}
OFF = {"top_p": [1.0], "block_size": [16], "sub_block_size": [None, 16, 32], "repetition_penalty": [1.0],
       "progressive_ending": [False], "token_healing": [False], "eos_confine": [False],
       "editing": [False, None], "max_post_steps": [0], "remasking": ["low_confidence"], "cfg_scale": [0.0],
       "diffusion_mode": [None], "diffusion_alg": [None], "prefill_chunk_blocks": [None],
       "diffusion_steps": [None]}


def test_every_option_has_cases():
    assert set(ASKING) == set(OPTIONS) and set(OFF) <= set(OPTIONS)


@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_a_family_refuses_only_what_it_cannot_do(row, option):
    for value in OFF.get(option, []):  # the state it already has: accepted, taken or not
        assert asks_nothing(option, value, 16) and row.refused({option: value}, 16) == []
    assert row.refused({option: ASKING[option]}, 16) == ([] if option in row.options else [option])


def test_at_a_block_of_one_sub_blocks_and_eos_confinement_ask_nothing():
    """AR decodes a token per forward: any sub-block, and never selecting past a committed EOS,
    hold already (so `--sub-block` / `--eos-confine` are accepted for AR, and nothing more)."""
    assert asks_nothing("sub_block_size", 4, 1) and asks_nothing("eos_confine", True, 1)
    assert not asks_nothing("eos_confine", True, 2) and not asks_nothing("sub_block_size", 1, 2)


# what a script passes to every model: each flag at the state a family that lacks it already has
SAME_FLAGS = ("--no-token-healing", "--repetition-penalty", "1", "--top-p", "1", "--no-edit",
              "--max-post-steps", "0")


@pytest.mark.parametrize("kind", ["clover", "sdar", "fast_dllm_v2", "hybrid", "ar"])
def test_the_same_flags_run_on_every_family(tiny_dirs, clover, kind):
    out = clover("generate", "--model", str(tiny_dirs[kind]), "--raw", "--json", "--prompt", "x",
                 "--max-new-tokens", "2", *SAME_FLAGS)
    assert out.exit_code == 0, out.stderr
    assert json.loads(out.stdout)["token_healing"] is False


@pytest.mark.parametrize("kind, flags, refused", [
    ("clover", ["--edit"], "--edit does not apply to Clover"),
    ("ar", ["--block-size", "8", "--edit"], "--block-size, --edit does not apply to AR"),
    ("ar", ["--diffusion-steps", "4"], "--diffusion-steps does not apply to AR"),
])
def test_a_flag_the_family_cannot_honour_is_one_line(tiny_dirs, clover, kind, flags, refused):
    out = clover("generate", "--model", str(tiny_dirs[kind]), "--raw", "--prompt", "x", "--max-new-tokens",
                 "2", *flags)
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr.strip().startswith(f"clover: error: {refused}") and "\n" not in out.stderr.strip()


def test_the_block_size_a_family_has_is_accepted(tiny_dirs, clover):
    out = clover("generate", "--model", str(tiny_dirs["ar"]), "--raw", "--prompt", "x", "--max-new-tokens",
                 "2", "--block-size", "1", "--sub-block", "1", "--threshold", "0.5")
    assert out.exit_code == 0, out.stderr
