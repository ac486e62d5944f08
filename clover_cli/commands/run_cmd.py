"""`clover run TASK`: one task, headless, to completion (text or JSON lines on stdout).

Approval here is never interactive: the default is `auto-edit` (edits apply); shell commands run
only under `--approval yolo` or when they match a `--shell-allow PREFIX`; anything that would
need a yes is answered "no" and the model is told why. Exit 0: the turn ended normally;
1: it stopped on a limit or an error; 2: bad arguments (unknown model spec, missing root, ...).
"""
from __future__ import annotations

import json
import os
import signal
import sys

import click

from clover_cli.agent.config import HEADLESS_APPROVAL_MODES
from clover_cli.commands.options import (approval_option, cache_mb_option, command_line,
                                         diffusion_mode_option, max_steps_option, model_option,
                                         placement_of, placement_options, root_option, session_options,
                                         threshold_option, chosen_threshold)
from clover_cli.termsafe import StreamCleaner, clean_line, clean_text, json_line, utf8_safe


def _fail_args(message: str) -> None:
    click.echo(f"clover run: error: {clean_line(message)}", err=True)
    sys.exit(2)


@click.command("run")
@click.argument("task")
@model_option()
@root_option()
@approval_option(HEADLESS_APPROVAL_MODES,
                 help="auto-edit (default, unless the config file says otherwise): edits apply, shell only via "
                      "--shell-allow; yolo: all; read-only: no writes.")
@max_steps_option()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line per event.")
@click.option("--shell-allow", "shell_allow", multiple=True, metavar="PREFIX",
              help="Shell command prefix allowed without asking (repeatable), e.g. 'pytest'.")
@click.option("--api-key-env", default=None, metavar="NAME", help="Environment variable holding the API key (openai: models).")
@click.option("--request-timeout", type=click.FloatRange(1, clamp=False), default=None, metavar="SECONDS",
              help="openai: models: the most one request may take, headers to last byte (default 900).")
@threshold_option()
@cache_mb_option()
@diffusion_mode_option()
@placement_options()
@click.option("--max-new-tokens", type=click.IntRange(1), default=None, help="Token budget per model call.")
@click.option("--context-window", type=click.IntRange(256), default=None,
              help="The model's context window in tokens (default: what an openai: server reports, else the model's).")
@session_options(continue_help="Continue the last session in this root.")
@click.pass_context
def run(ctx: click.Context, task, max_steps, as_json, shell_allow, api_key_env, max_new_tokens,
        context_window=None, request_timeout=None) -> None:
    """Run TASK with the agent until it answers, then exit."""
    from clover_cli.config import ConfigError, load_settings

    line = command_line(ctx)  # the group's options and these, merged (commands/options.py)
    root = line.root_path()
    if not root.is_dir():
        _fail_args(f"root {str(root)!r} is not a directory")
    if not task.strip():
        _fail_args("empty task")
    # the one settings loader (clover_cli/config.py): the user's file and, only when the user trusts
    # the repository, its .clover/config.toml fill in what the command line leaves out (never
    # asked here: an untrusted repository's file is ignored with one warning); files are read only
    # then, so a broken file does not stop a fully specified run. `ask` (the TUI's mode, from a
    # file or `clover --approval ask run`) means auto-edit here: a headless run cannot ask
    try:
        settings = load_settings(root, line.flags(), needed=("model", "approval", "threshold"))
    except ConfigError as e:
        _fail_args(str(e))
    for warning in settings.warnings:
        _say(f"clover run: warning: {clean_line(warning)}")
    model, threshold = settings.config.model, chosen_threshold(settings)
    approval = settings.config.approval if settings.config.approval != "ask" else "auto-edit"

    from clover_cli.agent import Agent, AgentConfig
    from clover_cli.agent.backends import BackendError, make_backend
    from clover_cli.agent.driver import TurnDriver
    from clover_cli.agent.session import SessionError
    from clover_cli.engine.spec import SpecError

    opts: dict = {"threshold": threshold}
    if settings.config.cache_mb is not None:
        opts["cache_mb"] = settings.config.cache_mb
    opts.update(placement_of(settings))  # --device / --dtype (docs/engine.md "Placement")
    if line.diffusion_mode:  # Dream / LLaDA 1.x only: another backend names the option it lacks
        opts["diffusion_mode"] = line.diffusion_mode
    if api_key_env:
        opts["api_key_env"] = api_key_env
        from clover_cli.tools.sandbox_env import register_secret_env

        register_secret_env(api_key_env)  # its value never reaches a sandboxed command, by any name
    if request_timeout:
        opts["request_timeout"] = request_timeout
    try:
        backend = make_backend(model, **opts)
    except (SpecError, BackendError, TypeError) as e:
        _fail_args(str(e))
    from clover_cli.engine.catalog import demo_notice

    if demo_notice(model):  # the bundled `tiny`: one stderr line on how to pick a real model
        _say(f"clover run: note: {demo_notice(model)}")
    cfg_kw = {"max_new_tokens": max_new_tokens} if max_new_tokens else {}
    if context_window:
        cfg_kw["context_window"] = context_window
    cfg = AgentConfig(root=root, approval=approval, max_steps=max_steps, shell_allow=tuple(shell_allow),
                      meta={"command": "run"}, **cfg_kw)
    try:
        if line.continue_ or line.session_id:
            agent = Agent.resume(backend, cfg, line.session_id or "last")
        else:
            agent = Agent(backend, cfg)
    except SessionError as e:
        _fail_args(str(e))

    # the one turn driver (clover_cli/agent/driver.py) runs the turn on a worker thread; this
    # thread only prints, so Ctrl+C is handled at once even while the model or a tool is busy
    driver = TurnDriver(agent, approve=_refuse(agent), name="clover-run-turn")
    previous = signal.signal(signal.SIGINT, _Interrupts(driver))
    try:
        reason = _print_events(agent, driver.start(task).events(), as_json)
    finally:
        signal.signal(signal.SIGINT, previous)
        backend.close()
    sys.exit(0 if reason == "done" else 1)


