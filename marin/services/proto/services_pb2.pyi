from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LogColumns(_message.Message):
    __slots__ = ("timestamp", "level", "msg", "run", "step", "has_step", "source", "extra_json", "id")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    MSG_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    HAS_STEP_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    timestamp: _containers.RepeatedScalarFieldContainer[float]
    level: _containers.RepeatedScalarFieldContainer[str]
    msg: _containers.RepeatedScalarFieldContainer[str]
    run: _containers.RepeatedScalarFieldContainer[str]
    step: _containers.RepeatedScalarFieldContainer[int]
    has_step: _containers.RepeatedScalarFieldContainer[bool]
    source: _containers.RepeatedScalarFieldContainer[str]
    extra_json: _containers.RepeatedScalarFieldContainer[str]
    id: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, timestamp: _Optional[_Iterable[float]] = ..., level: _Optional[_Iterable[str]] = ..., msg: _Optional[_Iterable[str]] = ..., run: _Optional[_Iterable[str]] = ..., step: _Optional[_Iterable[int]] = ..., has_step: _Optional[_Iterable[bool]] = ..., source: _Optional[_Iterable[str]] = ..., extra_json: _Optional[_Iterable[str]] = ..., id: _Optional[_Iterable[int]] = ...) -> None: ...

class WriteRequest(_message.Message):
    __slots__ = ("client_id", "seq", "payload", "count")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    seq: int
    payload: bytes
    count: int
    def __init__(self, client_id: _Optional[str] = ..., seq: _Optional[int] = ..., payload: _Optional[bytes] = ..., count: _Optional[int] = ...) -> None: ...

class EntryError(_message.Message):
    __slots__ = ("index", "field", "message")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    index: int
    field: str
    message: str
    def __init__(self, index: _Optional[int] = ..., field: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class WriteResponse(_message.Message):
    __slots__ = ("accepted", "errors", "duplicate")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    errors: _containers.RepeatedCompositeFieldContainer[EntryError]
    duplicate: bool
    def __init__(self, accepted: _Optional[int] = ..., errors: _Optional[_Iterable[_Union[EntryError, _Mapping]]] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class QueryRequest(_message.Message):
    __slots__ = ("run", "step", "min_level", "since", "until", "grep", "limit", "after_id", "newest")
    RUN_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    MIN_LEVEL_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    GREP_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIELD_NUMBER: _ClassVar[int]
    run: str
    step: int
    min_level: str
    since: float
    until: float
    grep: str
    limit: int
    after_id: int
    newest: bool
    def __init__(self, run: _Optional[str] = ..., step: _Optional[int] = ..., min_level: _Optional[str] = ..., since: _Optional[float] = ..., until: _Optional[float] = ..., grep: _Optional[str] = ..., limit: _Optional[int] = ..., after_id: _Optional[int] = ..., newest: _Optional[bool] = ...) -> None: ...

class QueryResponse(_message.Message):
    __slots__ = ("payload", "count", "last_id", "more")
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_ID_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    count: int
    last_id: int
    more: bool
    def __init__(self, payload: _Optional[bytes] = ..., count: _Optional[int] = ..., last_id: _Optional[int] = ..., more: _Optional[bool] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("service", "pid", "host", "started", "items", "batches", "db_bytes", "data", "version")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    DB_BYTES_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    service: str
    pid: int
    host: str
    started: float
    items: int
    batches: int
    db_bytes: int
    data: str
    version: str
    def __init__(self, service: _Optional[str] = ..., pid: _Optional[int] = ..., host: _Optional[str] = ..., started: _Optional[float] = ..., items: _Optional[int] = ..., batches: _Optional[int] = ..., db_bytes: _Optional[int] = ..., data: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class KVItem(_message.Message):
    __slots__ = ("key", "value", "version", "updated")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    version: int
    updated: float
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., version: _Optional[int] = ..., updated: _Optional[float] = ...) -> None: ...

class KVGetRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class KVGetResponse(_message.Message):
    __slots__ = ("found", "item")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    ITEM_FIELD_NUMBER: _ClassVar[int]
    found: bool
    item: KVItem
    def __init__(self, found: _Optional[bool] = ..., item: _Optional[_Union[KVItem, _Mapping]] = ...) -> None: ...

class KVPutRequest(_message.Message):
    __slots__ = ("key", "value", "expected_version")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    expected_version: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., expected_version: _Optional[int] = ...) -> None: ...

class KVPutResponse(_message.Message):
    __slots__ = ("ok", "item")
    OK_FIELD_NUMBER: _ClassVar[int]
    ITEM_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    item: KVItem
    def __init__(self, ok: _Optional[bool] = ..., item: _Optional[_Union[KVItem, _Mapping]] = ...) -> None: ...

class KVDeleteRequest(_message.Message):
    __slots__ = ("key", "expected_version")
    KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    key: str
    expected_version: int
    def __init__(self, key: _Optional[str] = ..., expected_version: _Optional[int] = ...) -> None: ...

class KVDeleteResponse(_message.Message):
    __slots__ = ("ok", "existed")
    OK_FIELD_NUMBER: _ClassVar[int]
    EXISTED_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    existed: bool
    def __init__(self, ok: _Optional[bool] = ..., existed: _Optional[bool] = ...) -> None: ...

class KVListRequest(_message.Message):
    __slots__ = ("prefix", "limit", "start_after")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    START_AFTER_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    limit: int
    start_after: str
    def __init__(self, prefix: _Optional[str] = ..., limit: _Optional[int] = ..., start_after: _Optional[str] = ...) -> None: ...

class KVListResponse(_message.Message):
    __slots__ = ("items", "more")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[KVItem]
    more: bool
    def __init__(self, items: _Optional[_Iterable[_Union[KVItem, _Mapping]]] = ..., more: _Optional[bool] = ...) -> None: ...
