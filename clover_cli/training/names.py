"""Synthetic identifiers and paths that cannot be memorised (for the copy curriculum)."""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

_SYL = ("ba be bi bo bu ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu ra re ri ro "
        "ru sa se si so su ta te ti to tu va ve vi vo za ze zo qui xan dor fel gri hub jin kor "
        "lum mox nef pax rum sil tov wex yar zun").split()
_WORDS = ("data item node value user config cache parse load save read write build make get set "
          "file path name list dict table row col key token block model event task job queue "
          "handler client server request response index count total size buffer stream line "
          "text word char byte field record entry group filter sort merge split join check "
          "update delete create apply render format encode decode open close start stop run").split()


def word(rng: random.Random) -> str:
    """A pronounceable nonsense word or a common programming word."""
    if rng.random() < 0.5:
        return rng.choice(_WORDS)
    return "".join(rng.choice(_SYL) for _ in range(rng.randint(1, 3)))


def identifier(rng: random.Random, style: str | None = None) -> str:
    """snake_case function/variable name or CamelCase class name."""
    style = style or rng.choice(("snake", "snake", "camel", "private"))
    parts = [word(rng) for _ in range(rng.randint(1, 3))]
    if style == "camel":
        return "".join(p.capitalize() for p in parts)
    name = "_".join(parts)
    return "_" + name if style == "private" else name


def module_path(rng: random.Random, ext: str = ".py") -> str:
    """A relative path like pkg/sub/mod_name.py."""
    dirs = [word(rng) for _ in range(rng.randint(0, 2))]
    return "/".join(dirs + [identifier(rng, "snake") + ext])


def dir_path(rng: random.Random) -> str:
    """A relative directory path like pkg/sub."""
    return "/".join(word(rng) for _ in range(rng.randint(1, 2)))


# ---- real names (the training split's packages) ---------------------------------------------
#
# Copy data drawn only from the syllables and words above taught the bundled model to copy
# those names (43% of synthetic calls exact) but not real ones: a held-out `TableHeaderElement`
# came out as `Tableildildue`. Copying a token needs that token's own embedding -> logit path,
# which only forms for tokens the copy data contains (Olsson et al. 2022 on induction heads'
# "copying" OV circuits). So copy and call data also draw real identifiers and paths.

# def/class names in Python source (also the transcripts' repository index)
DEF_RE = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M)


@dataclass(frozen=True)
class RealNames:
    """Names from real packages: identifiers (def/class names), module paths and directory
    paths relative to their package, as a repository's tools would show them. `share`: the
    share of names its consumers (copy and call data) draw from it rather than synthesise."""
    identifiers: tuple[str, ...]
    modules: tuple[str, ...]
    dirs: tuple[str, ...]
    share: float = 0.5
    words: tuple[str, ...] = ()  # the tokenizer's word tokens (vocab_words), for vocab_thing
    word_share: float = 0.0  # share of this pool's draws built from `words` instead

    def __bool__(self) -> bool:
        return bool(self.identifiers or self.modules or self.dirs or self.words)

    def thing(self, rng: random.Random, kind: str | None = None) -> str:
        """One name of a kind ("name" | "file" | "dir"; default 50/30/20): word_share of the
        time built from vocabulary words, else a real one, falling back to the synthetic kind
        when the pool has none of it."""
        if kind is None:
            r = rng.random()
            kind = "name" if r < 0.5 else "file" if r < 0.8 else "dir"
        if self.words and rng.random() < self.word_share:
            return vocab_thing(rng, self.words, kind)
        pick = {"name": self.identifiers, "file": self.modules, "dir": self.dirs}[kind]
        if pick:
            return rng.choice(pick)
        return {"name": identifier, "file": module_path, "dir": dir_path}[kind](rng)


