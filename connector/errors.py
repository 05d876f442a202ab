"""The one error hierarchy of pymq, shared by the servers and the client.

Every error has a ``code`` (a stable string such as ``"TOPIC_NOT_EXIST"``) and
class flags that drive retries; callers ask ``error.retriable`` instead of
chaining ``isinstance`` checks. The HTTP edge maps codes to status codes once.

    PyMQError
    ├── ClientError                     bad input from the caller (never retried)
    │   ├── MessageIllegalError         MESSAGE_ILLEGAL: body, size, properties
    │   │   └── MessageTooLargeError    MESSAGE_SIZE_EXCEEDED (ValueError)
    │   ├── InvalidTopicError           TOPIC_ILLEGAL: name rules, reserved topics
    │   ├── InvalidGroupError           GROUP_ILLEGAL
    │   ├── InvalidKeyError             KEY_ILLEGAL: property names/values, keys
    │   └── InvalidOffsetError          OFFSET_ILLEGAL
    │   ├── InvalidQueueError           QUEUE_ID_ILLEGAL: no such queue of the topic
    │   └── UnsupportedMediaTypeError   UNSUPPORTED_MEDIA_TYPE (415)
    ├── TopicNotExistError              TOPIC_NOT_EXIST (invalid_metadata)
    ├── NotFoundError                   NOT_FOUND (404)
    │   ├── MessageNotExistError        MESSAGE_NOT_EXIST
    │   ├── KvConfigNotExistError       KV_NOT_EXIST
    │   └── ConsumerOffsetNotExistError OFFSET_NOT_EXIST
    ├── NoPermissionError               NO_PERMISSION (403)
    │   └── AuthenticationFailedError   AUTHENTICATION_FAILED (401): unsigned, unknown
    │                                   key, bad or replayed signature (remoting: 16)
    ├── BrokerBusyError                 SYSTEM_BUSY (retriable)
    ├── ServiceNotAvailableError        SERVICE_NOT_AVAILABLE (retriable)
    │   └── NotMasterError              NOT_MASTER (421): a slave refuses writes
    ├── RemotingError                   connection / timeout (retriable)
    │   ├── ConnectError                CONNECT_FAILED
    │   └── RemotingTimeoutError        TIMEOUT
    ├── StoreError                      a broken store invariant
    │   ├── CorruptRecordError          CORRUPT_RECORD: bytes that are not a record
    │   └── StoreLockedError            STORE_LOCKED: another process owns the store
    └── ConfigError                     CONFIG_ILLEGAL: a bad setting
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AuthenticationFailedError",
    "BrokerBusyError",
    "ClientError",
    "ConfigError",
    "ConnectError",
    "ConsumerOffsetNotExistError",
    "CorruptRecordError",
    "InvalidGroupError",
    "InvalidKeyError",
    "InvalidOffsetError",
    "InvalidQueueError",
    "InvalidTopicError",
    "KvConfigNotExistError",
    "MessageIllegalError",
    "MessageNotExistError",
    "MessageTooLargeError",
    "NoPermissionError",
    "NotFoundError",
    "NotMasterError",
    "PyMQError",
    "RemotingError",
    "RemotingTimeoutError",
    "ServiceNotAvailableError",
    "StoreError",
    "StoreLockedError",
    "TopicNotExistError",
    "TransactionDecidedError",
    "UnsupportedMediaTypeError",
    "error_for_code",
]

_REGISTRY: dict[str, type[PyMQError]] = {}


class PyMQError(Exception):
    """Root of every pymq error. ``code`` is stable; ``message`` is for people."""

    code: ClassVar[str] = "UNKNOWN_ERROR"
    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False
    http_status: ClassVar[int] = 500

    def __init__(self, message: str = "", **fields: Any) -> None:
        super().__init__(message or self.code)
        self.message = message or self.code
        self.fields = fields

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            _REGISTRY.setdefault(cls.code, cls)

    def to_dict(self) -> dict[str, Any]:
        """The wire form: code, message and the structured fields that are plain values."""
        out: dict[str, Any] = {
            k: v for k, v in self.fields.items() if isinstance(v, (int, str, float, bool))
        }
        out.update(code=self.code, message=self.message)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class ClientError(PyMQError):
    code = "BAD_REQUEST"
    http_status = 400


class MessageIllegalError(ClientError, ValueError):
    code = "MESSAGE_ILLEGAL"


class MessageTooLargeError(MessageIllegalError):
    code = "MESSAGE_SIZE_EXCEEDED"
    http_status = 413

    def __init__(self, size: int = 0, max_size: int = 0, message: str = "") -> None:
        super().__init__(
            message or f"message of {size} bytes exceeds the limit of {max_size} bytes"
        )
        self.size = size
        self.max_size = max_size


class InvalidTopicError(ClientError, ValueError):
    code = "TOPIC_ILLEGAL"


class InvalidGroupError(ClientError, ValueError):
    code = "GROUP_ILLEGAL"


class InvalidKeyError(ClientError, ValueError):
    code = "KEY_ILLEGAL"


class InvalidOffsetError(ClientError, ValueError):
    code = "OFFSET_ILLEGAL"


class InvalidQueueError(ClientError, ValueError):
    code = "QUEUE_ID_ILLEGAL"


class UnsupportedMediaTypeError(ClientError):
    code = "UNSUPPORTED_MEDIA_TYPE"
    http_status = 415


class NotFoundError(PyMQError):
    code = "NOT_FOUND"
    http_status = 404


class TransactionDecidedError(ClientError):
    """An END_TRANSACTION that contradicts the decision taken on that half already
    (a commit after a rollback, or the other way round). ``decision``: the one taken."""

    code = "TRANSACTION_ALREADY_DECIDED"
    http_status = 409


class MessageNotExistError(NotFoundError):
    code = "MESSAGE_NOT_EXIST"


class KvConfigNotExistError(NotFoundError):
    code = "KV_NOT_EXIST"


class ConsumerOffsetNotExistError(NotFoundError):
    code = "OFFSET_NOT_EXIST"


class TopicNotExistError(PyMQError):
    code = "TOPIC_NOT_EXIST"
    invalid_metadata = True
    http_status = 404


class NoPermissionError(PyMQError):
    code = "NO_PERMISSION"
    http_status = 403


class AuthenticationFailedError(NoPermissionError):
    """Who sent the request is not known: no signature, an unknown access key, a
    signature that does not match, a REST request replayed or out of its time window."""

    code = "AUTHENTICATION_FAILED"
    http_status = 401


class BrokerBusyError(PyMQError):
    code = "SYSTEM_BUSY"
    retriable = True
    http_status = 503


class ServiceNotAvailableError(PyMQError):
    code = "SERVICE_NOT_AVAILABLE"
    retriable = True
    http_status = 503


class NotMasterError(ServiceNotAvailableError):
    """A write sent to a slave: only the master of a broker name takes writes.
    ``master_addr`` names the master's remoting address when the slave knows it."""

    code = "NOT_MASTER"
    http_status = 421  # Misdirected Request: the same request, sent to the master, works


