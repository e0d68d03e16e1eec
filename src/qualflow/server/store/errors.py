"""The typed errors of the response store. The HTTP layer renders them; none carries a password."""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error the store raises on purpose."""


class StoreOpenError(StoreError):
    """The store could not be opened (bad URL, unreachable server, unwritable file, failed
    migration). The message names the URL without its password."""


class NotFound(StoreError):
    """No such object for this owner. Another owner's object is reported exactly like an unknown
    one."""

    def __init__(self, kind: str, object_id: str):
        self.kind, self.object_id = kind, object_id
        super().__init__(f"{kind} with id '{object_id}' not found.")


class ChainBroken(StoreError):
    """A `previous_response_id` chain reaches a response that is gone (pruned, deleted, or another
    owner's): its context cannot be rebuilt whole, so none is returned."""

    def __init__(self, head_id: str, missing_id: str):
        self.head_id, self.missing_id = head_id, missing_id
        super().__init__(
            f"the context of response '{head_id}' is incomplete: its ancestor "
            f"'{missing_id}' is no longer stored."
        )


class DuplicateId(StoreError):
    """An object with this id is already stored (by any owner), or one put names an item id
    twice."""

    def __init__(self, kind: str, object_id: str):
        self.kind, self.object_id = kind, object_id
        super().__init__(f"{kind} with id '{object_id}' already exists.")


class InvalidPage(StoreError, ValueError):
    """A bad pagination argument; `param` names it (limit, order or after)."""

    def __init__(self, param: str, message: str):
        self.param = param
        super().__init__(message)
