""""Run the tests" training data: small generated Python projects (a package and a pytest
suite, sometimes one buggy function) and the grounded answer to their real pytest output. The
transcripts around them are built in transcripts.py."""
from __future__ import annotations

import random
import re
from pathlib import Path

from clover_cli.training import names

# (function body, test expression) templates; {f} is the function's name. The buggy body makes
# the test fail (a repository with a failing test).
_FUNCS = (
    ("def {f}(a, b):\n    return a + b\n", "def {f}(a, b):\n    return a - b\n",
     "{f}(2, 3) == 5"),
    ("def {f}(n):\n    return n * n\n", "def {f}(n):\n    return n * 2\n", "{f}(4) == 16"),
    ("def {f}(text):\n    return text.strip().lower()\n",
     "def {f}(text):\n    return text.lower()\n", "{f}('  Hi ') == 'hi'"),
    ("def {f}(items):\n    return [x for x in items if x]\n",
     "def {f}(items):\n    return list(items)\n", "{f}([0, 1, '', 'a']) == [1, 'a']"),
    ("def {f}(value, low, high):\n    return max(low, min(high, value))\n",
     "def {f}(value, low, high):\n    return min(low, max(high, value))\n",
     "{f}(15, 0, 10) == 10"),
    ("def {f}(words):\n    return ' '.join(reversed(words))\n",
     "def {f}(words):\n    return ' '.join(words)\n", "{f}(['a', 'b']) == 'b a'"),
    ("def {f}(d, key, default=None):\n    return d[key] if key in d else default\n",
     "def {f}(d, key, default=None):\n    return d.get(key)\n", "{f}({{}}, 'k', 3) == 3"),
)
_SUMMARY_LINE_RE = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s", re.M)
_FAILED_RE = re.compile(r"^FAILED (\S+?)::(\w+)", re.M)


def make_test_repo(rng: random.Random, dest: Path) -> Path:
    """A small Python project with a package and a pytest suite; sometimes one function is buggy
    so that its test fails. Returns dest."""
    import shutil

    if dest.exists():
        shutil.rmtree(dest)
    pkg = names.identifier(rng, "snake")
    (dest / pkg).mkdir(parents=True)
    (dest / pkg / "__init__.py").write_text("")
    (dest / "tests").mkdir()
    for _ in range(rng.randint(1, 2)):
        mod = names.identifier(rng, "snake")
        funcs = rng.sample(_FUNCS, rng.randint(2, 4))
        fnames = list(dict.fromkeys(names.identifier(rng, "snake") for _ in funcs))
        bug = rng.randrange(len(fnames)) if rng.random() < 0.4 else -1
        src, tests = [], [f"from {pkg}.{mod} import {', '.join(fnames)}\n"]
        for i, (f, (good, bad, check)) in enumerate(zip(fnames, funcs)):
            src.append((bad if i == bug else good).format(f=f))
            tests.append(f"def test_{f}():\n    assert {check.format(f=f)}\n")
        (dest / pkg / f"{mod}.py").write_text("\n\n".join(src))
        (dest / "tests" / f"test_{mod}.py").write_text("\n\n".join(tests))
    return dest


def tests_answer(rng: random.Random, out: str, ans: dict) -> str | None:
    """'The tests pass: 4 passed.' or the summary and the first failing test, from pytest -q;
    ans: the answer templates of requests.json ("tests_pass", "tests_fail")."""
    m = _SUMMARY_LINE_RE.search(out)
    if not m:
        return None
    summary = m.group(1).strip().rstrip(",")
    failed = _FAILED_RE.search(out)
    if "failed" not in summary:
        return rng.choice(ans["tests_pass"]).format(SUMMARY=summary)
    if not failed:
        return None
    return rng.choice(ans["tests_fail"]).format(SUMMARY=summary, FILE=failed.group(1),
                                                TEST=failed.group(2))
