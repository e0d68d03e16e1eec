"""The store under test, on each backend: a SQLite file, and a real PostgreSQL server (a throwaway
cluster per session, emptied before each test; its cases skip, saying why, where there is none)."""

from __future__ import annotations

import pytest

from fixtures.postgres import empty_database


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def store_url(request, tmp_path) -> str:
    """The URL of an empty database on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    url = request.getfixturevalue("postgres_url")
    empty_database(url)
    return url


@pytest.fixture
def store(store_url):
    from qualflow.server.store import open_store

    s = open_store(store_url)
    yield s
    s.close()
