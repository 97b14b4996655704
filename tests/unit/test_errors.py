"""The error hierarchy's own rules: what a message keeps, and how an error names what it is about."""

from __future__ import annotations

from lakelog.errors import MAX_MESSAGE_BYTES, OffsetOutOfRangeError, TableNotExistError


def test_an_error_that_does_not_name_its_subject_gets_it_in_front_and_keeps_its_class_and_fields() -> None:
    gone = TableNotExistError("no table or partition has id 7")
    named = gone.naming("shop.orders bucket 2")
    assert type(named) is TableNotExistError and named.code == gone.code
    assert str(named) == named.message == "shop.orders bucket 2: no table or partition has id 7"
    assert str(gone) == "no table or partition has id 7"  # the server's error is left as it came
    out_of_range = OffsetOutOfRangeError(3, 10, 20).naming("shop.orders bucket 3")
    assert (out_of_range.bucket, out_of_range.offset, out_of_range.earliest) == (3, 10, 20)
    assert out_of_range.message.startswith("shop.orders bucket 3: ")


def test_an_error_that_names_its_subject_already_is_the_same_error() -> None:
    error = TableNotExistError("table shop.orders bucket 2 is gone")
    assert error.naming("shop.orders bucket 2") is error


def test_a_named_message_still_fits_the_wire() -> None:
    named = TableNotExistError("x" * MAX_MESSAGE_BYTES).naming("shop.orders bucket 0")
    assert len(named.message.encode()) <= MAX_MESSAGE_BYTES and named.message.startswith("shop.orders bucket 0: ")
