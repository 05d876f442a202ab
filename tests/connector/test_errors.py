"""The one error hierarchy: codes, the code registry, retry flags, structured fields."""

from __future__ import annotations

import pytest

import connector.errors as errors_module
from connector.errors import (
    AuthenticationFailedError,
    BrokerBusyError,
    ClientError,
    ConfigError,
    ConnectError,
    ConsumerOffsetNotExistError,
    CorruptRecordError,
    InvalidGroupError,
    InvalidKeyError,
    InvalidOffsetError,
    InvalidQueueError,
    InvalidTopicError,
    KvConfigNotExistError,
    MessageIllegalError,
    MessageNotExistError,
    MessageTooLargeError,
    NoPermissionError,
    NotFoundError,
    NotMasterError,
    PyMQError,
    RemotingError,
    RemotingTimeoutError,
    ServiceNotAvailableError,
    StoreError,
    StoreLockedError,
    TopicNotExistError,
    TransactionDecidedError,
    UnsupportedMediaTypeError,
    error_for_code,
)


def all_error_classes() -> list[type[PyMQError]]:
    found: list[type[PyMQError]] = []
    stack: list[type[PyMQError]] = [PyMQError]
    while stack:
        cls = stack.pop()
        if cls.__module__ == "connector.errors" and cls not in found:
            found.append(cls)
            stack.extend(cls.__subclasses__())
    return found


ERROR_CLASSES = all_error_classes()
CODED_CLASSES = [cls for cls in ERROR_CLASSES if cls is not PyMQError]

EXPECTED_CODES = {
    PyMQError: "UNKNOWN_ERROR",
    ClientError: "BAD_REQUEST",
    MessageIllegalError: "MESSAGE_ILLEGAL",
    MessageTooLargeError: "MESSAGE_SIZE_EXCEEDED",
    InvalidTopicError: "TOPIC_ILLEGAL",
    InvalidGroupError: "GROUP_ILLEGAL",
    InvalidKeyError: "KEY_ILLEGAL",
    InvalidOffsetError: "OFFSET_ILLEGAL",
    TopicNotExistError: "TOPIC_NOT_EXIST",
    NoPermissionError: "NO_PERMISSION",
    AuthenticationFailedError: "AUTHENTICATION_FAILED",
    BrokerBusyError: "SYSTEM_BUSY",
    ServiceNotAvailableError: "SERVICE_NOT_AVAILABLE",
    NotMasterError: "NOT_MASTER",
    RemotingError: "REMOTING_ERROR",
    ConnectError: "CONNECT_FAILED",
    RemotingTimeoutError: "TIMEOUT",
    StoreError: "STORE_ERROR",
    CorruptRecordError: "CORRUPT_RECORD",
    StoreLockedError: "STORE_LOCKED",
    ConfigError: "CONFIG_ILLEGAL",
    InvalidQueueError: "QUEUE_ID_ILLEGAL",
    UnsupportedMediaTypeError: "UNSUPPORTED_MEDIA_TYPE",
    NotFoundError: "NOT_FOUND",
    MessageNotExistError: "MESSAGE_NOT_EXIST",
    KvConfigNotExistError: "KV_NOT_EXIST",
    ConsumerOffsetNotExistError: "OFFSET_NOT_EXIST",
    TransactionDecidedError: "TRANSACTION_ALREADY_DECIDED",
}


def build(cls: type[PyMQError], message: str = "boom") -> PyMQError:
    if cls is MessageTooLargeError:
        return MessageTooLargeError(10, 5)
    return cls(message)


def test_every_class_is_known_and_exported() -> None:
    assert set(ERROR_CLASSES) == set(EXPECTED_CODES)
    exported = {name for name in errors_module.__all__ if name != "error_for_code"}
    assert exported == {cls.__name__ for cls in ERROR_CLASSES}


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_codes(cls: type[PyMQError]) -> None:
    assert cls.code == EXPECTED_CODES[cls]
    assert "code" in cls.__dict__  # each class states its own code


def test_codes_are_unique() -> None:
    codes = [cls.code for cls in ERROR_CLASSES]
    assert len(codes) == len(set(codes))


@pytest.mark.parametrize(
    "cls",
    [c for c in CODED_CLASSES if c is not MessageTooLargeError],
    ids=lambda c: c.__name__,
)
def test_error_for_code_round_trips(cls: type[PyMQError]) -> None:
    original = build(cls, "what went wrong")
    wire = original.to_dict()
    assert {"code": cls.code, "message": "what went wrong"}.items() <= wire.items()
    rebuilt = error_for_code(wire["code"], wire["message"])
    assert type(rebuilt) is cls
    assert rebuilt.code == cls.code
    assert rebuilt.message == "what went wrong"
    assert rebuilt.retriable == original.retriable
    assert rebuilt.http_status == original.http_status


def test_error_for_code_message_too_large() -> None:
    # The wire form has no size fields; the rebuilt error is still a MessageIllegalError.
    rebuilt = error_for_code("MESSAGE_SIZE_EXCEEDED", "message of 10 bytes exceeds 5")
    assert isinstance(rebuilt, MessageIllegalError)
    assert isinstance(rebuilt, ValueError)
    assert rebuilt.message == "message of 10 bytes exceeds 5"
    assert rebuilt.retriable is False


def test_error_for_code_corrupt_record() -> None:
    rebuilt = error_for_code("CORRUPT_RECORD", "bad magic")
    assert isinstance(rebuilt, CorruptRecordError)
    assert rebuilt.position == -1


def test_error_for_unknown_code() -> None:
    err = error_for_code("SOMETHING_NEW", "from a newer broker")
    assert type(err) is PyMQError
    assert err.code == "SOMETHING_NEW"
    assert err.message == "from a newer broker"
    assert err.to_dict() == {"code": "SOMETHING_NEW", "message": "from a newer broker"}
    assert PyMQError.code == "UNKNOWN_ERROR"  # the class is untouched
    assert error_for_code("ANOTHER").message == "ANOTHER"


def test_error_for_code_without_message_uses_the_code() -> None:
    err = error_for_code("SYSTEM_BUSY")
    assert isinstance(err, BrokerBusyError)
    assert err.message == "SYSTEM_BUSY"
    assert str(err) == "SYSTEM_BUSY"


RETRIABLE = {BrokerBusyError, ServiceNotAvailableError, NotMasterError, RemotingError, ConnectError}
RETRIABLE.add(RemotingTimeoutError)


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_retriable_flags(cls: type[PyMQError]) -> None:
    assert cls.retriable is (cls in RETRIABLE)
    assert build(cls).retriable is (cls in RETRIABLE)


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_only_topic_not_exist_invalidates_metadata(cls: type[PyMQError]) -> None:
    assert cls.invalid_metadata is (cls is TopicNotExistError)


@pytest.mark.parametrize(
    ("child", "parent"),
    [
        (ClientError, PyMQError),
        (MessageIllegalError, ClientError),
        (MessageTooLargeError, MessageIllegalError),
        (InvalidTopicError, ClientError),
        (InvalidGroupError, ClientError),
        (InvalidKeyError, ClientError),
        (InvalidOffsetError, ClientError),
        (TopicNotExistError, PyMQError),
        (NoPermissionError, PyMQError),
        (AuthenticationFailedError, NoPermissionError),
        (BrokerBusyError, PyMQError),
        (ServiceNotAvailableError, PyMQError),
        (NotMasterError, ServiceNotAvailableError),
        (RemotingError, PyMQError),
        (ConnectError, RemotingError),
        (RemotingTimeoutError, RemotingError),
        (RemotingTimeoutError, TimeoutError),
        (StoreError, PyMQError),
        (CorruptRecordError, StoreError),
        (ConfigError, PyMQError),
        (ConfigError, ValueError),
        (MessageIllegalError, ValueError),
        (InvalidTopicError, ValueError),
        (InvalidGroupError, ValueError),
        (InvalidKeyError, ValueError),
        (InvalidOffsetError, ValueError),
        (PyMQError, Exception),
    ],
)
def test_hierarchy(child: type[BaseException], parent: type[BaseException]) -> None:
    assert issubclass(child, parent)


@pytest.mark.parametrize(
    "cls",
    [TopicNotExistError, BrokerBusyError, RemotingError, StoreError, CorruptRecordError],
)
def test_server_side_errors_are_not_client_errors(cls: type[PyMQError]) -> None:
    assert not issubclass(cls, ClientError)


@pytest.mark.parametrize(
    ("cls", "status"),
    [
        (PyMQError, 500),
        (ClientError, 400),
        (MessageIllegalError, 400),
        (MessageTooLargeError, 413),
        (InvalidTopicError, 400),
        (TopicNotExistError, 404),
        (NoPermissionError, 403),
        (AuthenticationFailedError, 401),
        (BrokerBusyError, 503),
        (ServiceNotAvailableError, 503),
        (NotMasterError, 421),
        (RemotingError, 502),
        (ConnectError, 502),
        (RemotingTimeoutError, 504),
        (StoreError, 500),
        (CorruptRecordError, 500),
        (ConfigError, 400),
        (TransactionDecidedError, 409),
    ],
)
def test_http_status(cls: type[PyMQError], status: int) -> None:
    assert cls.http_status == status


def test_message_too_large_fields() -> None:
    err = MessageTooLargeError(5_000_000, 4_194_304)
    assert isinstance(err, ValueError)
    assert isinstance(err, MessageIllegalError)
    assert err.size == 5_000_000
    assert err.max_size == 4_194_304
    assert err.code == "MESSAGE_SIZE_EXCEEDED"
    assert "5000000" in str(err)
    assert "4194304" in str(err)
    with pytest.raises(ValueError):
        raise err


def test_corrupt_record_position() -> None:
    err = CorruptRecordError("bad magic", position=4096)
    assert err.position == 4096
    assert err.fields == {"position": 4096}
    assert err.message == "bad magic"
    assert CorruptRecordError("x").position == -1


def test_message_fields_and_repr() -> None:
    err = InvalidTopicError("topic name '..' is bad", topic="..")
    assert err.message == "topic name '..' is bad"
    assert str(err) == "topic name '..' is bad"
    assert err.fields == {"topic": ".."}
    assert (
        repr(err) == "InvalidTopicError(code='TOPIC_ILLEGAL', message=\"topic name '..' is bad\")"
    )
    default = NoPermissionError()
    assert default.message == "NO_PERMISSION"
    assert str(default) == "NO_PERMISSION"


def test_errors_can_be_caught_as_the_root() -> None:
    with pytest.raises(PyMQError) as info:
        raise ConnectError("refused")
    assert info.value.retriable is True
    assert info.value.code == "CONNECT_FAILED"


def test_structured_fields_travel_in_the_wire_form() -> None:
    err = InvalidOffsetError("past the end", min_offset=0, max_offset=5, raw=object())
    assert err.to_dict() == {
        "code": "OFFSET_ILLEGAL",
        "message": "past the end",
        "min_offset": 0,
        "max_offset": 5,
    }
