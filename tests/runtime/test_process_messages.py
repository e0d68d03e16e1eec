"""The engine pipes' wire (runtime.process.messages.send / recv): every message kind crosses a
real pipe unchanged, as the standard pickle, never through multiprocessing's ForkingPickler
(which copies its whole reducer table, torch's included, at every dump)."""

from __future__ import annotations

import multiprocessing
import pickle
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

from qualflow.runtime import GenerationRequest, SamplingParams
from qualflow.runtime.api.request import Thinking
from qualflow.runtime.process import messages as m

REQUEST = GenerationRequest(
    "r-1",
    [1, 2, 3],
    SamplingParams(max_new_tokens=4, temperature=0, ignore_eos=True),
    thinking=Thinking(budget=8),
)
MESSAGES = [
    m.Submit(3, REQUEST, 123),
    m.Cancel("r-1"),
    m.Score(4, [5, 6]),
    m.Stop(),
    m.Loaded({"load_s": 1.5}, {"device": "cpu"}),
    m.LoadFailed("no bundle", True),
    m.Step({3: [7, 8]}, [m.Finished(3, "length", None, 1, 2, 3, 4)]),
    m.Step(),
    m.Failed("the engine thread died"),
    m.Closed(),
]


@pytest.fixture
def pipe():
    rx, tx = multiprocessing.get_context("spawn").Pipe(duplex=False)
    yield rx, tx
    rx.close()
    tx.close()


def test_every_message_crosses_the_pipe_unchanged_as_the_standard_pickle(pipe, monkeypatch):
    rx, tx = pipe

    def refuse(*_a, **_k):
        raise AssertionError("ForkingPickler used on the engine pipe")

    monkeypatch.setattr(ForkingPickler, "dumps", classmethod(refuse))
    for msg in MESSAGES:
        m.send(tx, msg)
        assert m.recv(rx) == msg
    m.send(tx, MESSAGES[0])
    assert pickle.loads(rx.recv_bytes()) == MESSAGES[0]  # what lies on the pipe is plain pickle


def test_scored_logits_cross_as_an_array(pipe):
    rx, tx = pipe
    logits = np.arange(12, dtype=np.float32).reshape(3, 4)
    m.send(tx, m.Scored(2, logits))
    got = m.recv(rx)
    assert got.call == 2 and got.error is None and np.array_equal(got.logits, logits)


def test_a_closed_pipe_raises_what_the_callers_catch(pipe):
    rx, tx = pipe
    tx.close()
    with pytest.raises(EOFError):
        m.recv(rx)
    with pytest.raises((OSError, ValueError)):
        m.send(tx, m.Stop())
