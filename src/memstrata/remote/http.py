"""HTTP for remote providers: JSON POSTs with a timeout, bounded retries, and every failure as ProviderError.

Retries: 429, 5xx, refused connections and timeouts, with exponential backoff and jitter, or
the server's ``Retry-After`` (capped); a generation whose reply timed out is not sent again.
Every httpx error and bad status becomes a :class:`~memstrata.errors.ProviderError` whose
message says which setting to check. The API key travels only in request headers: it never
appears in a message, a repr or a log record.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
from pydantic import SecretStr

from memstrata.errors import ProviderError

logger = logging.getLogger(__name__)

Sleep = Callable[[float], None]
"""Waits the given number of seconds; injected so tests need not wait."""

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
#: Transport errors worth another attempt: no reply in time, no connection, a connection dropped mid-request.
RETRYABLE_ERRORS = (
    httpx.TimeoutException,
    httpx.ConnectError,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)
_RETRY_REASONS = {"timeout": "timed out", "connect": "connection failed", "dropped": "connection dropped"}


def _kind_of(error: Exception) -> str:
    """Which of the retryable transport errors ``error`` is: timeout, connect or dropped."""
    if isinstance(error, httpx.TimeoutException):
        return "timeout"
    return "connect" if isinstance(error, httpx.ConnectError) else "dropped"


_DETAIL_LIMIT = 300
_MAX_REDIRECTS = 5


@dataclass(kw_only=True, frozen=True, slots=True)
class RetryPolicy:
    """How failed requests are retried: exponential backoff with jitter; ``Retry-After`` honoured up to a bound."""

    max_retries: int = 3
    base_delay_seconds: float = 0.5
    max_delay_seconds: float = 20.0
    max_retry_after_seconds: float = 60.0
    #: False for generations: a request that timed out waiting for its reply may still be running on the
    #: server, and asking again queues behind it (each retry then times out too).
    retries_read_timeouts: bool = True

    def delay(self, retry: int, retry_after: str | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        asked = parse_retry_after(retry_after)
        if asked is not None:
            return min(asked, self.max_retry_after_seconds)
        ceiling = min(self.max_delay_seconds, self.base_delay_seconds * 2.0**retry)
        return float(ceiling * rng.uniform(0.5, 1.0))


@dataclass(kw_only=True, frozen=True, slots=True)
class SettingNames:
    """The settings an error message tells the user to check."""

    api_key: str = "MEMSTRATA_LLM_API_KEY"
    model: str = "MEMSTRATA_LLM_MODEL"
    base_url: str = "MEMSTRATA_LLM_BASE_URL"
    timeout: str = "MEMSTRATA_LLM_TIMEOUT_SECONDS"
    max_retries: str = "MEMSTRATA_LLM_MAX_RETRIES"
    #: The setting bounding a generation's length, for providers that generate.
    reply_tokens: str | None = None


@dataclass(kw_only=True, frozen=True, slots=True)
class HttpReply:
    """The last response to a POST: its status, its JSON body (None if not JSON) and how long that attempt took.

    ``elapsed_ms`` times the last attempt only: the back-off waits before it are not the provider's latency.
    """

    status: int
    body: Any
    text: str
    elapsed_ms: float
    retries: int = 0
    headers: Mapping[str, str] = field(default_factory=dict)


def check_base_url(value: str) -> str:
    """Validate an http(s) URL and drop its trailing slash; messages never show a password it holds."""
    url = value.strip().rstrip("/")
    shown = repr(_USERINFO.sub("//***@", url))
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{shown} is not an http:// or https:// URL")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        # The parser's own words can quote a piece of a password ("Invalid port: 'hunter2'").
        reason = "" if "@" in url else f" ({exc})"
        raise ValueError(f"{shown} is not a valid URL{reason}") from None
    if not parsed.host:
        raise ValueError(f"{shown} names no host")
    if parsed.userinfo:
        # URLs are shown in messages and logs; a password in one would be too.
        raise ValueError(
            "the URL holds a user name or password; give the URL without them and the key as the API key setting"
        )
    return url


_USERINFO = re.compile(r"//.*@")  # up to the last "@": a password may hold "/", "?" or "#"


def check_api_key(value: SecretStr | None) -> SecretStr | None:
    """The key without surrounding whitespace (a newline pasted or read from a file); refuse other unusable ones.

    A header can carry only visible ASCII: any other character would fail every request,
    and the HTTP library's error would quote the key. The message never shows it.
    """
    if value is None:
        return None
    key = value.get_secret_value().strip()
    if any(not " " < character <= "~" for character in key):
        raise ValueError(
            "the API key holds a space, a control character or a non-ASCII character; copy it again as the"
            " provider shows it"
        )
    return SecretStr(key)


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class JsonClient:
    """POSTs JSON to one base URL, retrying what is worth retrying and translating every failure."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        headers: Mapping[str, str] | None = None,
        secret: SecretStr | None = None,
        timeout_seconds: float = 60.0,
        retry: RetryPolicy | None = None,
        names: SettingNames | None = None,
        sleep: Sleep = time.sleep,
        error: type[Exception] = ProviderError,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._model = model
        self._headers = dict(headers or {})
        self._secret = secret
        self._timeout_seconds = timeout_seconds
        self._retry = retry or RetryPolicy()
        self._names = names or SettingNames()
        self._sleep = sleep
        self._error = error
        self._rng = random.Random()
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"JsonClient({self._base_url!r})"

    @property
    def base_url(self) -> str:
        """The URL every path is appended to."""
        return self._base_url

    def close(self) -> None:
        """Close pooled connections; the next request opens new ones."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def post(self, path: str, body: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
        """POST ``body`` and return the JSON object replied with its latency in ms, or raise."""
        reply = self.send(path, body)
        return self.check(path, reply), reply.elapsed_ms

    def send(self, path: str, body: Mapping[str, Any]) -> HttpReply:
        """POST ``body``, retrying 429/5xx/connect errors/timeouts; return the last reply, whatever its status."""
        url = f"{self._base_url}/{path.lstrip('/')}"
        retries = 0
        while True:
            started = time.monotonic()
            try:
                response = self._post(url, body)
            except RETRYABLE_ERRORS as exc:
                if isinstance(exc, httpx.RemoteProtocolError) and "location header" in str(exc):
                    # A redirect to an address that does not parse: the server answered; asking again changes nothing.
                    raise self._fail(
                        f"{url} redirected the request to an address that is not a valid URL ({exc}); set"
                        f" {self._names.base_url} to the server's current address"
                    ) from None
                if isinstance(exc, httpx.ReadTimeout) and not self._retry.retries_read_timeouts:
                    raise self._fail(self._still_running(url)) from exc
                if retries < self._retry.max_retries:
                    retries = self._wait(url, _RETRY_REASONS[_kind_of(exc)], retries, None)
                    continue
                raise self._fail(self._gave_up(url, exc, retries + 1)) from exc
            except httpx.LocalProtocolError as exc:
                # Its message quotes the request's headers, the key among them: never shown.
                raise self._fail(
                    f"the request to {url} could not be sent ({type(exc).__name__}); check {self._names.api_key}"
                    f" and {self._names.base_url}"
                ) from None
            except httpx.HTTPError as exc:
                raise self._fail(f"request to {url} failed: {type(exc).__name__}: {exc}") from exc
            except (httpx.InvalidURL, UnicodeError) as exc:
                raise self._fail(
                    f"the request to {url} could not be sent ({type(exc).__name__}); check {self._names.base_url}"
                    f" and {self._names.api_key}"
                ) from None
            if response.status_code in RETRYABLE_STATUSES and retries < self._retry.max_retries:
                retries = self._wait(url, f"HTTP {response.status_code}", retries, response.headers.get("retry-after"))
                continue
            return HttpReply(
                status=response.status_code,
                body=_json_or_none(response),
                text=response.text,
                elapsed_ms=(time.monotonic() - started) * 1000,
                retries=retries,
                headers=dict(response.headers),
            )

    def check(self, path: str, reply: HttpReply) -> dict[str, Any]:
        """The reply's JSON object, or a ProviderError saying what to fix."""
        url = f"{self._base_url}/{path.lstrip('/')}"
        detail = self.redact(error_detail(reply))
        status = reply.status
        if status in (401, 403):
            raise self._fail(f"{url} refused the credentials (HTTP {status}: {detail}); check {self._names.api_key}")
        if status == 404:
            raise self._fail(
                f"{url} answered HTTP 404 ({detail}); check {self._names.model} (now {self._model!r}) "
                f"and {self._names.base_url} (now {self._base_url!r})"
            )
        if 300 <= status < 400:
            location = _USERINFO.sub("//***@", self.redact(reply.headers.get("location", "") or "nowhere"))
            if status in (307, 308):
                why = (
                    f"it redirected more than {_MAX_REDIRECTS} times"
                    if _same_origin(url, reply.headers.get("location", ""))
                    else "redirects are followed only within the same scheme, host and port"
                )
            else:
                why = "a POST is not sent again as a GET"
            raise self._fail(
                f"{url} redirected the request (HTTP {status}) to {location}; {why}: set {self._names.base_url}"
                f" to the server's current address (memstrata appends /{path.lstrip('/')} to it)"
            )
        if status == 429:
            raise self._fail(
                f"{url} is still rate limiting after {reply.retries} retries (HTTP 429: {detail}); "
                f"wait, raise {self._names.max_retries}, or use a key with a higher quota"
            )
        if status >= 500:
            raise self._fail(
                f"{url} failed with HTTP {status} after {reply.retries} retries ({detail}); try again later"
            )
        if not 200 <= status < 300:
            raise self._fail(f"{url} rejected the request (HTTP {status}: {detail})")
        if not isinstance(reply.body, dict):
            raise self._fail(
                f"{url} answered with something that is not a JSON object ({detail}); "
                f"check that {self._names.base_url} points at the provider's API"
            )
        return reply.body

    def redact(self, text: str) -> str:
        """``text`` with the API key, should a server echo it, masked."""
        if self._secret is not None:
            value = self._secret.get_secret_value()
            if value:
                # As sent, and as a server may echo it inside a URL (a Location header, a link).
                for form in dict.fromkeys((value, quote(value, safe=""), quote_plus(value))):
                    text = text.replace(form, "***")
        return text

    def _post(self, url: str, body: Mapping[str, Any]) -> httpx.Response:
        """POST once, following 307/308 redirects, which keep the method and body.

        A 301/302/303 is not followed: clients follow those with a GET, which drops the body
        and ends in a misleading 404 or 405. Nor is a 307/308 to another origin, which would
        carry the key there. :meth:`check` names where each pointed instead.
        """
        client = self._http()
        response = client.post(url, json=dict(body))
        hops = 0
        while response.status_code in (307, 308) and hops < _MAX_REDIRECTS:
            following = response.next_request
            # The key travels in headers that httpx keeps across origins (only Authorization is
            # dropped): a redirect to another host, port or scheme is reported, never followed.
            if following is None or _origin(following.url) != _origin(response.request.url):
                break
            response.close()
            response = client.send(following)
            hops += 1
        return response

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(headers=self._headers, timeout=httpx.Timeout(self._timeout_seconds))
            return self._client

    def _still_running(self, url: str) -> str:
        """What to fix when a generation's reply did not come in time (it is not asked again)."""
        shorter = f", or lower {self._names.reply_tokens} so replies end sooner" if self._names.reply_tokens else ""
        return (
            f"no reply from {url} within {self._timeout_seconds:g}s; the server may still be generating it, so it"
            f" was not sent again (a retry would wait behind it): raise {self._names.timeout}{shorter}"
        )

    def _gave_up(self, url: str, error: Exception, attempts: int) -> str:
        """What to fix, once every attempt ended in a transport error worth retrying."""
        kind = _kind_of(error)
        if kind == "timeout":
            return (
                f"no reply from {url} within {self._timeout_seconds:g}s ({attempts} attempts); "
                f"raise {self._names.timeout} or check that the server is not overloaded"
            )
        if kind == "connect":
            reason = "connection refused" if "refused" in str(error).lower() else f"cannot connect ({error})"
            return (
                f"{reason} at {url}: the server must be running and listening there "
                f"(set {self._names.base_url} if it is elsewhere)"
            )
        return (
            f"the connection to {url} dropped before a reply ({attempts} attempts: {type(error).__name__});"
            f" check that the server (or a proxy before it) is healthy, or raise {self._names.max_retries}"
        )

    def _wait(self, url: str, reason: str, retries: int, retry_after: str | None) -> int:
        delay = self._retry.delay(retries, retry_after, self._rng)
        logger.warning(
            "%s: %s; retrying in %.2fs (retry %d of %d)", url, reason, delay, retries + 1, self._retry.max_retries
        )
        self._sleep(delay)
        return retries + 1

    def _fail(self, message: str) -> Exception:
        return self._error(self.redact(message))


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


def _same_origin(url: str, location: str) -> bool:
    """Whether ``location``, read relative to ``url``, points at the same scheme, host and port."""
    try:
        base = httpx.URL(url)
        return _origin(base.join(location)) == _origin(base)
    except (httpx.InvalidURL, ValueError):
        return False


def error_detail(reply: HttpReply) -> str:
    """A short description of what the server said went wrong."""
    body = reply.body
    message: Any = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            message = error.get("message") or error.get("type")
        elif error:
            message = error
        message = message or body.get("message") or body.get("detail")
    text = str(message) if message else (reply.text.strip() or "empty body")
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 1] + "…"


def as_object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (for optional parts of a reply)."""
    return value if isinstance(value, dict) else {}


#: More tokens than any reply reports: a count above it is malformed.
MAX_TOKEN_COUNT = 2**53


def token_count(value: Any) -> int:
    """A token count from a reply's usage field: 0 when missing or malformed (JSON allows ``NaN``, ``1e400``
    and integers of any length)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return int(value) if 0 <= value <= MAX_TOKEN_COUNT else 0


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (ValueError, RecursionError):  # RecursionError: a reply of thousands of "[" (a model stuck in a loop)
        return None
