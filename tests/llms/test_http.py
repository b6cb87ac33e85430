"""Shared HTTP behaviour: retries with backoff and Retry-After, timeouts, and errors that say what to fix."""

from __future__ import annotations

import logging
import random
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from urllib.parse import quote, quote_plus

import pytest
from pydantic import SecretStr

from memstrata import load_settings
from memstrata.errors import ConfigError, ProviderError
from memstrata.llms import load_llm
from memstrata.llms.anthropic import AnthropicLLM, AnthropicOptions
from memstrata.llms.openai_compat import OpenAICompatLLM, OpenAIOptions
from memstrata.remote.costs import CostLog, read_costs
from memstrata.remote.http import JsonClient, RetryPolicy, parse_retry_after
from tests.llm_server import CHAT, MESSAGES, LLMServer, Reply
from tests.llms.conftest import SECRET, Sleeps

MakeOpenAI = Callable[..., OpenAICompatLLM]


def test_429_then_success_honours_retry_after(make_openai: MakeOpenAI, llm_server: LLMServer, sleeps: Sleeps) -> None:
    llm_server.queue(CHAT, Reply.error(429, "slow down", retry_after=7), "done")
    assert make_openai().complete("x") == "done"
    assert sleeps.delays == [7.0]
    assert len(llm_server.requests_to(CHAT)) == 2


def test_retry_after_as_http_date(make_openai: MakeOpenAI, llm_server: LLMServer, sleeps: Sleeps) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    llm_server.queue(CHAT, Reply.error(503, retry_after=when), "done")
    assert make_openai().complete("x") == "done"
    assert 25 <= sleeps.delays[0] <= 30


def test_retry_after_is_capped(make_openai: MakeOpenAI, llm_server: LLMServer, sleeps: Sleeps) -> None:
    llm_server.queue(CHAT, Reply.error(429, retry_after=86_400), "done")
    make_openai().complete("x")
    assert sleeps.delays == [RetryPolicy().max_retry_after_seconds]


def test_5xx_backs_off_exponentially_with_jitter(
    make_openai: MakeOpenAI, llm_server: LLMServer, sleeps: Sleeps
) -> None:
    llm_server.queue(CHAT, Reply.error(500), Reply.error(502), Reply.error(503), "done")
    assert make_openai().complete("x") == "done"
    base = RetryPolicy().base_delay_seconds
    assert len(sleeps.delays) == 3
    for retry, delay in enumerate(sleeps.delays):
        assert base * 2**retry * 0.5 <= delay <= base * 2**retry


def test_backoff_is_bounded() -> None:
    policy = RetryPolicy(base_delay_seconds=1, max_delay_seconds=5)
    assert all(policy.delay(30, None, random.Random(seed)) <= 5 for seed in range(20))


def test_retries_are_bounded(make_openai: MakeOpenAI, llm_server: LLMServer, sleeps: Sleeps) -> None:
    llm_server.queue(CHAT, *[Reply.error(429, "rate limited")] * 5)
    with pytest.raises(ProviderError, match="429") as info:
        make_openai(max_retries=2).complete("x")
    assert "MEMSTRATA_LLM_MAX_RETRIES" in str(info.value)
    assert len(sleeps.delays) == 2
    assert len(llm_server.requests_to(CHAT)) == 3


def test_server_error_after_retries_says_try_later(
    make_openai: MakeOpenAI, llm_server: LLMServer, sleeps: Sleeps
) -> None:
    llm_server.queue(CHAT, Reply.error(500, "boom"), Reply.error(500, "boom"))
    with pytest.raises(ProviderError, match="HTTP 500 after 1 retries"):
        make_openai(max_retries=1).complete("x")


