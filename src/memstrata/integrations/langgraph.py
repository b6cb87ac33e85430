"""LangGraph's long-term store over a memstrata Memory: ``MemstrataStore(memory)``.

A namespace's first label names whose memory an item lives in: a memstrata ``user_id``, or,
with ``space_prefix`` set, a shared space (``("space:apollo", ...)`` → space ``apollo``). Each
item is one turn there, under an id derived from its namespace and key, so a ``get`` is one
lookup and a put overwrites in place. The turn's text is what memstrata indexes (the value's
``text``, ``content`` or ``memory`` field, the ``fields`` or ``index`` paths, else its JSON); the
value itself, the namespace and the key are kept in the turn's metadata, so a value reads back
exactly as put. Details and an example: docs/integrations.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from memstrata.errors import InvalidInput, MissingDependency, NotFound
from memstrata.integrations.langgraph_filters import check_filter, namespace_matches, value_matches
from memstrata.memory import Memory
from memstrata.models import Turn
from memstrata.validation import check_identifier, check_metadata, check_user_id

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        get_text_at_path,
        tokenize_path,
        validate_op_namespace,
    )
except ImportError as exc:  # pragma: no cover - exercised in a test with the package hidden
    raise MissingDependency(
        f"memstrata.integrations.langgraph needs LangGraph ({exc.name} is missing): pip install 'memstrata[langgraph]'"
    ) from exc

__all__ = ["MemstrataStore"]

#: The metadata key under which a turn holds its item; turns without it are not the store's.
MARK = "langgraph"
#: Value fields whose text is indexed when present, in this order.
TEXT_FIELDS = ("text", "content", "memory")
#: The most hits one query search asks memstrata for (its own ceiling) while looking for matches.
MOST_HITS = 1000
#: memstrata's search modes.
SEARCH_MODES = ("hybrid", "fulltext", "vector")
#: Turns read per page while scanning a memory (namespace-only searches, listing namespaces).
PAGE = 500


@dataclass(frozen=True, slots=True)
class Owner:
    """The memstrata memory a namespace's first label names: a user's, or a shared space's."""

    label: str
    user_id: str | None = None
    space: str | None = None

    def scope(self, agent_id: str | None, *, writing: bool = False) -> dict[str, Any]:
        """Keyword arguments naming this memory in a Memory call.

        In a space ``agent_id`` is the caller, whose grants apply; in a user's memory it names only
        the writer of what is added, since on reads it would hide other agents' items.
        """
        if self.space is not None:
            return {"space": self.space, "agent_id": agent_id}
        if writing and agent_id is not None:
            return {"user_id": self.user_id, "agent_id": agent_id}
        return {"user_id": self.user_id}


class MemstrataStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are memstrata memories, searchable by meaning and by words.

    ``memory`` is shared (memstrata is thread-safe); ``agent_id`` is recorded as each item's writer and,
    in a space, is the agent whose grants apply. ``fields`` are the value paths indexed by default
    (LangGraph's ``IndexConfig["fields"]`` syntax); ``mode`` is memstrata's search mode.
    """

    def __init__(
        self,
        memory: Memory,
        *,
        agent_id: str | None = None,
        space_prefix: str | None = None,
        fields: Sequence[str] | None = None,
        mode: Literal["hybrid", "fulltext", "vector"] = "hybrid",
    ) -> None:
        if space_prefix is not None and (not isinstance(space_prefix, str) or not space_prefix.strip()):
            raise InvalidInput("space_prefix must be None (no spaces) or a non-blank string such as 'space:'")
        if fields is not None and not _is_paths(fields):
            raise InvalidInput("fields must be a list of value paths such as ['text', 'notes[*].body']")
        if mode not in SEARCH_MODES:
            raise InvalidInput(f"mode must be one of {', '.join(SEARCH_MODES)}, not {mode!r}")
        self.memory = memory
        self.agent_id = check_identifier(agent_id, "agent_id", required=False)
        self.space_prefix = space_prefix
        self.fields = tuple(fields) if fields is not None else None
        self.mode = mode
        # Overwriting is a delete then an add under the same id: one writer at a time in this process.
        self._writing = threading.Lock()

    # -- BaseStore ----------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; every one is checked before any runs, so bad input changes nothing."""
        planned = list(ops)
        for op in planned:
            self._check(op)
        return [self._run(op) for op in planned]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` in a worker thread, so the event loop never waits on SQLite or the embedder."""
        return await asyncio.to_thread(self.batch, list(ops))

    # -- checking -----------------------------------------------------------------------------

    def _check(self, op: Op) -> None:
        """Raise (a ValueError) for an operation that cannot run, before anything is changed."""
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            self._owner(op.namespace, "namespace")
            _check_key(op.key)
        elif isinstance(op, PutOp):
            self._check_put(op)
        elif isinstance(op, SearchOp):
            self._owner(op.namespace_prefix, "namespace_prefix")
            _check_count(op.limit, "limit")
            _check_count(op.offset, "offset")
            check_filter(op.filter)
        elif isinstance(op, ListNamespacesOp):
            _check_count(op.limit, "limit")
            _check_count(op.offset, "offset")
            if op.max_depth is not None:
                _check_count(op.max_depth, "max_depth")
            for condition in op.match_conditions or ():
                if condition.match_type not in ("prefix", "suffix"):
                    raise InvalidInput(f"match_type must be 'prefix' or 'suffix', not {condition.match_type!r}")
        else:
            raise InvalidInput(f"unknown store operation {type(op).__name__}")

    def _check_put(self, op: PutOp) -> None:
        self._owner(op.namespace, "namespace")
        _check_key(op.key)
        if op.namespace[0] == "langgraph":
            raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {op.namespace}')
        if op.ttl is not None:
            raise NotImplementedError("MemstrataStore keeps items until deleted: leave ttl out (or None)")
        if op.value is not None:
            self._encode(op)  # the value's JSON, its text and the metadata, without storing them

    def _owner(self, namespace: tuple[str, ...], what: str) -> Owner:
        """The memory a namespace's first label names; InvalidNamespaceError when it names none."""
        if not namespace:
            raise InvalidNamespaceError(
                f"{what} must start with a user id (or a space): MemstrataStore keeps each user's items apart"
            )
        label = namespace[0]
        if self.space_prefix is not None and label.startswith(self.space_prefix):
            space = label[len(self.space_prefix) :]
            if not space:
                raise InvalidNamespaceError(f"{what} {namespace} names no space after {self.space_prefix!r}")
            return Owner(label, space=space)
        try:
            return Owner(label, user_id=check_user_id(label, f"the user id {what}[0]"))
        except InvalidInput as exc:
            raise InvalidNamespaceError(str(exc)) from exc

    # -- running ------------------------------------------------------------------------------

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise InvalidInput(f"unknown store operation {type(op).__name__}")  # pragma: no cover - _check ran

    def _turn(self, owner: Owner, turn_id: str) -> Turn | None:
        """The stored turn with this id in the owner's memory, or None (no such item, or no such space)."""
        try:
            return self.memory.get(turn_id, **owner.scope(self.agent_id))
        except NotFound:
            return None

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        owner = self._owner(namespace, "namespace")
        turn = self._turn(owner, item_id(namespace, key))
        stored = _decode(turn, owner) if turn is not None else None
        return stored.item() if stored is not None else None

    def _put(self, op: PutOp) -> None:
        owner = self._owner(op.namespace, "namespace")
        turn_id = item_id(op.namespace, op.key)
        encoded = self._encode(op) if op.value is not None else None
        with self._writing:
            old = self._turn(owner, turn_id)
            if old is not None:
                self.memory.delete(turn_id, **owner.scope(self.agent_id))
            if encoded is None:
                return
            text, record = encoded
            previous = _decode(old, owner) if old is not None else None
            if previous is not None:  # an overwrite keeps when the item was first put
                record["created_at"] = previous.created_at.isoformat()
            try:
                self._add(owner, turn_id, text, record)
            except BaseException:
                if old is not None:  # put the previous version back rather than lose the item
                    self._restore(owner, old)
                raise

    def _add(self, owner: Owner, turn_id: str, text: str, record: dict[str, Any]) -> None:
        scope = owner.scope(self.agent_id, writing=True)
        try:
            self.memory.add(text, id=turn_id, metadata={MARK: record}, **scope)
        except NotFound as exc:
            raise InvalidNamespaceError(
                f"{exc}; create the space first (memory.create_space({owner.space!r}))"
            ) from exc

    def _restore(self, owner: Owner, old: Turn) -> None:
        writer = self.agent_id if owner.space is not None else old.agent_id
        scope = owner.scope(writer, writing=True)
        self.memory.add(old.content, id=old.id, metadata=dict(old.metadata), timestamp=old.created_at, **scope)

    def _encode(self, op: PutOp) -> tuple[str, dict[str, Any]]:
        """The text memstrata indexes and the metadata record of a put; InvalidInput for a value it cannot keep."""
        if not isinstance(op.value, Mapping):
            raise InvalidInput(f"a store value must be a mapping (a dict), not {type(op.value).__name__}")
        if op.index is not None and op.index is not False and not _is_paths(op.index):
            raise InvalidInput("index must be None, False or a list of field paths")
        value = check_metadata(op.value, "the store value")
        record = {
            "namespace": list(op.namespace),
            "key": op.key,
            "value": value,
            "indexed": op.index is not False,
        }
        check_metadata({MARK: record}, "the store value")  # its depth, wrapped as stored
        text = text_of(value, op.index if op.index else self.fields)
        limit = self.memory.settings.max_text_bytes
        if len(text.encode("utf-8")) > limit:
            raise InvalidInput(
                f"the text of item {op.key!r} is over max_text_bytes ({limit:,} bytes): "
                "index a smaller field (index=[...] or fields=[...])"
            )
        return text, record

    def _search(self, op: SearchOp) -> list[SearchItem]:
        owner = self._owner(op.namespace_prefix, "namespace_prefix")
        wanted = op.offset + op.limit
        if op.limit == 0:
            return []

        def matches(stored: Stored) -> bool:
            return stored.namespace[: len(op.namespace_prefix)] == op.namespace_prefix and value_matches(
                stored.value, op.filter or {}
            )

        if not (op.query and op.query.strip()):
            # Newest first, as LangGraph's database stores list them; a turn's time is its item's updated_at.
            found: list[tuple[Stored, float | None]] = []
            for stored in self._scan(owner, newest_first=True):
                if matches(stored):
                    found.append((stored, None))
                    if len(found) >= wanted:
                        break
        else:
            found = self._ranked(owner, op.query, wanted, matches)
        return [stored.search_item(score) for stored, score in found[op.offset : wanted]]

    def _ranked(
        self, owner: Owner, query: str, wanted: int, matches: Callable[[Stored], bool]
    ) -> list[tuple[Stored, float | None]]:
        """Hits for ``query`` that match, best first: memstrata ranks the memory, the namespace and filter narrow."""
        depth = min(max(wanted * 3, 20), MOST_HITS)
        while True:
            try:
                hits = self.memory.search(query, limit=depth, mode=self.mode, **owner.scope(self.agent_id))
            except NotFound:  # a space that does not exist holds nothing
                return []
            found: list[tuple[Stored, float | None]] = []
            for hit in hits:
                stored = _decode(hit.turn, owner) if hit.turn is not None else None
                if stored is not None and stored.indexed and matches(stored):
                    found.append((stored, hit.score))
            if len(found) >= wanted or len(hits) < depth or depth == MOST_HITS:
                return found
            depth = min(depth * 4, MOST_HITS)

    def _scan(self, owner: Owner, *, newest_first: bool = False) -> Iterator[Stored]:
        """Every item of the owner's memory, oldest (or newest) first, read page by page as it is consumed."""
        offset = 0
        scope = owner.scope(self.agent_id)
        while True:
            try:
                turns = self.memory.history(limit=PAGE, offset=offset, newest_first=newest_first, **scope)
            except NotFound:
                return
            for turn in turns:
                stored = _decode(turn, owner)
                if stored is not None:
                    yield stored
            if len(turns) < PAGE:
                return
            offset += PAGE

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = tuple(op.match_conditions or ())
        found: set[tuple[str, ...]] = set()
        for owner in self._owners(conditions):
            for stored in self._scan(owner):
                if all(
                    namespace_matches(condition.match_type, condition.path, stored.namespace)
                    for condition in conditions
                ):
                    found.add(stored.namespace[: op.max_depth] if op.max_depth is not None else stored.namespace)
        return sorted(found)[op.offset : op.offset + op.limit]

    def _owners(self, conditions: tuple[MatchCondition, ...]) -> list[Owner]:
        """The memories a listing must read: the one a prefix names, else every user's (and space's)."""
        for condition in conditions:
            if condition.match_type == "prefix" and condition.path and condition.path[0] != "*":
                try:
                    return [self._owner(tuple(condition.path), "prefix")]
                except InvalidNamespaceError:
                    return []  # a label no memory can have: nothing matches
        prefix = self.space_prefix
        # A user id that starts with the space prefix cannot be named by a namespace, so it is not listed.
        users = [user for user in self.memory.users() if prefix is None or not user.startswith(prefix)]
        owners = [Owner(user, user_id=user) for user in users]
        if self.space_prefix is not None:
            names = [space.name for space in self.memory.spaces(agent_id=self.agent_id)]
            owners += [Owner(self.space_prefix + name, space=name) for name in names]
        return owners


@dataclass(frozen=True, slots=True)
class Stored:
    """An item as a turn holds it."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    indexed: bool

    def item(self) -> Item:
        """As LangGraph's ``get`` returns it."""
        return Item(
            value=self.value,
            key=self.key,
            namespace=self.namespace,
            created_at=self.created_at,
            updated_at=self.updated_at,
        )

    def search_item(self, score: float | None) -> SearchItem:
        """As LangGraph's ``search`` returns it."""
        return SearchItem(self.namespace, self.key, self.value, self.created_at, self.updated_at, score)


def item_id(namespace: tuple[str, ...], key: str) -> str:
    """The turn id of an item: one per namespace and key, the same in every process."""
    path = json.dumps([list(namespace), key], ensure_ascii=False)
    return "langgraph-" + hashlib.sha256(path.encode("utf-8", "surrogatepass")).hexdigest()


def text_of(value: Mapping[str, Any], paths: Sequence[str] | None) -> str:
    """What memstrata indexes for a value: the text at ``paths``, else a text field, else the value's JSON."""
    if paths:
        texts = [text for path in paths for text in get_text_at_path(value, tokenize_path(path))]
        joined = "\n".join(text for text in texts if text.strip())
        if joined:
            return joined
    for name in TEXT_FIELDS:
        field = value.get(name)
        if isinstance(field, str) and field.strip():
            return field
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _decode(turn: Turn, owner: Owner) -> Stored | None:
    """The item a turn holds, or None for a turn this store did not write (or one claiming another's path)."""
    record = turn.metadata.get(MARK)
    if not isinstance(record, Mapping):
        return None
    namespace, key, value = record.get("namespace"), record.get("key"), record.get("value")
    if not (isinstance(namespace, list) and namespace and isinstance(key, str) and isinstance(value, dict)):
        return None
    path = tuple(str(label) for label in namespace)
    # A turn is the store's only under the id its path gives, in the memory its first label names.
    if path[0] != owner.label or turn.id != item_id(path, key):
        return None
    created = record.get("created_at")
    return Stored(
        namespace=path,
        key=key,
        value=value,
        created_at=datetime.fromisoformat(created) if isinstance(created, str) else turn.created_at,
        updated_at=turn.created_at,
        indexed=record.get("indexed", True) is not False,
    )


def _check_key(key: object) -> None:
    if not isinstance(key, str):
        raise InvalidInput(f"a store key must be a string, not {type(key).__name__}")


def _check_count(value: object, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{what} must be a whole number ≥ 0")


def _is_paths(index: object) -> bool:
    return isinstance(index, list | tuple) and all(isinstance(path, str) and path for path in index)
