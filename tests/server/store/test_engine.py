"""Opening the store: SQLite's durability settings, the URLs accepted, and errors that name the URL
without its password."""

from __future__ import annotations

import pytest

from fixtures.postgres import free_port
from qualflow.server.store import StoreOpenError, open_store


def test_sqlite_is_wal_with_full_synchronous_commits_and_foreign_keys(tmp_path):
    store = open_store(str(tmp_path / "s.db"))  # a bare path is a SQLite file
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        store.close()
    assert (tmp_path / "s.db").exists()


def test_a_sqlite_file_in_a_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(StoreOpenError, match="no folder"):
        open_store(f"sqlite:///{tmp_path}/missing/s.db")


@pytest.mark.parametrize(
    "url, match",
    [
        ("sqlite://", "needs a SQLite file"),
        ("sqlite:///:memory:", "needs a SQLite file"),
        ("mysql://u:hunter2@h/db", "unsupported response store URL"),
    ],
)
def test_unsupported_urls_are_refused(url, match):
    with pytest.raises(StoreOpenError, match=match) as e:
        open_store(url)
    assert "hunter2" not in str(e.value)


def test_an_unreachable_server_is_named_without_its_password():
    url = f"postgresql://alice:hunter2@127.0.0.1:{free_port()}/qualflow"
    with pytest.raises(StoreOpenError) as e:
        open_store(url)
    message = str(e.value)
    assert "hunter2" not in message
    assert f"alice:***@127.0.0.1:{url.rsplit(':', 1)[1].split('/')[0]}/qualflow" in message


def test_a_missing_database_on_a_real_server_is_named_without_its_password(postgres_url):
    url = postgres_url.replace("qualflow@", "qualflow:hunter2@").rsplit("/", 1)[0] + "/no_such_db"
    with pytest.raises(StoreOpenError, match="no_such_db") as e:
        open_store(url)
    assert "hunter2" not in str(e.value)