def test_timeout_raises_provider_error(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    llm_server.queue(CHAT, Reply.slow(3.0))
    with pytest.raises(ProviderError, match="no reply") as info:
        make_openai(timeout_seconds=0.2, max_retries=0).complete("x")
    assert "MEMSTRATA_LLM_TIMEOUT_SECONDS" in str(info.value)


def test_a_timed_out_generation_is_not_sent_again(
    make_openai: MakeOpenAI, llm_server: LLMServer, sleeps: Sleeps
) -> None:
    # The server may still be generating the first reply: a retry would queue behind it and time out too.
    llm_server.queue(CHAT, Reply.slow(3.0), "in time")
    with pytest.raises(ProviderError, match="not sent again") as info:
        make_openai(timeout_seconds=0.3, max_retries=3).complete("x")
    assert "MEMSTRATA_LLM_TIMEOUT_SECONDS" in str(info.value)
    assert "MEMSTRATA_CHAT_MAX_TOKENS" in str(info.value)
    assert sleeps.delays == []
    assert len(llm_server.requests_to(CHAT)) == 1


def test_a_timeout_of_other_requests_is_retried(llm_server: LLMServer, sleeps: Sleeps) -> None:
    llm_server.queue(CHAT, Reply.slow(3.0), "in time")
    client = JsonClient(
        llm_server.openai_url, model="m", timeout_seconds=0.3, retry=RetryPolicy(max_retries=1), sleep=sleeps
    )
    body, _ = client.post("chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
    assert body["choices"][0]["message"]["content"] == "in time"
    assert len(sleeps.delays) == 1


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failure_names_the_key_setting_and_never_the_key(
    make_openai: MakeOpenAI, llm_server: LLMServer, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    caplog.set_level(logging.DEBUG)
    # A server that echoes the key back must not get it into the message either.
    llm_server.queue(CHAT, Reply.error(status, f"Incorrect API key provided: {SECRET}"))
    llm = make_openai()
    with pytest.raises(ProviderError) as info:
        llm.complete("x")
    message = str(info.value)
    assert "MEMSTRATA_LLM_API_KEY" in message
    assert SECRET not in message
    assert SECRET not in repr(info.value)
    assert SECRET not in caplog.text
    assert SECRET not in repr(llm)
    assert all(SECRET not in record.getMessage() for record in caplog.records)


def test_key_is_hidden_in_settings_and_options(llm_server: LLMServer) -> None:
    settings = load_settings(llm_api_key=SECRET)
    assert SECRET not in repr(settings)
    assert SECRET not in str(settings.model_dump())
    options = OpenAIOptions(model="m", base_url=llm_server.openai_url, api_key=SecretStr(SECRET))
    assert SECRET not in repr(options)


def test_retry_logs_do_not_contain_the_key(
    make_openai: MakeOpenAI, llm_server: LLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    llm_server.queue(CHAT, Reply.error(503), "ok")
    make_openai().complete("x")
    assert "retrying" in caplog.text
    assert SECRET not in caplog.text


def test_anthropic_auth_failure(
    make_anthropic: Callable[..., AnthropicLLM], llm_server: LLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    llm_server.queue(MESSAGES, Reply.error(401, "invalid x-api-key"))
    with pytest.raises(ProviderError, match="MEMSTRATA_LLM_API_KEY") as info:
        make_anthropic().complete("x")
    assert SECRET not in str(info.value) + caplog.text


def test_not_found_names_model_and_base_url(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    llm_server.queue(CHAT, Reply.error(404, "model 'nope' not found"))
    with pytest.raises(ProviderError) as info:
        make_openai(model="nope").complete("x")
    message = str(info.value)
    assert "MEMSTRATA_LLM_MODEL" in message and "'nope'" in message
    assert "MEMSTRATA_LLM_BASE_URL" in message and llm_server.openai_url in message


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_connection_refused_names_the_url(sleeps: Sleeps) -> None:
    base_url = f"http://127.0.0.1:{_closed_port()}/v1"
    llm = OpenAICompatLLM(OpenAIOptions(model="m", base_url=base_url, max_retries=2), sleep=sleeps)
    with pytest.raises(ProviderError) as info:
        llm.complete("x")
    message = str(info.value)
    assert "connection refused" in message
    assert f"{base_url}/chat/completions" in message
    assert "must be running" in message
    assert len(sleeps.delays) == 2


def test_malformed_json_body_raises(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    llm_server.queue(CHAT, Reply.malformed())
    with pytest.raises(ProviderError, match="not a JSON object"):
        make_openai().complete("x")


@pytest.mark.parametrize(
    ("header", "expected"),
    [("5", 5.0), ("0.5", 0.5), ("-3", 0.0), (None, None), ("", None), ("soon", None)],
)
def test_parse_retry_after(header: str | None, expected: float | None) -> None:
    assert parse_retry_after(header) == expected


def test_parse_retry_after_http_date() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:10 GMT", now=now) == 10.0
    assert parse_retry_after("Thu, 01 Jan 2026 11:00:00 GMT", now=now) == 0.0


@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_redirect_that_would_turn_the_post_into_a_get_is_refused_with_its_target(
    make_openai: MakeOpenAI, llm_server: LLMServer, status: int
) -> None:
    target = f"{llm_server.url}/moved/chat/completions"
    llm_server.queue(CHAT, Reply.of_json({}, status=status, headers={"Location": target}))
    with pytest.raises(ProviderError, match=f"HTTP {status}") as info:
        make_openai().complete("x")
    assert target in str(info.value)
    assert "MEMSTRATA_LLM_BASE_URL" in str(info.value)
    assert [request.method for request in llm_server.requests] == ["POST"]  # never re-sent as a GET


@pytest.mark.parametrize("status", [307, 308])
def test_a_redirect_that_keeps_the_method_is_followed_with_the_body(
    make_openai: MakeOpenAI, llm_server: LLMServer, status: int
) -> None:
    llm_server.queue(CHAT, Reply.of_json({}, status=status, headers={"Location": "/moved/chat/completions"}))
    llm_server.queue("/moved/chat/completions", "from the new address")
    assert make_openai().complete("where?") == "from the new address"
    moved = llm_server.requests_to("/moved/chat/completions")
    assert [request.method for request in moved] == ["POST"]
    assert "where?" in str(moved[0].body)


def test_a_redirect_to_another_origin_is_not_followed_so_the_key_stays_home(
    llm_server: LLMServer, sleeps: Sleeps
) -> None:
    moved = llm_server.url.replace("127.0.0.1", "localhost") + "/moved/v1/messages"
    llm_server.queue(MESSAGES, Reply.of_json({}, status=307, headers={"Location": moved}))
    llm = AnthropicLLM(
        AnthropicOptions(model="claude-x", base_url=llm_server.anthropic_url, api_key=SecretStr(SECRET)), sleep=sleeps
    )
    with pytest.raises(ProviderError, match="same scheme, host and port") as info:
        llm.complete("x")
    assert moved in str(info.value)
    assert llm_server.requests_to("/moved/v1/messages") == []  # never sent there, with its x-api-key


def test_a_redirect_to_an_address_that_does_not_parse_is_not_retried(
    make_openai: MakeOpenAI, llm_server: LLMServer, sleeps: Sleeps
) -> None:
    llm_server.queue(CHAT, Reply.of_json({}, status=302, headers={"Location": "http://[::1/v1"}))
    with pytest.raises(ProviderError, match="not a valid URL") as info:
        make_openai().complete("x")
    assert "MEMSTRATA_LLM_BASE_URL" in str(info.value)
    assert sleeps.delays == [] and len(llm_server.requests_to(CHAT)) == 1


def test_a_key_echoed_percent_encoded_in_a_redirect_is_masked(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    key = "sk-test/with+odd=chars"
    echoed = f"https://example.com/login?key={quote(key, safe='')}&again={quote_plus(key)}"
    llm_server.queue(CHAT, Reply.of_json({}, status=302, headers={"Location": echoed}))
    with pytest.raises(ProviderError) as info:
        make_openai(api_key=SecretStr(key)).complete("x")
    message = str(info.value)
    assert quote(key, safe="") not in message and quote_plus(key) not in message and "key=***" in message


def test_a_redirect_loop_ends_in_an_error(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    llm_server.queue(CHAT, *[Reply.of_json({}, status=307, headers={"Location": CHAT})] * 10)
    with pytest.raises(ProviderError, match=r"HTTP 307.*redirected more than 5 times"):
        make_openai().complete("x")
    assert len(llm_server.requests_to(CHAT)) == 6  # the request and five redirects


def test_latency_is_the_answered_attempt_without_the_back_off_before_it(
    llm_server: LLMServer, cost_log: CostLog
) -> None:
    llm_server.queue(CHAT, Reply.error(503), "done")
    options = OpenAIOptions(model="gpt-4o-mini", base_url=llm_server.openai_url, api_key=SecretStr(SECRET))
    llm = OpenAICompatLLM(options, cost_log=cost_log, sleep=lambda _seconds: time.sleep(1.5))
    try:
        assert llm.complete("x") == "done"
    finally:
        llm.close()
    (entry,) = read_costs(cost_log.path)
    assert entry.latency_ms < 1_500


def test_a_dropped_connection_is_retried(make_openai: MakeOpenAI, llm_server: LLMServer, sleeps: Sleeps) -> None:
    llm_server.queue(CHAT, Reply.dropped(), "after all")
    assert make_openai().complete("x") == "after all"
    assert len(sleeps.delays) == 1


def test_connections_that_keep_dropping_say_so(make_openai: MakeOpenAI, llm_server: LLMServer, sleeps: Sleeps) -> None:
    llm_server.queue(CHAT, Reply.dropped(), Reply.dropped())
    with pytest.raises(ProviderError, match=r"dropped before a reply \(2 attempts"):
        make_openai(max_retries=1).complete("x")


def test_a_key_pasted_with_a_newline_is_used_without_it(llm_server: LLMServer) -> None:
    options = OpenAIOptions(model="m", base_url=llm_server.openai_url, api_key=SecretStr(f" {SECRET}\n"))
    OpenAICompatLLM(options).complete("x")
    assert llm_server.requests_to(CHAT)[0].headers["authorization"] == f"Bearer {SECRET}"


@pytest.mark.parametrize("key", [f"{SECRET}\u2019", f"{SECRET}\x00x", f"{SECRET[:4]} {SECRET[4:]}"])
def test_an_unusable_key_is_a_config_error_that_never_shows_it(llm_server: LLMServer, key: str) -> None:
    settings = load_settings(llm_provider="openai", llm_base_url=llm_server.openai_url, llm_model="m", llm_api_key=key)
    with pytest.raises(ConfigError, match="API key holds") as info:
        load_llm(settings)
    assert SECRET[:4] not in str(info.value) and SECRET not in str(info.value.__cause__)


@pytest.mark.parametrize("url", ["http://[::1/v1", "http://:80/v1", "https://"])
def test_an_unusable_base_url_is_a_config_error(url: str) -> None:
    settings = load_settings(llm_provider="openai", llm_base_url=url, llm_model="m")
    with pytest.raises(ConfigError, match="llm_base_url"):
        load_llm(settings)


def test_a_base_url_with_credentials_is_refused_without_showing_them() -> None:
    settings = load_settings(llm_provider="openai", llm_base_url="https://ana:hunter2@proxy.example/v1", llm_model="m")
    with pytest.raises(ConfigError, match="user name or password") as info:
        load_llm(settings)
    assert "hunter2" not in str(info.value) and "hun/ter2" not in str(info.value) and "'hun'" not in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://ana:hunter2@/v1",
        "https://ana:hunter2@[::1/v1",
        "ftp://ana:hunter2@host",
        "https://ana:hun/ter2@host/v1",
        "https://ana:hunter2#x@host/v1",
    ],
)
def test_a_malformed_url_is_refused_without_showing_its_password(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_llm(load_settings(llm_provider="openai", llm_base_url=url, llm_model="m"))
    assert "hunter2" not in str(info.value)
