"""The repo map's cache: one SQLite file per repository in the user's cache dir, never in the
repository (docs/security.md: a cloned repository is untrusted content, so nothing Clover reads
back as its own state may live inside it), and no pickle.

    $XDG_CACHE_HOME/clover/repos/<name>-<hash>/repomap/cache.sqlite

Three tables: each file's tags keyed by (path, mtime, size); the ranking graph built for one
exact set of files (raw numeric arrays back to back, laid out by a JSON header); the last
few rendered maps. Every value carries a CRC-32 and is checked for shape and range on load. A
value that fails is a miss (that file is parsed again, the graph rebuilt); a database SQLite
cannot read is deleted and recreated. A cache can make a map slower, never wrong or fatal.
"""
from __future__ import annotations

import json
import os
import sqlite3
import zlib
from pathlib import Path

from ..statedir import repo_cache_dir

SCHEMA = 7  # bump when any stored layout changes; an older file is dropped and rebuilt
KEEP_RESULTS = 16
_TABLES = (
    "CREATE TABLE IF NOT EXISTS tags (rel TEXT PRIMARY KEY, mtime INTEGER, size INTEGER,"
    " defs TEXT, ref_names TEXT, ref_counts BLOB, crc INTEGER)",
    "CREATE TABLE IF NOT EXISTS graph (id INTEGER PRIMARY KEY, sig TEXT, meta TEXT,"
    " arrays BLOB, crc INTEGER)",
    "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, used INTEGER, value TEXT,"
    " crc INTEGER)",
)


def crc(*parts: bytes | str | None) -> int:
    """CRC-32 over the parts (strings as UTF-8, None as empty), each followed by a separator."""
    value = 0
    for part in parts:
        if isinstance(part, str):
            part = part.encode("utf-8", "surrogatepass")
        value = zlib.crc32(part or b"", value)
        value = zlib.crc32(b"\x1f", value)
    return value


_DTYPES = {"<i4", "<i8", "<f8"}


def _arrays_from(blob: bytes, layout: dict) -> dict:
    """Arrays laid out by save_graph; ValueError when the layout does not fit the blob."""
    import numpy as np
    out = {}
    for name, (dtype, count, offset) in layout.items():
        if dtype not in _DTYPES or type(count) is not int or type(offset) is not int:
            raise ValueError(name)
        size = np.dtype(dtype).itemsize * count
        if count < 0 or offset < 0 or offset + size > len(blob):
            raise ValueError(name)
        out[name] = np.frombuffer(blob, dtype=dtype, count=count, offset=offset)
    return out


