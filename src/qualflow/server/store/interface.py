"""The one interface of the response store. Every method is synchronous and blocking (a database
round trip, a commit's fsync): the server calls it off the event loop, through AsyncStore
(asyncio.to_thread), never on the loop itself.

Every read and write is scoped by `owner` (records.owner_of): an object of another owner is
reported NotFound, exactly as an unknown id. Items are JSON objects with an `id` and a `type`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .records import JSON, Chain, Conversation, ConversationItem, Order, Page, StoredResponse

DEFAULT_LIMIT, MAX_LIMIT = 20, 100  # OpenAI's list pagination: limit 1..100, default 20


@runtime_checkable
class ResponseStore(Protocol):
    # --- responses ---------------------------------------------------------------------------
    def put(
        self, response: StoredResponse, inputs: Sequence[JSON], outputs: Sequence[JSON]
    ) -> None:
        """Store a finished response with its own input items (the request's `input`, not the
        context inherited through previous_response_id) and output items, in one transaction. With a
        conversation_id, the inputs and outputs are also appended to that conversation (NotFound
        when it is not the owner's). DuplicateId if the response id is taken."""

    def get(self, owner: str, response_id: str) -> StoredResponse:
        """The stored response; NotFound if unknown or another owner's."""

    def delete(self, owner: str, response_id: str) -> None:
        """Delete the response and its items; NotFound if unknown or another owner's."""

    def chain(self, owner: str, response_id: str) -> Chain:
        """The chain ending at `response_id` (the request's previous_response_id), oldest first,
        with every item in order. NotFound if that response is unknown or another owner's;
        ChainBroken if an ancestor is gone."""

    def input_items(
        self,
        owner: str,
        response_id: str,
        *,
        after: str | None = None,
        limit: int = DEFAULT_LIMIT,
        order: Order = "desc",
    ) -> Page:
        """A page of the response's input items (`after`: an item id of the previous page).
        InvalidPage for a limit outside 1..100, an unknown order or an `after` not among them."""

    # --- conversations -----------------------------------------------------------------------
    def create_conversation(self, conversation: Conversation, items: Sequence[JSON] = ()) -> None:
        """Store a new conversation with its first items. DuplicateId if the id is taken."""

    def get_conversation(self, owner: str, conversation_id: str) -> Conversation: ...

    def update_conversation(
        self, owner: str, conversation_id: str, metadata: dict[str, str]
    ) -> Conversation:
        """Replace the conversation's metadata; the updated conversation."""

    def delete_conversation(self, owner: str, conversation_id: str) -> None:
        """Delete it and its items (responses stored in it stay, and keep its id)."""

    def add_items(
        self, owner: str, conversation_id: str, items: Sequence[JSON]
    ) -> tuple[ConversationItem, ...]:
        """Append items to the conversation; the items as stored."""

    def list_items(
        self,
        owner: str,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int = DEFAULT_LIMIT,
        order: Order = "desc",
    ) -> Page: ...

    def get_item(self, owner: str, conversation_id: str, item_id: str) -> JSON: ...

    def delete_item(self, owner: str, conversation_id: str, item_id: str) -> None: ...

    # --- retention and lifetime --------------------------------------------------------------
    def prune(
        self, *, now: float, max_age_s: float | None, max_responses: int | None, batch: int
    ) -> int:
        """Delete responses created before now - max_age_s, and the oldest beyond the newest
        max_responses: at most `batch` for each bound per call, so that a background task bounds
        each transaction. The number deleted. Conversations are kept until deleted, as OpenAI's
        are."""

    def close(self) -> None:
        """Release the connections."""
