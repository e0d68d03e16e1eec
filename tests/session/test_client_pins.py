"""Client tools at their pinned versions: a mismatch is an error, or with allow_unpinned a reason
that caps the status."""

from __future__ import annotations

import pytest

from fixtures import REPO
from qualflow.session.client_pins import PINNED_OPENAI, ClientPinError, check_openai, check_pin


def test_the_pinned_version_passes():
    assert check_pin("aiperf", "0.13.0", "0.13.0", allow_unpinned=False) == []
    assert (
        check_openai(allow_unpinned=False) == []
    )  # the installed SDK is the pinned one (pyproject)


def test_a_mismatch_is_refused_or_capped():
    with pytest.raises(ClientPinError, match="aiperf 0.14.0 is not the pinned aiperf==0.13.0"):
        check_pin("aiperf", "0.14.0", "0.13.0", allow_unpinned=False)
    assert check_pin("openai", "3.0.0", PINNED_OPENAI, allow_unpinned=True) == [
        f"openai 3.0.0 is not the pinned openai=={PINNED_OPENAI} (allowed by allow_unpinned_client)"
    ]


def test_the_pins_match_the_project_dependencies():
    import tomllib

    from qualflow.aiperf.command import PINNED_AIPERF

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"aiperf=={PINNED_AIPERF}" in deps and f"openai=={PINNED_OPENAI}" in deps
