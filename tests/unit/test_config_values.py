"""Configuration values alone: what each kind of value reads as and prints as, which text is
refused, that secrets never print, and writer tokens: an HMAC of the id and the principal that only
the coordinator's key makes."""

from __future__ import annotations

import pytest

from lakelog.config import (
    OPTIONS,
    Configuration,
    Secret,
    format_duration_ms,
    format_size,
    key_value_pairs,
    parse_addresses,
    parse_bool,
    parse_duration_ms,
    parse_size,
)
from lakelog.errors import InvalidConfigError, InvalidRequestError, UnknownWriterError
from lakelog.security.writer_tokens import KEY_BYTES, TOKEN_BYTES, WriterTokens, new_writer_key


@pytest.mark.parametrize("ms", [1, 250, 1000, 90_000, 3_600_000, 604_800_000, 1500])
def test_a_duration_prints_in_its_largest_whole_unit_and_reads_back(ms: int) -> None:
    assert parse_duration_ms(format_duration_ms(ms)) == ms
    assert format_duration_ms(604_800_000) == "7d" and format_duration_ms(1500) == "1500ms"


@pytest.mark.parametrize("size", [1, 1000, 4096, 64 << 20, 3 << 30])
def test_a_size_prints_in_its_largest_whole_unit_and_reads_back(size: int) -> None:
    assert parse_size(format_size(size)) == size
    assert format_size(256 << 20) == "256mb" and format_size(1000) == "1000b"


@pytest.mark.parametrize("text", ["soon", "5 parsecs", "-1s", "1.5h", ""])
def test_text_that_is_no_duration_is_refused_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match="use e.g. 100ms, 5s"):
        parse_duration_ms(text)


@pytest.mark.parametrize("text", ["big", "4 tb", "-1kb", "1.5mb"])
def test_text_that_is_no_size_is_refused_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match="use e.g. 4kb, 64mb, 1gb"):
        parse_size(text)


@pytest.mark.parametrize(("text", "value"), [("true", True), ("YES", True), (" on ", True), ("1", True), ("false", False), ("off", False), ("0", False), (False, False)])
def test_booleans_read_in_the_usual_spellings(text: str | bool, value: bool) -> None:
    assert parse_bool(text) is value


def test_a_boolean_that_is_neither_is_refused() -> None:
    with pytest.raises(ValueError, match="not a boolean: 'maybe'"):
        parse_bool("maybe")


def test_addresses_read_from_a_list_or_a_comma_separated_string() -> None:
    assert parse_addresses("a:1, b:2,,") == ("a:1", "b:2")
    assert parse_addresses(["[::1]:9123", "h:80"]) == ("[::1]:9123", "h:80")
    for bad in ("nohost", ":80", "h:port"):
        with pytest.raises(ValueError, match="is not HOST:PORT"):
            parse_addresses(bad)


def test_a_secret_never_prints_but_still_is_its_value() -> None:
    token = Secret("s3cr3t")
    assert repr(token) == "'<secret>'" and "s3cr3t" not in repr({"token": token})
    assert token == "s3cr3t" and repr(Secret("")) == "''"


def test_key_value_items_are_split_once_and_an_item_without_a_key_is_refused_naming_the_flag() -> None:
    assert key_value_pairs(["a=1", " b = x=y "], "--set") == {"a": "1", "b": "x=y"}
    with pytest.raises(InvalidConfigError, match="--property takes KEY=VALUE, got '=1'"):
        key_value_pairs(["=1"], "--property")
    with pytest.raises(InvalidRequestError, match="--spec takes KEY=VALUE"):
        key_value_pairs(["dt"], "--spec", InvalidRequestError)


def test_nested_yaml_style_keys_flatten_to_dotted_ones() -> None:
    conf = Configuration({"log": {"segment": {"max-bytes": "1mb"}}, "server.port": 7})
    assert conf.get("log.segment.max-bytes") == 1 << 20 and conf.items() == {"log.segment.max-bytes": 1 << 20, "server.port": 7}


def test_every_default_as_the_docs_print_it_reads_back_as_the_default() -> None:
    for key, option in OPTIONS.items():
        if option.default is not None:
            assert Configuration({key: option.default_text}).get(key) == option.default, key


def test_a_key_that_is_not_a_setting_is_refused_when_read() -> None:
    with pytest.raises(InvalidConfigError, match="unknown configuration key 'no.such'"):
        Configuration().get("no.such")


# ---------------------------------------------------------------- writer tokens


def test_a_token_is_short_fixed_and_the_same_for_the_same_id_and_principal() -> None:
    key = new_writer_key()
    assert len(key) == KEY_BYTES and new_writer_key() != key
    tokens = WriterTokens(key)
    token = tokens.issue(7, "alice")
    assert len(token) == TOKEN_BYTES and token == WriterTokens(key).issue(7, "alice")
    tokens.check(7, "alice", token, "produce")


@pytest.mark.parametrize(
    ("writer_id", "principal", "message"),
    [(8, "alice", "writer id 8 was not issued to principal 'alice'"), (7, "bob", "writer id 7 was not issued to principal 'bob'"), (7, "", "writer id 7 was not issued to this caller")],
    ids=["another id", "another principal", "no principal"],
)
def test_a_token_proves_only_its_own_id_and_principal(writer_id: int, principal: str, message: str) -> None:
    tokens = WriterTokens(new_writer_key())
    with pytest.raises(UnknownWriterError, match=f"produce to t bucket 0: {message}"):
        tokens.check(writer_id, principal, tokens.issue(7, "alice"), "produce to t bucket 0")


def test_a_token_made_under_another_key_is_refused() -> None:
    forged = WriterTokens(new_writer_key()).issue(7, "alice")
    with pytest.raises(UnknownWriterError):
        WriterTokens(new_writer_key()).check(7, "alice", forged, "produce")
