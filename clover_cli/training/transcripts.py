"""Agent transcripts for training: templated repository-navigation requests, the right tool call,
the REAL tool result (clover_cli.tools.registry.run_tool) and a short grounded answer.

Repositories are package source trees on this machine (stdlib packages and site-packages);
whole repositories are held out for evaluation. Request phrasings and answer templates live in
requests.json (data, not code)."""
from __future__ import annotations

import json
import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from clover_cli.training import corpus, names, sample_projects

REQUESTS = Path(__file__).with_name("requests.json")
_MATCH_RE = re.compile(r"^(.+?):(\d+): ", re.M)
_SUMMARY_RE = re.compile(r"\[(\d+) matches in (\d+) files")


@lru_cache(maxsize=1)
def requests() -> dict:
    """The request/answer templates of requests.json."""
    return json.loads(REQUESTS.read_text(encoding="utf-8"))


def call_args(kind: str, x: str) -> tuple[str, dict]:
    """(tool name, arguments) answering request `kind` about `x`."""
    spec = requests()[kind]
    if kind == "define":
        return spec["tool"], {"pattern": spec["pattern"].replace("{X}", x)}
    if kind == "uses":
        return spec["tool"], {"pattern": spec["pattern"].replace("{X}", x)}
    if kind == "tests":
        return spec["tool"], {"command": spec["command"]}
    return spec["tool"], {spec["arg"]: x}


def call_message(tool: str, args: dict) -> dict:
    """An assistant message holding one tool call (OpenAI message shape)."""
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": tool, "arguments": args}}]}


def user_text(rng: random.Random, kind: str, x: str, wide: bool = True) -> str:
    """One phrasing of a request: a template of its kind ("phrases" + "more_phrases"), sometimes
    wrapped in a greeting or a sign-off ("wrap") so that the name is copied out of less regular
    sentences. wide=False: the original templates only, unwrapped, drawing from rng exactly as
    before the wider phrasings existed (the synthetic-call evaluation set stays the same)."""
    spec = requests()[kind]
    if not wide:
        return rng.choice(spec["phrases"]).replace("{X}", x)
    text = rng.choice(spec["phrases"] + spec.get("more_phrases", [])).replace("{X}", x)
    wrap = requests().get("wrap")
    if wrap:
        if rng.random() < wrap["p"]:
            text = rng.choice(wrap["prefix"]) + text
        if rng.random() < wrap["p"]:
            text = text + rng.choice(wrap["suffix"])
    return text


def system_messages(rng: random.Random, p_system: float, root: str | None = None
                    ) -> tuple[list[dict], list[dict] | None]:
    """With probability p_system: the agent's real system prompt (for `root`, or a random
    project path) and tool schemas, as the agent sends them."""
    if rng.random() >= p_system:
        return [], None
    root = root or "/" + "/".join(names.word(rng) for _ in range(rng.randint(1, 3)))
    return [{"role": "system", "content": agent_system(root)}], agent_prefix()[1]


def agent_system(root: str) -> str:
    """The agent's system prompt for a project root (prompts/agent_system.md)."""
    try:
        from clover_cli.agent.prompt_files import render
        return render("agent_system.md", root=root)
    except Exception:  # the agent's prompt files are not ours; fall back to no system text
        return ""


@lru_cache(maxsize=1)
def agent_prefix() -> tuple[str, list[dict]]:
    """The agent's system prompt text (root /repo) and tool schemas."""
    from clover_cli.tools.registry import tool_schemas

    return agent_system("/repo"), tool_schemas()


def synthetic_call_chat(rng: random.Random, tokenizer, p_system: float = 0.0,
                        real: names.RealNames | None = None, wide: bool = True) -> str:
    """A request about a synthetic (unmemorisable) name/path and the right tool call only;
    with a `real` pool, real.share of the names are real ones (see names.harvest); wide: the
    request phrasings (see user_text; the evaluation passes False)."""
    kind = rng.choice(("show", "define", "uses", "list", "define", "show"))
    want = requests()[kind]["kind"]
    # all three drawn, as before real names existed: the evaluation's synthetic set stays the same
    x = {"file": names.module_path(rng), "name": names.identifier(rng),
         "dir": names.dir_path(rng)}[want]
    if real and rng.random() < real.share:
        x = real.thing(rng, want)
    sys_msgs, tools = system_messages(rng, p_system)
    tool, args = call_args(kind, x)
    msgs = sys_msgs + [{"role": "user", "content": user_text(rng, kind, x, wide)},
                       call_message(tool, args)]
    return tokenizer.apply_chat_template(msgs, tools=tools, tokenize=False)


# ---- real repositories --------------------------------------------------------------------

