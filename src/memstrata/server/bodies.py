"""JSON request bodies read strictly: an object that names a key twice is refused, never guessed."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from memstrata.validation import DuplicateKey, parse_json


class StrictJSONRequest(Request):
    """A request whose ``json()`` refuses duplicate keys, as a JSON decode error (400 ``bad_request``)."""

    async def json(self) -> Any:
        """The body parsed as JSON; a key named twice in one object is a decode error."""
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = parse_json(body)
            except DuplicateKey as exc:
                raise json.JSONDecodeError(str(exc), body.decode("utf-8", "replace"), 0) from exc
        return self._json


class StrictJSONRoute(APIRoute):
    """A route that reads its JSON body with ``StrictJSONRequest``; every router of the app uses it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, handed a strict request."""
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict
