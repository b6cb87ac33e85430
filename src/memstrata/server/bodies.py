"""JSON request bodies read strictly: an object that names a key twice is refused, never guessed."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from memstrata.validation import DuplicateKey, parse_json


class StrictJSONRequest(Request):
    """A request whose ``json()`` refuses duplicate keys, as a JSON decode error (400 ``bad_request``).

    So is a body that is not UTF-8, nested too deeply or holding a number too long to read:
    FastAPI would answer those with a 400 of its own, before the key is checked.
    """

    async def json(self) -> Any:
        """The body parsed as JSON; a key named twice in one object is a decode error."""
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = parse_json(body)
            except json.JSONDecodeError:
                raise
            except DuplicateKey as exc:
                raise json.JSONDecodeError(str(exc), body.decode("utf-8", "replace"), 0) from exc
            except UnicodeDecodeError as exc:
                raise json.JSONDecodeError("it is not UTF-8", body.decode("utf-8", "replace"), exc.start) from exc
            except RecursionError as exc:
                raise json.JSONDecodeError("it is nested too deeply", "", 0) from exc
            except ValueError as exc:  # a number of thousands of digits: Python's limit on int()
                raise json.JSONDecodeError(f"a number is too long ({exc})", "", 0) from exc
        return self._json


class StrictJSONRoute(APIRoute):
    """A route that reads its JSON body with ``StrictJSONRequest``; every router of the app uses it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, handed a strict request."""
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict
