"""make_backend's options: the common ones go to every kind, a misspelled or foreign one is an error."""
import pytest

from clover_cli.agent.backends import COMMON_OPTIONS, make_backend
from clover_cli.agent.backends.openai_backend import OpenAIBackend
from clover_cli.agent.backends.replay import ReplayBackend
from tests.agent.helpers import replay


def test_the_common_options_are_the_ones_commands_pass():
    assert COMMON_OPTIONS == ("threshold", "cache_mb", "api_key_env", "device", "dtype", "request_timeout",
                              "quantize")


def test_placement_reaches_the_engine_and_is_ignored_by_a_scripted_model(tmp_path):
    assert make_backend("tiny", device="cpu", dtype="bfloat16").info["dtype"] == "bfloat16"
    assert make_backend(replay(tmp_path, ["x"]), device="cpu", dtype="bfloat16").info.get("dtype") is None


def test_a_misspelled_option_is_an_error_naming_it(tmp_path):
    spec = replay(tmp_path, ["x"])
    with pytest.raises(TypeError, match="'cahce_mb'"):
        make_backend(spec, cahce_mb=0)
    with pytest.raises(TypeError, match="'chunk_char'"):
        make_backend(spec, chunk_char=4)
    with pytest.raises(TypeError, match="'treshold'"):  # before any model is loaded
        make_backend("tiny", treshold=0.9)


def test_an_option_of_another_backend_is_an_error(tmp_path):
    with pytest.raises(TypeError, match="'retries'.*replay backend"):
        make_backend(replay(tmp_path, ["x"]), retries=2)
    with pytest.raises(TypeError, match="'chunk_chars'.*openai backend"):
        make_backend("openai:http://127.0.0.1:9/v1#m", chunk_chars=4, probe=False)
    with pytest.raises(TypeError, match="'delay'.*engine backend"):
        make_backend("tiny", delay=0.1)


def test_constructors_take_no_unknown_options(tmp_path):
    path = replay(tmp_path, ["x"]).split(":", 1)[1]
    with pytest.raises(TypeError, match="cache_mb"):
        ReplayBackend(path, cache_mb=1)
    with pytest.raises(TypeError, match="chunk_chars"):
        OpenAIBackend("http://127.0.0.1:9/v1", "m", chunk_chars=1)


def test_common_options_are_taken_by_replay_and_openai(tmp_path, monkeypatch):
    b = make_backend(replay(tmp_path, ["x"]), threshold=0.5, cache_mb=0, api_key_env="NO_SUCH_VAR_XYZ",
                     chunk_chars=3)
    assert (b.threshold, b.chunk_chars) == (0.5, 3)  # cache_mb and the key variable mean nothing to it
    monkeypatch.setenv("CLOVER_TEST_KEY", "sekrit")
    o = make_backend("openai:http://127.0.0.1:9/v1#m", threshold=0.7, cache_mb=64,
                     api_key_env="CLOVER_TEST_KEY", probe=False)
    assert (o.threshold, o.api_key) == (0.7, "sekrit")  # the key variable reached it


def test_common_options_are_taken_by_the_engine():
    from clover_cli.engine.loader import load_model

    b = make_backend("tiny", lm=load_model("tiny"), threshold=0.9, cache_mb=0,
                     api_key_env="NO_SUCH_VAR_XYZ")  # an unset key variable is no error for a local model
    assert b.threshold == 0.9 and b.engine.prefix_cache.budget == 0
