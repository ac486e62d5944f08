"""SWE-bench-style instances: a JSON list, JSONL or parquet file, or a dataset, read tolerantly.

The official dataset files load as published: parquet (through pyarrow, when installed), JSON,
JSONL, with FAIL_TO_PASS / PASS_TO_PASS as JSON-encoded strings or as lists. A dataset name
(`princeton-nlp/SWE-bench_Verified`) loads through the `datasets` package, which needs the
network the first time (it is imported only then; tests never do).

A malformed line or entry never stops the batch: it comes back as an `InstanceError` with the
line number, and every good instance is still returned.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement")


@dataclass(frozen=True)
class Instance:
    """One task: a repository at a commit and a problem statement (SWE-bench field names)."""

    instance_id: str
    repo: str  # "owner/name"
    base_commit: str
    problem_statement: str
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    test_patch: str = ""
    version: str = ""
    extra: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def repo_folder(self) -> str:
        """The `--repos-dir` folder name for this repository: owner/name -> owner__name."""
        return self.repo.replace("/", "__")


@dataclass(frozen=True)
class InstanceError:
    """An entry that could not be read; `where` is "line N" or "entry N"."""

    where: str
    message: str
    instance_id: str | None = None

    def key(self) -> str:
        """The id this error is reported under."""
        return self.instance_id or self.where


class InstanceFileError(ValueError):
    """The file as a whole cannot be read (missing, not JSON at all); one line for the user."""


def _test_list(value, name: str) -> tuple[str, ...]:
    # SWE-bench stores FAIL_TO_PASS / PASS_TO_PASS as a JSON-encoded string of a list.
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"{name} is a string but not a JSON list") from None
    if isinstance(value, tuple) or type(value).__name__ == "ndarray":
        value = list(value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name} must be a list of test ids")
    return tuple(value)


def instance_from_dict(data) -> Instance:
    """Build an Instance from one decoded entry; raises ValueError with a one-line reason."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    missing = [k for k in REQUIRED if not isinstance(data.get(k), str) or not data.get(k).strip()]
    if missing:
        raise ValueError("missing or empty field(s): " + ", ".join(missing))
    repo = data["repo"].strip()
    if repo.count("/") != 1 or not all(repo.split("/")) or ".." in repo:
        raise ValueError(f"repo {repo!r} is not owner/name")
    test_patch = data.get("test_patch") or ""
    if not isinstance(test_patch, str):
        raise ValueError("test_patch must be a string")
    known = set(REQUIRED) | {"FAIL_TO_PASS", "PASS_TO_PASS", "test_patch", "version"}
    return Instance(
        instance_id=data["instance_id"].strip(),
        repo=repo,
        base_commit=data["base_commit"].strip(),
        problem_statement=data["problem_statement"],
        fail_to_pass=_test_list(data.get("FAIL_TO_PASS"), "FAIL_TO_PASS"),
        pass_to_pass=_test_list(data.get("PASS_TO_PASS"), "PASS_TO_PASS"),
        test_patch=test_patch,
        version=str(data.get("version") or ""),
        extra={k: v for k, v in data.items() if k not in known},
    )


def _entry_id(data) -> str | None:
    if isinstance(data, dict) and isinstance(data.get("instance_id"), str):
        return data["instance_id"].strip() or None
    return None


def parse_instances(text: str) -> tuple[list[Instance], list[InstanceError]]:
    """Parse a JSON list or JSONL text into instances and per-entry errors.

    Duplicate instance ids: the first wins, later ones are reported as errors.
    """
    stripped = text.lstrip()
    entries: list[tuple[str, object]] = []
    errors: list[InstanceError] = []
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InstanceFileError(f"the file looks like a JSON list but is not valid JSON: {exc}") from None
        entries = [(f"entry {i + 1}", item) for i, item in enumerate(data)]
    else:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entries.append((f"line {lineno}", json.loads(line)))
            except json.JSONDecodeError as exc:
                errors.append(InstanceError(f"line {lineno}", f"not valid JSON: {exc.msg}"))
    instances: list[Instance] = []
    seen: set[str] = set()
    for where, item in entries:
        try:
            inst = instance_from_dict(item)
        except ValueError as exc:
            errors.append(InstanceError(where, str(exc), _entry_id(item)))
            continue
        if inst.instance_id in seen:
            errors.append(InstanceError(where, f"duplicate instance_id {inst.instance_id!r}"))
            continue
        seen.add(inst.instance_id)
        instances.append(inst)
    return instances, errors


def load_instances(path: Path) -> tuple[list[Instance], list[InstanceError]]:
    """Read an instances file; raises InstanceFileError if it cannot be read at all."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InstanceFileError(f"instances file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InstanceFileError(f"cannot read instances file {path}: {exc}") from None
    return parse_instances(text)


def rows_to_instances(rows) -> tuple[list[Instance], list[InstanceError]]:
    """Instances from decoded rows (dicts), with the same checks as a file."""
    text_free: list[Instance] = []
    errors: list[InstanceError] = []
    seen: set[str] = set()
    for i, item in enumerate(rows):
        try:
            inst = instance_from_dict(dict(item) if hasattr(item, "keys") else item)
        except ValueError as exc:
            errors.append(InstanceError(f"row {i + 1}", str(exc), _entry_id(item)))
            continue
        if inst.instance_id in seen:
            errors.append(InstanceError(f"row {i + 1}", f"duplicate instance_id {inst.instance_id!r}"))
            continue
        seen.add(inst.instance_id)
        text_free.append(inst)
    return text_free, errors


def load_parquet(path: Path) -> tuple[list[Instance], list[InstanceError]]:
    """A parquet dataset file (as published on the Hugging Face hub), through pyarrow."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InstanceFileError("reading parquet needs pyarrow (pip install pyarrow), "
                                "or convert the file to JSONL") from None
    try:
        rows = pq.read_table(str(path)).to_pylist()
    except FileNotFoundError:
        raise InstanceFileError(f"instances file not found: {path}") from None
    except Exception as exc:  # pyarrow's own errors: not parquet, truncated
        raise InstanceFileError(f"cannot read parquet file {path}: {str(exc).splitlines()[0]}") from None
    return rows_to_instances(rows)


def load_dataset_rows(name: str, split: str = "test") -> tuple[list[Instance], list[InstanceError]]:
    """A dataset by name through the `datasets` package (needs the network, or its cache)."""
    try:
        import datasets  # optional; heavy, so imported only here
    except ImportError:
        raise InstanceFileError("--dataset needs the datasets package (pip install datasets), "
                                "or download the dataset file and pass --instances") from None
    try:
        rows = datasets.load_dataset(name, split=split)
    except Exception as exc:  # offline, unknown name, unknown split
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InstanceFileError(f"cannot load dataset {name!r} (split {split!r}): {first[:200]}") from None
    return rows_to_instances(list(rows))


def load_any(path: Path | None, dataset: str | None = None,
             split: str = "test") -> tuple[list[Instance], list[InstanceError]]:
    """--instances FILE (.parquet, .json, .jsonl) or --dataset NAME."""
    if dataset:
        return load_dataset_rows(dataset, split)
    if path is None:
        raise InstanceFileError("give --instances FILE or --dataset NAME")
    if Path(path).suffix == ".parquet":
        return load_parquet(Path(path))
    return load_instances(Path(path))
