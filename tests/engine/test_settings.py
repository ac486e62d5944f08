"""Each family's own settings (engine/settings.py; docs/design.md, "The family table"): the
common request (GenerationConfig) holds none of them, each family row names its class, settings
built for one family carry over to another only in what asks something of it, and every field
of a class is read by its family's decoder."""
from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.families import FAMILIES, ROWS, takers
from clover_cli.engine.loader import load_model
from clover_cli.engine.settings import (SETTINGS, ARSettings, BlockSettings, EditSettings, LladaSettings, ModeSettings,
                                        Settings, SettingsError, for_family, from_options)

ENGINE = Path(__file__).resolve().parents[2] / "engine"


def test_the_request_holds_no_family_setting():
    common = {f.name for f in fields(GenerationConfig)}
    assert not common & set().union(*(cls.names() for cls in SETTINGS))
    assert len(common) <= 10 and "family" in common


def test_every_row_names_a_settings_class():
    assert {row.settings for row in ROWS} == set(SETTINGS)
    assert FAMILIES["llada2"].settings is EditSettings and FAMILIES["llada"].settings is LladaSettings
    assert FAMILIES["dream"].settings is ModeSettings and FAMILIES["ar"].settings is ARSettings
    assert FAMILIES["diffusion_gemma"].settings is Settings
    for row in ROWS:  # a row's options are its common ones and its class's fields
        assert row.options == row.common | row.settings.names()


def _attributes_read(path: Path) -> set[str]:
    return {node.attr for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)}


@pytest.mark.parametrize("row", [r for r in ROWS if r.settings is not Settings], ids=lambda r: r.name)
def test_each_field_is_read_by_the_family_decoder(row):
    """A field no decoder of the family reads would be a setting that silently does nothing."""
    modules = {spec.partition(":")[0] for spec in (row.decoder, row.editor) if spec}
    read = set().union(*(_attributes_read(ENGINE / f"{m}.py") for m in modules))
    assert row.settings.names() <= read, row.settings.names() - read


def test_settings_carry_over_only_what_the_family_takes():
    # LLaDA2's class extends block diffusion's: a block setting carries over
    assert for_family(EditSettings, BlockSettings(sub_block_size=4), block=32, family="LLaDA2") == \
        EditSettings(sub_block_size=4)
    # asking nothing of a family that lacks the field: accepted (off, the default, the block)
    assert for_family(BlockSettings, EditSettings(editing=False, max_post_steps=0), block=32,
                      family="SDAR") == BlockSettings()
    assert for_family(ARSettings, BlockSettings(sub_block_size=1, eos_confine=True, progressive_ending=True),
                      block=1, family="AR") == ARSettings(progressive_ending=True)
    assert for_family(ModeSettings, None, block=32, family="Dream") == ModeSettings()
    with pytest.raises(SettingsError, match=r"^eos_confine applies to .*LLaDA2.* checkpoints only; "
                                            r"this model is Dream \(docs/design.md"):
        for_family(ModeSettings, BlockSettings(eos_confine=True), block=32, family="Dream", takers=takers)


def test_from_options_takes_the_names_of_its_class():
    options = {"sub_block_size": 4, "diffusion_mode": "exact", "editing": True, "cfg_scale": 1.0}
    assert from_options(BlockSettings, options) == BlockSettings(sub_block_size=4)
    assert from_options(LladaSettings, options) == LladaSettings(diffusion_mode="exact", cfg_scale=1.0)
    assert from_options(Settings, options) == Settings()
    assert from_options(ARSettings, {**options, "progressive_ending": True}) == ARSettings(progressive_ending=True)


@pytest.mark.parametrize("bad, message", [
    (lambda: BlockSettings(sub_block_size=0), "sub_block_size must be"),
    (lambda: EditSettings(editing_threshold=1.5), "editing_threshold must be"),
    (lambda: ModeSettings(diffusion_mode="fast"), "unknown diffusion mode"),
    (lambda: LladaSettings(cfg_scale=True), "cfg_scale must be"),
    (lambda: GenerationConfig(family={"sub_block_size": 4}), "family must be a family's settings")])
def test_bad_settings_are_one_line(bad, message):
    with pytest.raises(ValueError, match=message):
        bad()


def test_the_engine_decodes_with_settings_made_for_another_family():
    """A script's settings for LLaDA2 (editing off) decode a Clover checkpoint as its defaults;
    asking for editing there is one line."""
    engine = Engine(load_model("tiny"))
    plain = engine.generate([1, 2, 3], GenerationConfig(max_new_tokens=8), reuse=False)
    same = engine.generate([1, 2, 3], GenerationConfig(max_new_tokens=8, family=EditSettings(editing=False,
                                                                                          sub_block_size=64)),
                           reuse=False)
    assert same.token_ids == plain.token_ids
    with pytest.raises(SettingsError, match="editing applies to LLaDA2 checkpoints only; this model is Clover"):
        engine.generate([1, 2, 3], GenerationConfig(max_new_tokens=8, family=EditSettings(editing=True)))
