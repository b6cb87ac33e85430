"""Every rule in memstrata.validation, each failure an InvalidInput that is also a ValueError."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memstrata import InvalidInput, Role
from memstrata.validation import (
    MAX_IDENTIFIER_LENGTH,
    check_identifier,
    check_importance,
    check_limit,
    check_metadata,
    check_role,
    check_stored_time,
    check_text,
    check_timestamp,
    parse_messages,
)

MAX = 1000


def _rejects(call: Any, *args: Any, match: str | None = None, **kwargs: Any) -> InvalidInput:
    with pytest.raises(InvalidInput, match=match) as info:
        call(*args, **kwargs)
    assert isinstance(info.value, ValueError)
    return info.value


# -- text ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", " ", "\t\n", "\u3000", " \r\n "])
def test_blank_text_rejected(text: str) -> None:
    _rejects(check_text, text, "message", max_bytes=MAX, match="empty")


def test_text_at_the_byte_limit_accepted_and_one_over_rejected() -> None:
    assert check_text("a" * 10, "message", max_bytes=10) == "a" * 10
    _rejects(check_text, "a" * 11, "message", max_bytes=10, match="over the limit")


def test_text_limit_counts_utf8_bytes_not_characters() -> None:
    text = "é" * 6  # 6 characters, 12 bytes
    assert check_text(text, "message", max_bytes=12) == text
    _rejects(check_text, text, "message", max_bytes=11, match="12 bytes")


@pytest.mark.parametrize("text", ["a\x00b", "\x00", "hello\x00"])
def test_nul_in_text_rejected(text: str) -> None:
    _rejects(check_text, text, "message", max_bytes=MAX, match="NUL")


@pytest.mark.parametrize("text", ["\ud800", "ok \udfff ok", "a\udc80"])
def test_lone_surrogate_in_text_rejected(text: str) -> None:
    _rejects(check_text, text, "message", max_bytes=MAX, match="surrogate")


@pytest.mark.parametrize("value", [None, 5, b"bytes", ["a"]])
def test_non_string_text_rejected(value: object) -> None:
    _rejects(check_text, value, "message", max_bytes=MAX, match="must be a string")


def test_text_is_returned_verbatim() -> None:
    text = "  Keep   my  spacing\nand émojis 🎉  "
    assert check_text(text, "message", max_bytes=MAX) == text


# -- role ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_role", "expected"),
    [("user", Role.USER), (" Assistant ", Role.ASSISTANT), ("SYSTEM", Role.SYSTEM), (Role.TOOL, Role.TOOL)],
)
def test_valid_roles(given_role: object, expected: Role) -> None:
    assert check_role(given_role) is expected


@pytest.mark.parametrize("value", ["bot", "", "users", None, 1, Role])
def test_invalid_role_rejected(value: object) -> None:
    _rejects(check_role, value, match="invalid role")


# -- identifiers --------------------------------------------------------------------


def test_missing_required_identifier_rejected() -> None:
    _rejects(check_identifier, None, "user_id", match="user_id is required")


def test_optional_identifier_may_be_none() -> None:
    assert check_identifier(None, "session_id", required=False) is None


@pytest.mark.parametrize("value", ["", "   ", "\n"])
def test_empty_identifier_rejected(value: str) -> None:
    _rejects(check_identifier, value, "user_id", match="empty")
    _rejects(check_identifier, value, "session_id", required=False, match="empty")


@pytest.mark.parametrize("value", [1, 1.5, b"ana", ["ana"], object()])
def test_non_string_identifier_rejected(value: object) -> None:
    _rejects(check_identifier, value, "user_id", match="must be a string")


def test_identifier_length_limit() -> None:
    assert check_identifier("a" * MAX_IDENTIFIER_LENGTH, "user_id") == "a" * MAX_IDENTIFIER_LENGTH
    _rejects(check_identifier, "a" * (MAX_IDENTIFIER_LENGTH + 1), "user_id", match="longer")


@pytest.mark.parametrize("value", ["a\x00", "\ud800"])
def test_identifier_with_nul_or_surrogate_rejected(value: str) -> None:
    _rejects(check_identifier, value, "user_id")


# -- timestamps ---------------------------------------------------------------------


def test_naive_datetime_rejected() -> None:
    _rejects(check_timestamp, datetime(2024, 5, 1, 12, 0), match="timezone-aware")


def test_naive_iso_string_rejected() -> None:
    _rejects(check_timestamp, "2024-05-01T12:00:00", match="timezone-aware")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01T12:00:00+02:00", datetime(2024, 5, 1, 10, 0, tzinfo=UTC)),
        ("2024-05-01T12:00:00Z", datetime(2024, 5, 1, 12, 0, tzinfo=UTC)),
        ("2024-05-01T23:30:00.123456-05:30", datetime(2024, 5, 2, 5, 0, 0, 123456, tzinfo=UTC)),
        (" 2024-05-01T12:00:00+00:00 ", datetime(2024, 5, 1, 12, 0, tzinfo=UTC)),
    ],
)
def test_iso_string_with_offset_converted_to_utc(text: str, expected: datetime) -> None:
    result = check_timestamp(text)
    assert result == expected
    assert result is not None and result.utcoffset() == timedelta(0)
    assert (result.hour, result.minute, result.microsecond) == (expected.hour, expected.minute, expected.microsecond)


def test_aware_datetime_converted_to_utc() -> None:
    moment = datetime(2024, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=3)))
    result = check_timestamp(moment)
    assert result == moment
    assert result is not None and result.tzinfo is not None and result.utcoffset() == timedelta(0)
    assert result.day == 31 and result.hour == 22


def test_none_timestamp_is_none() -> None:
    assert check_timestamp(None) is None


@pytest.mark.parametrize("value", ["yesterday", "2024-13-01T00:00:00+00:00", "", 1700000000, 1.5, b"2024"])
def test_unparseable_timestamp_rejected(value: object) -> None:
    _rejects(check_timestamp, value)


@example(moment=datetime(1, 1, 1), offset_minutes=60)
@given(
    moment=st.datetimes(),
    offset_minutes=st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59),
)
def test_any_aware_datetime_is_accepted_in_utc_or_rejected_as_invalid_input(
    moment: datetime, offset_minutes: int
) -> None:
    aware = moment.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
    try:
        result = check_timestamp(aware)
    except InvalidInput:
        return  # refusing an out-of-range moment is fine, as long as it is InvalidInput
    assert result == aware
    assert result is not None and result.utcoffset() == timedelta(0)


def test_timestamp_that_leaves_the_datetime_range_in_utc_is_invalid_input() -> None:
    # 0001-01-01 00:00 at +01:00 is before datetime.min in UTC.
    _rejects(check_timestamp, "0001-01-01T00:00:00+01:00")
    _rejects(check_timestamp, datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-2))))


def test_a_stored_time_stays_a_day_inside_the_calendar_but_a_filter_bound_need_not() -> None:
    _rejects(check_stored_time, "9999-12-31T00:00:00Z", match="ends of the calendar")
    _rejects(check_stored_time, "0001-01-01T23:59:59Z", match="ends of the calendar")
    assert check_stored_time("9999-12-30T23:59:59+00:00") == datetime(9999, 12, 30, 23, 59, 59, tzinfo=UTC)
    assert check_stored_time(None) is None
    assert check_timestamp("0001-01-01T00:00:00Z") == datetime.min.replace(tzinfo=UTC)


# -- metadata -----------------------------------------------------------------------


def test_metadata_nested_too_deep_or_containing_itself_is_invalid_input() -> None:
    deep: dict[str, object] = {}
    for _ in range(64):
        deep = {"a": deep}
    _rejects(check_metadata, deep, match="nested more than 64")
    _rejects(check_metadata, {"a": [deep]}, match="nested")
    assert check_metadata(deep["a"]) == deep["a"]  # type: ignore[comparison-overlap]
    looped: dict[str, object] = {}
    looped["self"] = looped
    _rejects(check_metadata, looped, match="nested")


def test_metadata_nested_in_lists_counts_every_level() -> None:
    deep: list[object] = []
    for _ in range(63):
        deep = [deep]  # 64 lists under the top-level mapping
    _rejects(check_metadata, {"a": deep}, match="nested more than 64")
    _rejects(check_metadata, {"a": ({"b": deep},)}, match="nested more than 64")
    assert check_metadata({"a": deep[0]}) == {"a": deep[0]}
    looped: list[object] = []
    looped.append(looped)
    _rejects(check_metadata, {"a": looped}, match="nested")
    _rejects(check_metadata, {"a": ["fine", ["bad \ud800"]]}, match="metadata")
    _rejects(check_metadata, {"a": [{1: "key not a string"}]}, match="keys must be strings")


def test_a_huge_whole_number_importance_is_invalid_input_not_an_overflow() -> None:
    _rejects(check_importance, 10**400, match="between 0 and 1")
    _rejects(check_importance, -(10**400), match="between 0 and 1")


def test_metadata_none_is_empty_and_copy_is_returned() -> None:
    assert check_metadata(None) == {}
    original = {"a": [1, 2], "b": {"c": None}}
    copied = check_metadata(original)
    assert copied == original
    copied["a"].append(3)
    assert original["a"] == [1, 2]


@pytest.mark.parametrize(
    "value",
    [
        {"when": datetime(2024, 1, 1, tzinfo=UTC)},
        {"thing": object()},
        {"set": {1, 2}},
        {"nan": float("nan")},
        {"inf": float("inf")},
        {(1, 2): "tuple key"},
        {"bad": "\ud800"},
    ],
)
def test_metadata_not_json_serialisable_rejected(value: dict[Any, Any]) -> None:
    _rejects(check_metadata, value, match="metadata")


@pytest.mark.parametrize("value", [[("a", 1)], "text", 5])
def test_metadata_must_be_a_mapping(value: object) -> None:
    _rejects(check_metadata, value, match="mapping")


@pytest.mark.parametrize("value", [{"note": "a\x00b"}, {"a\x00": 1}, {"nested": ["\x00"]}])
def test_metadata_with_nul_rejected(value: dict[str, Any]) -> None:
    # validation.check_metadata has an explicit NUL rule, like text and identifiers.
    _rejects(check_metadata, value, match="NUL")


# -- importance and limits ----------------------------------------------------------


@pytest.mark.parametrize("value", [0, 0.0, 0.5, 1, 1.0])
def test_importance_in_range_accepted(value: float) -> None:
    assert check_importance(value) == float(value)
    assert check_importance(None) is None


@pytest.mark.parametrize("value", [-0.01, 1.01, float("nan"), float("inf"), True, "0.5"])
def test_importance_out_of_range_rejected(value: object) -> None:
    _rejects(check_importance, value, match="importance")


@pytest.mark.parametrize("value", [0, -1, 1001, True, 1.5, "10", None])
def test_bad_limit_rejected(value: object) -> None:
    _rejects(check_limit, value)


def test_limit_bounds_accepted() -> None:
    assert check_limit(1) == 1
    assert check_limit(1000) == 1000
    assert check_limit(5000, maximum=10_000) == 5000


# -- messages -----------------------------------------------------------------------


def test_string_is_one_user_message() -> None:
    [message] = parse_messages("hello", max_bytes=MAX)
    assert message.role is Role.USER
    assert message.content == "hello"
    assert message.id is None


def test_string_with_default_id() -> None:
    [message] = parse_messages("hello", max_bytes=MAX, default_id="m-1")
    assert message.id == "m-1"


def test_list_of_dicts_parsed_in_order() -> None:
    parsed = parse_messages(
        [
            {"role": "user", "content": "hi", "name": "ana", "id": "1", "metadata": {"k": 1}},
            {"role": "assistant", "content": "hello"},
            {"content": "role defaults to user"},
        ],
        max_bytes=MAX,
    )
    assert [m.role for m in parsed] == [Role.USER, Role.ASSISTANT, Role.USER]
    assert [m.content for m in parsed] == ["hi", "hello", "role defaults to user"]
    assert parsed[0].name == "ana" and parsed[0].id == "1" and parsed[0].metadata == {"k": 1}
    assert parsed[1].name is None and parsed[1].metadata == {}


def test_single_dict_accepted() -> None:
    [message] = parse_messages({"role": "system", "content": "be nice"}, max_bytes=MAX)
    assert message.role is Role.SYSTEM


@pytest.mark.parametrize("value", [[], (), b"bytes", bytearray(b"x"), 5, None])
def test_bad_messages_container_rejected(value: object) -> None:
    _rejects(parse_messages, value, max_bytes=MAX)


def test_non_dict_item_rejected() -> None:
    _rejects(parse_messages, ["just a string in a list"], max_bytes=MAX, match=r"messages\[0\]")


def test_unknown_message_keys_rejected() -> None:
    error = _rejects(parse_messages, [{"role": "user", "content": "x", "timestamp": "now"}], max_bytes=MAX)
    assert "timestamp" in str(error)
    _rejects(parse_messages, [{"content": "x", "text": "y"}], max_bytes=MAX, match="unknown keys")


def test_missing_content_rejected() -> None:
    _rejects(parse_messages, [{"role": "user"}], max_bytes=MAX, match="no 'content'")


@pytest.mark.parametrize(
    "message",
    [
        {"content": ""},
        {"content": "   "},
        {"content": "a\x00"},
        {"content": "\ud800"},
        {"content": None},
        {"content": "x" * (MAX + 1)},
        {"role": "robot", "content": "x"},
        {"content": "x", "name": ""},
        {"content": "x", "name": 3},
        {"content": "x", "id": ""},
        {"content": "x", "id": 7},
        {"content": "x", "metadata": {"o": object()}},
        {"content": "x", "metadata": ["not", "a", "mapping"]},
    ],
)
def test_each_bad_field_in_a_message_rejected(message: dict[str, Any]) -> None:
    _rejects(parse_messages, [{"content": "fine"}, message], max_bytes=MAX, match=r"messages\[1\]|invalid role")


def test_duplicate_ids_in_one_call_rejected() -> None:
    _rejects(
        parse_messages,
        [{"content": "a", "id": "same"}, {"content": "b", "id": "same"}],
        max_bytes=MAX,
        match="same id",
    )


def test_default_id_with_several_messages_rejected() -> None:
    _rejects(parse_messages, [{"content": "a"}, {"content": "b"}], max_bytes=MAX, default_id="x", match="single")


def test_default_id_with_one_message_in_a_list() -> None:
    [message] = parse_messages([{"role": "assistant", "content": "a", "name": "bot"}], max_bytes=MAX, default_id="x")
    assert message.id == "x"
    assert message.role is Role.ASSISTANT and message.name == "bot"


@pytest.mark.parametrize("default_id", ["", "  ", 5])
def test_bad_default_id_rejected(default_id: Any) -> None:
    _rejects(parse_messages, "hello", max_bytes=MAX, default_id=default_id)
    _rejects(parse_messages, [{"content": "hello"}], max_bytes=MAX, default_id=default_id)


def test_invalid_input_is_a_value_error_and_memstrata_error() -> None:
    from memstrata import IdConflict, MemstrataError

    assert issubclass(InvalidInput, ValueError)
    assert issubclass(InvalidInput, MemstrataError)
    assert issubclass(IdConflict, InvalidInput)
