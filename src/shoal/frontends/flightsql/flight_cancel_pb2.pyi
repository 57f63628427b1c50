from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CancelStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CANCEL_STATUS_UNSPECIFIED: _ClassVar[CancelStatus]
    CANCEL_STATUS_CANCELLED: _ClassVar[CancelStatus]
    CANCEL_STATUS_CANCELLING: _ClassVar[CancelStatus]
    CANCEL_STATUS_NOT_CANCELLABLE: _ClassVar[CancelStatus]
CANCEL_STATUS_UNSPECIFIED: CancelStatus
CANCEL_STATUS_CANCELLED: CancelStatus
CANCEL_STATUS_CANCELLING: CancelStatus
CANCEL_STATUS_NOT_CANCELLABLE: CancelStatus

class CancelFlightInfoRequest(_message.Message):
    __slots__ = ("info",)
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: bytes
    def __init__(self, info: _Optional[bytes] = ...) -> None: ...

class CancelFlightInfoResult(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: CancelStatus
    def __init__(self, status: _Optional[_Union[CancelStatus, str]] = ...) -> None: ...