def _refuse(agent):
    """The approval answer of a non-interactive run: "no", telling the model why."""
    from clover_cli.agent import events as ev
    from clover_cli.agent.prompt_files import observation

    def approve(request):
        if agent.policy.is_writing(request.name):
            feedback = observation("run_no_edit", mode=agent.config.approval)
        else:
            feedback = observation("run_no_shell", allowed=", ".join(agent.config.shell_allow) or "none")
        return ev.ApprovalAnswer("no", feedback)

    return approve


class _Interrupts:
    """SIGINT: the first cancels the turn (it ends "cancelled", exit 1; a model step that does not
    stop within the driver's grace is abandoned); the second exits at once with 130; from then on
    the default handler kills the process even if Python is stuck."""

    def __init__(self, driver) -> None:
        self.driver = driver
        self.count = 0

    def __call__(self, *_: object) -> None:
        self.count += 1
        if self.count == 1:
            self.driver.cancel()
            _say("\nclover run: cancelling (press Ctrl+C again to quit now)")
            return
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        _say("\nclover run: interrupted")
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        os._exit(130)


def _say(message: str) -> None:
    try:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _print_events(agent, events, as_json: bool) -> str:
    """Prints the turn's events (approvals already answered); returns the TurnFinished reason."""
    printer = _EventPrinter(agent, as_json)
    for e in events:
        printer.show(e)
    return printer.reason