class RemotingError(PyMQError):
    code = "REMOTING_ERROR"
    retriable = True
    http_status = 502


class ConnectError(RemotingError):
    code = "CONNECT_FAILED"


class RemotingTimeoutError(RemotingError, TimeoutError):
    code = "TIMEOUT"
    http_status = 504


class StoreError(PyMQError):
    code = "STORE_ERROR"


class CorruptRecordError(StoreError):
    """Bytes that should hold a CommitLog record do not."""

    code = "CORRUPT_RECORD"

    def __init__(self, message: str, *, position: int = -1) -> None:
        super().__init__(message, position=position)
        self.position = position


class StoreLockedError(StoreError):
    """Another process holds the store's lock (``pid``: its process id, 0 if unknown)."""

    code = "STORE_LOCKED"

    def __init__(self, message: str, *, pid: int = 0) -> None:
        super().__init__(message, pid=pid)
        self.pid = pid


class ConfigError(PyMQError, ValueError):
    code = "CONFIG_ILLEGAL"
    http_status = 400


def error_for_code(code: str, message: str = "") -> PyMQError:
    """Rebuild an error from its wire form (``{"code", "message"}``)."""
    cls = _REGISTRY.get(code)
    if cls is None:
        err = PyMQError(message or code)
        err.code = code  # type: ignore[misc]
        return err
    if cls is MessageTooLargeError:
        return MessageTooLargeError(message=message)
    if cls in (CorruptRecordError, StoreLockedError):
        return cls(message)
    return cls(message)
