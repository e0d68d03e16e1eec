"""AsyncStore: the ResponseStore's methods as coroutines for the server's event loop, each run on a
worker thread (asyncio.to_thread), so that no database round trip or commit blocks the loop."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from .interface import DEFAULT_LIMIT, ResponseStore
from .records import JSON, Chain, Conversation, ConversationItem, Order, Page, StoredResponse


class AsyncStore:
    def __init__(self, store: ResponseStore):
        self.store = store

    async def put(
        self, response: StoredResponse, inputs: Sequence[JSON], outputs: Sequence[JSON]
    ) -> None:
        await asyncio.to_thread(self.store.put, response, inputs, outputs)

    async def get(self, owner: str, response_id: str) -> StoredResponse:
        return await asyncio.to_thread(self.store.get, owner, response_id)

    async def delete(self, owner: str, response_id: str) -> None:
        await asyncio.to_thread(self.store.delete, owner, response_id)

    async def chain(self, owner: str, response_id: str) -> Chain:
        return await asyncio.to_thread(self.store.chain, owner, response_id)

    async def input_items(
        self,
        owner: str,
        response_id: str,
        *,
        after: str | None = None,
        limit: int = DEFAULT_LIMIT,
        order: Order = "desc",
    ) -> Page:
        return await asyncio.to_thread(
            lambda: self.store.input_items(
                owner, response_id, after=after, limit=limit, order=order
            )
        )

    async def create_conversation(
        self, conversation: Conversation, items: Sequence[JSON] = ()
    ) -> None:
        await asyncio.to_thread(self.store.create_conversation, conversation, items)

    async def get_conversation(self, owner: str, conversation_id: str) -> Conversation:
        return await asyncio.to_thread(self.store.get_conversation, owner, conversation_id)

    async def update_conversation(
        self, owner: str, conversation_id: str, metadata: dict[str, str]
    ) -> Conversation:
        return await asyncio.to_thread(
            self.store.update_conversation, owner, conversation_id, metadata
        )

    async def delete_conversation(self, owner: str, conversation_id: str) -> None:
        await asyncio.to_thread(self.store.delete_conversation, owner, conversation_id)

    async def add_items(
        self, owner: str, conversation_id: str, items: Sequence[JSON]
    ) -> tuple[ConversationItem, ...]:
        return await asyncio.to_thread(self.store.add_items, owner, conversation_id, items)

    async def list_items(
        self,
        owner: str,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int = DEFAULT_LIMIT,
        order: Order = "desc",
    ) -> Page:
        return await asyncio.to_thread(
            lambda: self.store.list_items(
                owner, conversation_id, after=after, limit=limit, order=order
            )
        )

    async def get_item(self, owner: str, conversation_id: str, item_id: str) -> JSON:
        return await asyncio.to_thread(self.store.get_item, owner, conversation_id, item_id)

    async def delete_item(self, owner: str, conversation_id: str, item_id: str) -> None:
        await asyncio.to_thread(self.store.delete_item, owner, conversation_id, item_id)

    async def run(self, fn, *args):
        """`fn(store, *args)` on a worker thread: several calls of the store as one."""
        return await asyncio.to_thread(fn, self.store, *args)

    async def close(self) -> None:
        await asyncio.to_thread(self.store.close)