class _EventPrinter:
    """`clover run`'s output of one turn: JSON lines (`--json`) or text on stdout, notes on stderr."""

    def __init__(self, agent, as_json: bool) -> None:
        self.agent = agent
        self.as_json = as_json
        self.reason = "error"
        self.at_line_start = True
        self.call_args: dict[str, str] = {}
        self.model_text = StreamCleaner()  # model text arrives in blocks; an escape may straddle two
        self.printed: list[str] = []  # the model's text and the errors and notes shown this turn

    # -- writing ----------------------------------------------------------------------------------
    def emit(self, obj: dict) -> None:
        sys.stdout.write(json_line(obj) + "\n")
        sys.stdout.flush()

    def text(self, s: str) -> None:  # every text-mode write: never UnicodeEncodeError on stdout
        sys.stdout.write(utf8_safe(s))
        sys.stdout.flush()
        if s:
            self.at_line_start = s.endswith("\n")

    def line(self, s: str) -> None:
        self.end_text()
        self.text(s + "\n")

    def end_text(self) -> None:
        self.text(self.model_text.flush())
        if not self.at_line_start:
            self.text("\n")

    # -- events -----------------------------------------------------------------------------------
    def show(self, e) -> None:
        from clover_cli.agent import events as ev

        handler = {ev.ApprovalRequested: self.approval, ev.BlockText: self.block,
                   ev.ToolCallProposed: self.tool_call, ev.ToolFinished: self.tool_result,
                   ev.AgentError: self.error, ev.Notice: self.notice,
                   ev.TurnFinished: self.turn_end}.get(type(e))
        if handler is not None:
            handler(e)

    def approval(self, e) -> None:
        answer = e.future.result()  # answered by the driver (_refuse) before it got here
        if self.as_json:
            self.emit({"type": "approval", "call_id": e.call_id, "name": e.name, "summary": e.summary,
                       "decision": answer.decision, "reason": answer.feedback})
        else:
            summary = clean_text(e.summary).strip().splitlines()
            self.line(f"! {clean_line(e.name)} needs approval; refused (non-interactive run): "
                      f"{summary[0] if summary else ''}")

    def block(self, e) -> None:  # marked by the agent (docs/agent.md, "Visible text")
        shown = "" if e.kind == "call" else e.text  # a call is shown as its one-line summary
        if not e.thinking:
            self.printed.append(shown)
        if self.as_json:  # consumers get the visible text; the model's own text is under "raw"
            extra = {"raw": "", "unfinished_call": True} if e.kind == "unrun_call" else {}
            self.emit({"type": "block", "text": shown, "raw": e.text, "block_index": e.block_index,
                       "thinking": e.thinking, "kind": e.kind, **extra})
        elif not e.thinking:
            self.text(self.model_text.feed(shown))
            if e.kind == "unrun_call":
                from clover_cli.agent.markup import UNFINISHED_NOTICE
                click.echo(f"note: {UNFINISHED_NOTICE}", err=True)

    def tool_call(self, e) -> None:
        self.call_args[e.call_id] = _short(clean_line(json.dumps(dict(e.arguments), ensure_ascii=False,
                                                                 default=str)))
        if self.as_json:
            self.emit({"type": "tool_call", "call_id": e.call_id, "name": e.name, "arguments": dict(e.arguments)})

    def tool_result(self, e) -> None:
        if self.as_json:
            self.emit({"type": "tool_result", "call_id": e.call_id, "name": e.name, "ok": e.ok,
                       "output": e.output})
        else:
            from clover_cli.agent.summary import result_line
            first = result_line(clean_text(e.output))  # JSON on one line, not a lone "{"
            self.line(f"> {clean_line(e.name)} {self.call_args.get(e.call_id, '')} -> "
                      f"{'ok' if e.ok else 'failed'}: {first}")

    def error(self, e) -> None:
        if self.as_json:
            self.emit({"type": "error", "message": e.message, "fatal": e.fatal})
        else:
            self.printed.append(e.message)
            click.echo(f"error: {clean_text(e.message)}", err=True)

    def notice(self, e) -> None:
        self.printed.append(e.message)
        click.echo(f"note: {clean_text(e.message)}", err=True)

    def turn_end(self, e) -> None:
        self.reason = e.reason
        if self.as_json:
            self.emit({"type": "turn_end", "reason": e.reason, "final_text": e.final_text, "stats": dict(e.stats),
                       "session_id": self.agent.session_id, "changed_files": self.agent.changed_files})
            return
        self.end_text()
        if e.reason != "done":  # the final text once: not again when it was shown as it came
            said = e.final_text.strip()
            shown = not said or said in "".join(self.printed)
            click.echo(f"stopped: {e.reason}" + ("" if shown else f": {clean_text(e.final_text)}"), err=True)
        s = e.stats
        click.echo(f"[{e.reason}: {_count(s.get('steps', 0), 'step')}, "
                   f"{_count(s.get('tool_calls', 0), 'tool call')}, "
                   f"{_count(s.get('generated_tokens', 0), 'token')}, {s.get('seconds', 0):.1f} s; "
                   f"session {self.agent.session_id}]", err=True)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _short(s: str, limit: int = 80) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[:limit - 3] + "..."
