"""`AgentControls` (clover_cli/agent/controls.py) states what it needs of its host as the
`ControlsHost` protocol: a real `Agent` has every member, and a class that lacks one is not a host."""
from __future__ import annotations

from clover_cli.agent.controls import ControlsHost

from .helpers import make_repo, new_agent


def test_a_real_agent_is_a_controls_host(tmp_path):
    agent = new_agent(make_repo(tmp_path / "repo"), ["Hello."])
    assert isinstance(agent, ControlsHost)
    declared = set(ControlsHost.__annotations__) | {"resume"}
    assert [name for name in sorted(declared) if not hasattr(agent, name)] == []


def test_something_missing_a_member_is_no_host(tmp_path):
    agent = new_agent(make_repo(tmp_path / "repo"), ["Hello."])
    del agent._task  # an attribute the controls write (clear) and nothing else provides
    assert not isinstance(agent, ControlsHost)


def test_the_pending_prompt_is_counted(tmp_path):
    agent = new_agent(make_repo(tmp_path / "repo"), ["Hello."])
    before = agent.context_tokens()
    assert agent.context_tokens(pending="please read every file " * 20) > before
    assert agent.context_tokens() == before  # counting changes nothing
