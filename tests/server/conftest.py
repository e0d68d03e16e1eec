"""Fixtures of the server tests: a real PostgreSQL server (a throwaway cluster per test session,
started on first use; the tests using it are the integration layer's, and skip, saying why, where
PostgreSQL cannot be installed or started)."""

from __future__ import annotations

import pytest

from fixtures.postgres import start_postgres, stop_postgres


@pytest.fixture(scope="session")
def postgres_url():
    url, env = start_postgres()
    yield url
    stop_postgres(env)
