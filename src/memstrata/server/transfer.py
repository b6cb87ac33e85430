"""Export and import through the API: JSONL lines rewritten between the tenant's ids and stored ids."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import IO

from memstrata.errors import InvalidInput
from memstrata.models import space_of
from memstrata.server.tenancy import Tenant
from memstrata.transfer import end_line, parse_record

_TURN = "turn"


def exported_lines(header: str, handles: Iterable[IO[str]], tenant: Tenant) -> Iterator[str]:
    """One export out of ``header`` and the turns of several export files, ids mapped back to the tenant's own.

    Each file's own header and end line are skipped, so the result has one header line,
    then turns, then one end line counting them all (a client cut off mid-stream has none).
    """
    yield header
    turns = 0
    for handle in handles:
        for line in handle:
            record = json.loads(line)
            if record.get("kind") != _TURN:
                continue
            scope = str(record.get("user_id", ""))
            space = space_of(scope)
            if not tenant.owns(scope if space is None else space):
                continue  # never expected (files are exported per user or space of the tenant), but never leaked
            if space is None:
                record["user_id"] = tenant.outside(scope)
            else:  # a space's scope id is never shown: its lines name the space, and its agents plainly
                del record["user_id"]
                record["space"] = tenant.outside(space)
                if isinstance(record.get("agent_id"), str):
                    record["agent_id"] = tenant.outside(record["agent_id"])
            record["id"] = tenant.outside(str(record["id"]))
            turns += 1
            yield json.dumps(record, ensure_ascii=False) + "\n"
    yield end_line(turns)


def imported_lines(data: bytes, tenant: Tenant) -> Iterator[str]:
    """An uploaded export with every turn moved into ``tenant``'s namespace; InvalidInput names a bad line.

    Only ids are checked here; everything else is validated by ``Memory.import_``, which
    stores all of the file or nothing.
    """
    try:
        text = data.decode("utf-8-sig")  # a byte order mark some editors add is no text
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the upload is not UTF-8 text (bad byte at position {exc.start})") from exc
    # Split on "\n" only: str.splitlines would also split inside strings holding U+2028.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            yield "\n"  # keeps the line numbers of messages those of the upload
            continue
        record = parse_record(line, number)
        if record.get("kind") == _TURN and "space" in record:
            raise InvalidInput(
                f"line {number}: a shared space's memories are not imported; add them with POST /v1/memories"
                " and a space, as an agent with write access to it"
            )
        if record.get("kind") == _TURN:
            try:
                record["user_id"] = tenant.inside(record.get("user_id"), "user_id")
                record["id"] = tenant.inside(record.get("id"), "id")
            except InvalidInput as exc:
                raise InvalidInput(f"line {number}: {exc}") from exc
        # ASCII escapes keep a lone surrogate writable, for the import to refuse with a clear message.
        yield json.dumps(record) + "\n"
