"""What every remote provider builds from its options: the checked connection fields, the client and the cost log.

A provider's options are a pydantic model with ``extra="forbid"``; the LLM providers' start from
:class:`RemoteOptions`, and any that orders its fields otherwise uses :data:`BaseUrl` and
:data:`ApiKey` for the same checks. :class:`ProviderClient` turns options into the retrying
:class:`~memstrata.remote.http.JsonClient`, with the key in the provider's header, and logs each
call's tokens to the cost log.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated, Protocol

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr

from memstrata.errors import ProviderError
from memstrata.remote.costs import CostLog
from memstrata.remote.http import JsonClient, RetryPolicy, SettingNames, Sleep, check_api_key, check_base_url
from memstrata.remote.usage import Usage

__all__ = ["ApiKey", "BaseUrl", "Endpoint", "ProviderClient", "RemoteOptions"]

BaseUrl = Annotated[str, AfterValidator(check_base_url)]
"""An http(s) URL without its trailing slash, user name or password."""

ApiKey = Annotated[SecretStr | None, AfterValidator(check_api_key)]
"""An API key that can travel in a header, without surrounding whitespace."""


class Endpoint(Protocol):
    """Where a remote provider is and how long to try it: the fields every provider's options have."""

    @property
    def model(self) -> str:
        """The model the server is asked for."""
        ...

    @property
    def base_url(self) -> str:
        """The URL every request path is appended to."""
        ...

    @property
    def api_key(self) -> SecretStr | None:
        """The key, or None for a server that needs none."""
        ...

    @property
    def timeout_seconds(self) -> float:
        """The limit for each wait of a request."""
        ...

    @property
    def max_retries(self) -> int:
        """Retries of a request that failed in a way worth retrying."""
        ...


class RemoteOptions(BaseModel):
    """How to reach a remote model: the options an LLM provider's own start from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    base_url: BaseUrl
    api_key: ApiKey = None
    timeout_seconds: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=20)


class ProviderClient:
    """A remote provider's JSON client, built once from its options, and the cost log its calls are recorded in."""

    def __init__(
        self,
        options: Endpoint,
        *,
        provider: str,
        cost_log: CostLog | None = None,
        sleep: Sleep = time.sleep,
        headers: Mapping[str, str] | None = None,
        key_header: str = "Authorization",
        key_prefix: str = "Bearer ",
        names: SettingNames | None = None,
        error: type[Exception] = ProviderError,
        generates: bool = False,
    ) -> None:
        self._provider = provider
        self._cost_log = cost_log
        sent = {"Accept": "application/json", **(headers or {})}
        if options.api_key is not None and options.api_key.get_secret_value():
            sent[key_header] = f"{key_prefix}{options.api_key.get_secret_value()}"
        self.http = JsonClient(
            options.base_url,
            model=options.model,
            headers=sent,
            secret=options.api_key,
            timeout_seconds=options.timeout_seconds,
            # A generation that timed out may still be running: a retry would queue behind it.
            retry=RetryPolicy(max_retries=options.max_retries, retries_read_timeouts=not generates),
            names=names or (SettingNames(reply_tokens="MEMSTRATA_CHAT_MAX_TOKENS") if generates else None),
            sleep=sleep,
            error=error,
        )

    def __repr__(self) -> str:
        return f"ProviderClient({self._provider!r}, {self.http.base_url!r})"

    def record(self, *, model: str, purpose: str, usage: Usage, latency_ms: float) -> None:
        """Log one successful call under this provider's name (nothing without a cost log)."""
        if self._cost_log is not None:
            self._cost_log.record(
                provider=self._provider, model=model, purpose=purpose, usage=usage, latency_ms=latency_ms
            )

    def close(self) -> None:
        """Close pooled connections."""
        self.http.close()