def package_repos(roots: list[Path] | None = None, min_files: int = 3) -> list[Path]:
    """Package directories (with __init__.py and >= min_files .py files) used as repositories."""
    out = []
    for root in roots or corpus.source_roots():
        for d in sorted(p for p in root.iterdir() if p.is_dir()):
            if not (d / "__init__.py").exists() or d.name.startswith(("_", ".")):
                continue
            if d.name in ("test", "tests", "idlelib", "lib2to3", "clover_cli", "torch"):
                continue
            n = sum(1 for _ in d.rglob("*.py"))
            if min_files <= n <= 400:
                out.append(d)
    return out


def materialize(repo: Path, cache: Path | None = None) -> Path:
    """A standalone copy of a package tree (its .py files) outside any git work tree, so our
    tools see it as a repository of its own (site-packages sits inside ignored .venv dirs)."""
    import shutil
    import tempfile

    cache = Path(cache or Path(tempfile.gettempdir()) / "clover-train-repos")
    dest = cache / repo.name
    if (dest / ".complete").exists():
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    for p in sorted(repo.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        target = dest / p.relative_to(repo)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, target)
    (dest / ".complete").write_text("")
    (dest / ".gitignore").write_text(".complete\n.gitignore\n")
    return dest


def repo_split(repo: Path) -> str:
    """'eval' for whole held-out repositories (about 15%), else 'train'."""
    return "eval" if corpus.is_heldout("repo:" + repo.name, percent=15) else "train"


def is_heldout_repo(name: str) -> bool:
    """True for the names of held-out (evaluation) repositories."""
    return repo_split(Path(name)) == "eval"


class RepoIndex:
    """Small files, defined names and directories of one repository, for picking targets."""

    def __init__(self, repo: Path):
        self.repo = repo
        self.small_files: list[str] = []
        self.names: list[str] = []
        self.dirs: dict[str, int] = {}
        for p in sorted(repo.rglob("*.py")):
            if "__pycache__" in p.parts:
                continue
            rel = p.relative_to(repo).as_posix()
            text = corpus.read_source(p) or ""
            if 0 < text.count("\n") <= 30 and len(text) <= 1200:
                self.small_files.append(rel)
            self.names += names.DEF_RE.findall(text)
            parent = p.parent.relative_to(repo).as_posix()
            if parent != ".":
                self.dirs[parent] = self.dirs.get(parent, 0) + 1
        self.names = sorted(set(n for n in self.names if len(n) >= 4 and not n.startswith("__")))


def _run(tool: str, args: dict, root: Path):
    from clover_cli.tools.registry import run_tool

    return run_tool(tool, args, root, timeout=60)


def answer_text(rng: random.Random, kind: str, x: str, result) -> str | None:
    """A short answer grounded in the tool result; None when the result is unusable."""
    ans = requests()["answers"]
    if kind == "tests":  # a failing test run exits non-zero: its output is still the answer
        return sample_projects.tests_answer(rng, result.output, requests()["answers"])
    if not result.ok:
        return None
    out = result.output
    if kind == "show":
        n = sum(1 for line in out.splitlines() if re.match(r"^\s*\d+\t", line))
        return rng.choice(ans["show"]).format(FILE=x, N=n)
    if kind in ("define", "uses"):
        hits = _MATCH_RE.findall(out)
        if not hits:
            return rng.choice(ans[kind + "_none"]).format(X=x)
        if kind == "define":
            pat = re.compile(rf"(?:def|class)\s+{re.escape(x)}\b")
            for (f, line), text in zip(hits, out.splitlines()):
                if pat.search(text):
                    return rng.choice(ans["define"]).format(X=x, FILE=f, LINE=line)
            return None
        m = _SUMMARY_RE.search(out)
        if not m:
            return None
        return rng.choice(ans["uses"]).format(X=x, N=m.group(1), M=m.group(2), FILE=hits[0][0],
                                              LINE=hits[0][1])
    if kind == "list":
        files = [ln for ln in out.splitlines() if ln and not ln.startswith("[")]
        if not files:
            return None
        return rng.choice(ans["list"]).format(X=x, N=len(files), FILE=rng.choice(files))
    return None


