"""Synthetic identifiers and paths that cannot be memorised (for the copy curriculum)."""
from __future__ import annotations

import random

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