def _storable(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeError:
        return False


class Store:
    """Opened lazily; every operation degrades to "no cache" instead of raising."""

    def __init__(self, root: Path):
        self.path = repo_cache_dir(root, "repomap", create=False) / "cache.sqlite"
        self._conn: sqlite3.Connection | None = None
        self.rebuilt = False  # set when a damaged cache was thrown away during this run

    # -- connection -------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        conn = sqlite3.connect(self.path, timeout=2.0, isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous=OFF")  # a cache: a torn write is caught and rebuilt
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:
                for table in ("tags", "graph", "results"):
                    conn.execute(f"DROP TABLE IF EXISTS {table}")
                for ddl in _TABLES:
                    conn.execute(ddl)
                conn.execute(f"PRAGMA user_version={SCHEMA}")
            return conn
        except BaseException:
            conn.close()
            raise

    def conn(self) -> sqlite3.Connection | None:
        if self._conn is None:
            try:
                self._conn = self._open()
            except sqlite3.Error:
                self.reset()
                try:
                    self._conn = self._open()
                except (sqlite3.Error, OSError):
                    return None
            except OSError:
                return None
        return self._conn

    def reset(self) -> None:
        """Throw the database away (it is unreadable); the next call starts a fresh one."""
        self.rebuilt = True
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except OSError:
                pass

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _run(self, fn, default):
        """fn(conn) with any SQLite failure turned into a reset and `default`."""
        conn = self.conn()
        if conn is None:
            return default
        try:
            return fn(conn)
        except sqlite3.OperationalError as exc:  # locked by another process: just skip
            if "locked" in str(exc) or "busy" in str(exc):
                return default
            self.reset()
            return default
        except sqlite3.Error:
            self.reset()
            return default
        except UnicodeError:  # a name SQLite cannot store (undecodable file name): not cached
            return default

    # -- per-file tags ------------------------------------------------------------------------
    def load_tags(self) -> dict[str, tuple[int, int, tuple | None]]:
        """{rel: (mtime_ns, size, row)} for every row whose CRC matches; row is
        (defs_json, ref_names, ref_counts) or None for a file with no tags."""
        def fn(conn):
            out = {}
            for rel, mtime, size, defs, names, counts, check in conn.execute(
                    "SELECT rel, mtime, size, defs, ref_names, ref_counts, crc FROM tags"):
                if not isinstance(rel, str) or check != crc(rel, str(mtime), str(size), defs,
                                                            names, counts):
                    continue
                out[rel] = (mtime, size, None if defs is None else (defs, names, counts))
            return out
        return self._run(fn, {})

    def save_tags(self, rows: dict[str, tuple[int, int, tuple | None]], keep: set[str]) -> None:
        """Upsert `rows` and delete every file not in `keep`."""
        def fn(conn):
            conn.execute("BEGIN")
            try:
                data = []
                for rel, (mtime, size, row) in rows.items():
                    if not _storable(rel):
                        continue
                    defs, names, counts = row if row is not None else (None, None, None)
                    data.append((rel, mtime, size, defs, names, counts,
                                 crc(rel, str(mtime), str(size), defs, names, counts)))
                conn.executemany("INSERT OR REPLACE INTO tags VALUES (?,?,?,?,?,?,?)", data)
                gone = [(r,) for (r,) in conn.execute("SELECT rel FROM tags") if r not in keep]
                conn.executemany("DELETE FROM tags WHERE rel=?", gone)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        self._run(fn, None)

    # -- the ranking graph ----------------------------------------------------------------------
    def load_graph(self, sig: str) -> tuple[dict, dict] | None:
        """(meta, arrays) stored for exactly this signature, CRC-checked, or None."""
        def fn(conn):
            row = conn.execute("SELECT sig, meta, arrays, crc FROM graph WHERE id=1").fetchone()
            if row is None or row[0] != sig or row[3] != crc(row[0], row[1], row[2]):
                return None
            try:
                meta = json.loads(row[1])
                return meta, _arrays_from(row[2], meta.pop("arrays"))
            except (ValueError, TypeError, KeyError, AttributeError):
                return None  # any damage is a miss; the graph is rebuilt
        return self._run(fn, None)

    def save_graph(self, sig: str, meta: dict, arrays: dict) -> None:
        layout, parts, offset = {}, [], 0
        for name, arr in arrays.items():  # raw little-endian arrays back to back, no pickle
            data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
            layout[name] = [arr.dtype.newbyteorder("<").str, int(arr.size), offset]
            parts.append(data)
            offset += len(data)
        blob = b"".join(parts)
        text = json.dumps({**meta, "arrays": layout}, ensure_ascii=False)
        self._run(lambda conn: conn.execute(
            "INSERT OR REPLACE INTO graph VALUES (1,?,?,?,?)",
            (sig, text, blob, crc(sig, text, blob))), None)

    # -- rendered maps ---------------------------------------------------------------------------
    def get_result(self, key: str) -> tuple[str, dict] | None:
        def fn(conn):
            row = conn.execute("SELECT value, crc FROM results WHERE key=?", (key,)).fetchone()
            if row is None or row[1] != crc(key, row[0]):
                return None
            try:
                text, details = json.loads(row[0])
            except (ValueError, TypeError):
                return None
            if not isinstance(text, str) or not isinstance(details, dict):
                return None
            return text, details
        return self._run(fn, None)

    def put_result(self, key: str, value: tuple[str, dict]) -> None:
        text = json.dumps(list(value), ensure_ascii=False)

        def fn(conn):
            conn.execute("BEGIN")
            try:
                used = conn.execute("SELECT COALESCE(MAX(used), 0) + 1 FROM results").fetchone()[0]
                conn.execute("INSERT OR REPLACE INTO results VALUES (?,?,?,?)",
                             (key, used, text, crc(key, text)))
                conn.execute("DELETE FROM results WHERE used <= ?", (used - KEEP_RESULTS,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        self._run(fn, None)