def make_tests_transcript(rng: random.Random, cache: Path, p_system: float = 0.0,
                          max_result_chars: int = 2500) -> dict | None:
    """A "run the tests" transcript on a freshly generated repository (real pytest output)."""
    import os
    import sys

    # the tool's `python` must be this interpreter (it has pytest), as in a project venv
    bindir = str(Path(sys.executable).parent)
    if not os.environ.get("PATH", "").startswith(bindir + os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    name = "tests-" + names.identifier(rng, "snake")
    repo = sample_projects.make_test_repo(rng, Path(cache) / name)
    tool, args = call_args("tests", "")
    result = _run(tool, args, repo)
    if len(result.output) > max_result_chars:
        return None
    answer = answer_text(rng, "tests", "", result)
    if answer is None:
        return None
    sys_msgs, tools = system_messages(rng, p_system, str(repo))
    msgs = sys_msgs + [{"role": "user", "content": user_text(rng, "tests", "")},
                       call_message(tool, args),
                       {"role": "tool", "content": result.output},
                       {"role": "assistant", "content": answer}]
    return {"repo": name, "split": repo_split(repo), "kind": "tests", "x": args["command"],
            "tool": tool, "arguments": args, "result": result.output, "messages": msgs,
            "with_tools": tools is not None}


def make_transcript(rng: random.Random, repo: Path, index: RepoIndex, p_system: float = 0.0,
                    max_result_chars: int = 1500) -> dict | None:
    """One transcript dict {repo, split, kind, x, messages, tools} or None if no target fits."""
    kind = rng.choice(("show", "define", "define", "uses", "list"))
    pool = {"show": index.small_files, "define": index.names, "uses": index.names,
            "list": sorted(d for d, n in index.dirs.items() if n <= 20)}[kind]
    if not pool:
        return None
    x = rng.choice(pool)
    tool, args = call_args(kind, x)
    result = _run(tool, args, repo)
    if len(result.output) > max_result_chars:
        return None
    answer = answer_text(rng, kind, x, result)
    if answer is None:
        return None
    sys_msgs, tools = system_messages(rng, p_system, str(repo))
    msgs = sys_msgs + [{"role": "user", "content": user_text(rng, kind, x)},
                       call_message(tool, args),
                       {"role": "tool", "content": result.output},
                       {"role": "assistant", "content": answer}]
    return {"repo": repo.name, "split": repo_split(repo), "kind": kind, "x": x,
            "tool": tool, "arguments": args, "result": result.output, "messages": msgs,
            "with_tools": tools is not None}


def generate(out_file: Path, n: int, seed: int = 0, p_system: float = 0.2,
             repos: list[Path] | None = None, cache: Path | None = None,
             p_tests: float = 0.1) -> Iterator[dict]:
    """Write n transcripts (JSONL); yields each record. A share p_tests are "run the tests"
    transcripts on generated repositories (sample_projects.make_test_repo), the rest use the package
    repositories (p_tests=1.0: only test runs, no package repositories needed)."""
    import importlib.util
    import tempfile

    if p_tests > 0 and importlib.util.find_spec("pytest") is None:
        raise ValueError("'run the tests' transcripts run pytest: pip install 'clover-cli[train]' "
                         "(or pass --tests-share 0)")
    rng = random.Random(seed)
    cache = Path(cache or Path(tempfile.gettempdir()) / "clover-train-repos")
    repos = repos or (package_repos() if p_tests < 1.0 else [])
    if p_tests < 1.0 and not repos:
        raise ValueError("no package repositories found on this machine for transcripts")
    misses = 0
    indexes: dict[Path, RepoIndex] = {}
    out_file = Path(out_file)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    made = 0
    with open(out_file, "w", encoding="utf-8") as f:
        while made < n:
            if misses > 500:
                raise ValueError(f"transcript generation stalled: 500 attempts in a row gave "
                                 f"no usable transcript ({made} of {n} written)")
            if p_tests > 0 and rng.random() < p_tests:  # no draw at 0: old seeds reproduce
                rec = make_tests_transcript(rng, cache, p_system)
                if rec is not None:
                    rec["root"] = str(cache / rec["repo"])
            else:
                repo = materialize(rng.choice(repos), cache)
                if repo not in indexes:
                    indexes[repo] = RepoIndex(repo)
                rec = make_transcript(rng, repo, indexes[repo], p_system)
                if rec is not None:
                    rec["root"] = str(repo)
            if rec is None:
                misses += 1
                continue
            misses = 0
            f.write(json.dumps(rec) + "\n")
            made += 1
            yield rec


def render(tokenizer, rec: dict) -> str:
    """The rendered chat text of a transcript record (tools in the system section if present)."""
    tools = agent_prefix()[1] if rec.get("with_tools") else None
    return tokenizer.apply_chat_template(rec["messages"], tools=tools, tokenize=False)


def render_with_system(tokenizer, rec: dict) -> str:
    """The transcript as the agent sends it: its real system prompt (for the record's root) and
    tool schemas in front, whatever the record was generated with."""
    msgs = [m for m in rec["messages"] if m.get("role") != "system"]
    system = {"role": "system", "content": agent_system(rec.get("root") or "/repo")}
    return tokenizer.apply_chat_template([system] + msgs, tools=agent_prefix()[1], tokenize=False)


def load_records(path: Path, split: str | None = None) -> list[dict]:
    """Transcript records of one split ('train' | 'eval' | None for all)."""
    recs = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line]
    return [r for r in recs if split is None or r["split"] == split]


def load_rendered(path: Path, split: str, tokenizer=None, with_system: bool = False) -> list[str]:
    """Rendered transcript texts of one split (the JSONL carries 'text' when pre-rendered);
    with_system: each behind the agent's system prompt and tool schemas."""
    recs = load_records(path, split)
    if tokenizer is None:
        return [r["text"] for r in recs if "text" in r]
    if with_system:
        return [render_with_system(tokenizer, r) for r in recs]
    return [render(tokenizer, r) for r in recs]
