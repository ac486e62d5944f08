"""A replay (scripted) model reads its text instead of generating it: `turn_end` reports no
speed for it (`tokens_per_second: null`), not a figure like 210000 tok/s."""
import json

from .helpers import call, clover_in_process, make_repo, replay


def test_a_replay_turn_reports_no_tokens_per_second(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, [call("read_file", path="calc.py"), "It adds."])
    p = clover_in_process("run", "look", "--model", spec, "--root", str(repo), "--json")
    assert p.returncode == 0, p.stderr
    end = json.loads(p.stdout.splitlines()[-1])
    assert end["type"] == "turn_end" and end["stats"]["generated_tokens"] > 0
    assert "tokens_per_second" in end["stats"] and end["stats"]["tokens_per_second"] is None
