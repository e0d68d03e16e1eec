"""Opening the database behind the store: a SQLite file (WAL, synchronous=FULL: a commit has reached
the disk when it returns) or a PostgreSQL server through psycopg 3. Errors name the URL without its
password."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine, make_url

from .errors import StoreOpenError

WRITE = "qualflow_write"  # execution option of a connection whose transaction writes
BUSY_TIMEOUT_S = 30.0  # a SQLite writer waits this long for another one's lock
CONNECT_TIMEOUT_S = 10  # PostgreSQL: give up on an unreachable server after this


def parse_url(url: str) -> URL:
    """The SQLAlchemy URL of a store URL: `sqlite:///path`, `postgresql://…` (driven by psycopg 3;
    `postgres://` too), or a bare file path, taken as a SQLite file."""
    if "://" not in url:
        return URL.create("sqlite", database=str(Path(url)))
    try:
        parsed = make_url(url)
    except Exception as e:
        raise StoreOpenError(f"cannot parse the response store URL {scrub(url)!r}: {e}") from None
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise StoreOpenError(
                f"the response store needs a SQLite file, not {redacted(parsed)!r}"
            )
        return parsed
    raise StoreOpenError(
        f"unsupported response store URL {redacted(parsed)!r} (sqlite:///FILE or "
        "postgresql://USER@HOST/DB)"
    )


def redacted(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def scrub(text: str, url: URL | None = None) -> str:
    """`text` with the URL's password (if any) masked."""
    if url is not None and url.password:
        text = text.replace(str(url.password), "***")
    return text


def open_engine(url: str) -> Engine:
    """A connected engine for the store URL; StoreOpenError (URL without password) if it cannot
    be."""
    parsed = parse_url(url)
    try:
        if parsed.get_backend_name() == "sqlite":
            engine = _sqlite_engine(parsed)
        else:
            engine = sa.create_engine(
                parsed, pool_pre_ping=True, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}
            )
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except Exception as e:
        reason = scrub(str(getattr(e, "orig", None) or e).strip(), parsed)
        raise StoreOpenError(
            f"cannot open the response store at {redacted(parsed)}: {reason}"
        ) from None
    return engine


def _sqlite_engine(url: URL) -> Engine:
    folder = Path(url.database).expanduser().resolve().parent
    if not folder.is_dir():
        raise StoreOpenError(
            f"cannot open the response store at {redacted(url)}: no folder {folder}"
        )
    engine = sa.create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # the driver's own BEGIN is off: _on_begin emits ours
        cur = dbapi_conn.cursor()
        mode = cur.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreOpenError(f"{redacted(url)}: SQLite refused WAL mode (journal_mode={mode})")
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection):
        # a writing transaction takes the write lock at BEGIN, so it waits (busy timeout) for
        # another writer instead of failing when it upgrades from reading; readers never block (WAL)
        conn.exec_driver_sql(
            "BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE) else "BEGIN"
        )

    return engine


@contextlib.contextmanager
def write_tx(engine: Engine) -> Iterator[Connection]:
    """A transaction that writes: committed when the block ends, rolled back if it raises."""
    with engine.connect() as conn:
        conn.execution_options(**{WRITE: True})
        with conn.begin():
            yield conn


@contextlib.contextmanager
def read_tx(engine: Engine) -> Iterator[Connection]:
    """A read-only transaction (one consistent snapshot)."""
    with engine.connect() as conn, conn.begin():
        yield conn