def harvest(roots: list[Path] | None = None, max_files: int = 3000, seed: int = 0,
            exclude_repo: Callable[[str], bool] | None = None, share: float = 0.5,
            per_package: int = 80) -> RealNames:
    """Real names from up to max_files files of the code corpus's training split, at most
    per_package files of any one top-level package (on this machine transformers, torch and
    sympy hold 62% of the files, and a model trained on an unbalanced pool wrote `add_integral`
    for `add_pending`), skipping packages for which exclude_repo(name) is true (the held-out
    transcript repositories, so evaluation names stay unseen by the copy data)."""
    from clover_cli.training import corpus

    by_pkg: dict[str, list[tuple[Path, Path]]] = {}
    for root in roots or corpus.source_roots():
        for path in corpus.python_files([root], split="train"):
            rel = path.relative_to(root)
            if len(rel.parts) < 2 or (exclude_repo and exclude_repo(rel.parts[0])):
                continue
            by_pkg.setdefault(rel.parts[0], []).append((path, rel))
    rng = random.Random(seed)
    found = [f for pkg in sorted(by_pkg) for f in (
        by_pkg[pkg] if len(by_pkg[pkg]) <= per_package else rng.sample(by_pkg[pkg], per_package))]
    if len(found) > max_files:
        found = rng.sample(found, max_files)
    idents: set[str] = set()
    mods: set[str] = set()
    dirs: set[str] = set()
    for path, rel in found:
        inner = Path(*rel.parts[1:])  # relative to the package = the repository root
        if len(inner.parts) <= 3:  # paths as users type them, not 6-deep vendored trees
            mods.add(inner.as_posix())
        if len(inner.parts) > 1:
            dirs.add(inner.parent.as_posix())
        text = corpus.read_source(path)
        if text:
            idents.update(n for n in DEF_RE.findall(text) if len(n) > 2 and n != "__init__")
    return RealNames(tuple(sorted(idents)), tuple(sorted(mods)), tuple(sorted(dirs)), share)


# ---- names built from the tokenizer's own words ---------------------------------------------
#
# Real names fixed copying only for the tokens they contain often: measured on the fourth model
# (teacher-forced copy of a one-token-plus-syllable name, 300 word tokens), a token never seen
# in the real-name pool was copied 0% of the time, one seen 3-9 times 16%, 10-49 times 63%,
# 50+ times 100% -- held-out `ptr_type` came out as `nth_type`. So a share of copy/call names
# is built from word tokens drawn uniformly from the vocabulary: every token gets copy practice.

_WORD_TOKEN = re.compile(r"[A-Za-z]{2,}")


def vocab_words(tokenizer) -> tuple[str, ...]:
    """The tokenizer's purely alphabetic tokens (2+ letters; no special or byte-marker tokens),
    each a piece a name can be built from."""
    vocab = tokenizer.get_vocab()
    return tuple(sorted(t for t in vocab if _WORD_TOKEN.fullmatch(t)))


COMPOUND = 1 / 3  # share of word joins in vocab_thing with no separator


def vocab_thing(rng: random.Random, words: tuple[str, ...], kind: str = "name") -> str:
    """A name of a kind whose parts are vocabulary words drawn uniformly: snake_case, CamelCase
    or _private identifiers of 1-3 words; pkg/mod.py files; 1-2 part directories.

    A third of the joins inside a snake_case name and of the path parts are compounds of two
    words with nothing between them (`shelf` is `sh`+`elf`, `prices` is `pr`+`ices` in the
    bundled tokenizer): the fifth model copied `_`-joined word tokens but mangled such pieces
    (`restock_shelf` -> `siock_shRep`, `shop/prices.py` -> `shop/prion.py`)."""
    def compound() -> str:
        return rng.choice(words) + (rng.choice(words).lower() if rng.random() < COMPOUND else "")

    def ident(style: str) -> str:
        parts = [rng.choice(words) for _ in range(rng.randint(1, 3))]
        if style == "camel":
            return "".join(p[:1].upper() + p[1:] for p in parts)
        out = parts[0]
        for p in parts[1:]:
            out += ("" if rng.random() < COMPOUND else "_") + p
        return ("_" if style == "private" else "") + out

    if kind == "name":
        return ident(rng.choice(("snake", "snake", "camel", "private")))
    if kind == "file":
        return "/".join([compound() for _ in range(rng.randint(0, 2))] + [ident("snake")]) + ".py"
    return "/".join(compound() for _ in range(rng.randint(1, 2)))
