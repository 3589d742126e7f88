"""The messages of gpusortd's wire protocol (proto/gpusort.proto), built at import time.

Why not the ``_pb2`` module that protoc generates: generated code is tied to the protobuf
runtime that matches the protoc that made it. Debian 12 ships protobuf 3.21 (Python package
4.21, C++ backend) while other machines run 5.x to 7.x (upb backend); a ``_pb2`` file made by one
protoc is refused by the other runtime ("Descriptors cannot be created directly" or a gencode
version check), and we cannot count on a protoc on the user's machine at install time.

What every runtime since 3.x accepts unchanged is a serialized ``FileDescriptorProto`` added to
a ``DescriptorPool``: so this module writes the schema as a small table, builds the
``FileDescriptorProto`` with ``descriptor_pb2``, and asks the runtime for the message classes
(``message_factory.GetMessageClass`` where it exists, 4.22 and later;
``MessageFactory.GetPrototype`` before that). The encoding itself is then protobuf's own, with
its handling of unknown fields, UTF-8 and so on. ``tests/test_proto.py`` checks the table
against ``protoc``'s reading of proto/gpusort.proto field by field, so the two cannot drift
apart silently.

Only the messages a client sends or receives are listed; all of gpusort.proto's are.
"""

from __future__ import annotations

try:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError as e:  # pragma: no cover - depends on the machine
    raise ImportError(
        "gpusort needs the protobuf runtime for Python (module google.protobuf): on Debian or "
        "Ubuntu 'apt-get install python3-protobuf' and use /usr/bin/python3, elsewhere "
        "'pip install protobuf'"
    ) from e

PACKAGE = "gpusort.wire"

# Enums: name -> [(value name, number)], exactly as in gpusort.proto.
ENUMS: dict[str, list[tuple[str, int]]] = {
    "MessageType": [
        ("MESSAGE_TYPE_NONE", 0),
        ("MESSAGE_TYPE_HELLO", 0x0001),
        ("MESSAGE_TYPE_ALLOCATE", 0x0002),
        ("MESSAGE_TYPE_RELEASE", 0x0003),
        ("MESSAGE_TYPE_SUBMIT", 0x0004),
        ("MESSAGE_TYPE_CANCEL", 0x0005),
        ("MESSAGE_TYPE_JOB_STATUS", 0x0006),
        ("MESSAGE_TYPE_DAEMON_STATUS", 0x0007),
        ("MESSAGE_TYPE_ERROR", 0x8000),
        ("MESSAGE_TYPE_HELLO_REPLY", 0x8001),
        ("MESSAGE_TYPE_ALLOCATE_REPLY", 0x8002),
        ("MESSAGE_TYPE_RELEASE_REPLY", 0x8003),
        ("MESSAGE_TYPE_SUBMIT_REPLY", 0x8004),
        ("MESSAGE_TYPE_CANCEL_REPLY", 0x8005),
        ("MESSAGE_TYPE_JOB_STATUS_REPLY", 0x8006),
        ("MESSAGE_TYPE_DAEMON_STATUS_REPLY", 0x8007),
        ("MESSAGE_TYPE_PROGRESS", 0xC001),
        ("MESSAGE_TYPE_JOB_FINISHED", 0xC002),
    ],
    "StatusCode": [
        ("OK", 0),
        ("BAD_REQUEST", 1),
        ("UNSUPPORTED_VERSION", 2),
        ("NOT_FOUND", 3),
        ("TOO_LARGE", 4),
        ("REJECTED_BUSY", 5),
        ("UNAUTHORIZED", 6),
        ("CANCELLED", 7),
        ("INTERNAL", 8),
        ("BAD_FD", 9),
        ("PROTOCOL_ERROR", 10),
        ("FAILED_PRECONDITION", 11),
        ("OUT_OF_MEMORY", 12),
        ("SHUTTING_DOWN", 13),
    ],
    "DType": [
        ("DTYPE_UNSPECIFIED", 0),
        ("DTYPE_U32", 1),
        ("DTYPE_I32", 2),
        ("DTYPE_U64", 3),
        ("DTYPE_I64", 4),
        ("DTYPE_F32", 5),
        ("DTYPE_F64", 6),
    ],
    "Order": [("ORDER_ASCENDING", 0), ("ORDER_DESCENDING", 1)],
    "FloatOrder": [("FLOAT_ORDER_TOTAL", 0), ("FLOAT_ORDER_NUMPY", 1)],
    "JobKind": [("JOB_KIND_SORT", 0), ("JOB_KIND_ARGSORT", 1), ("JOB_KIND_SORT_RECORDS", 2),
                ("JOB_KIND_ARGSORT_RECORDS", 3)],
    "ColumnType": [
        ("COLUMN_TYPE_UNSPECIFIED", 0),
        ("COLUMN_TYPE_U32", 1),
        ("COLUMN_TYPE_I32", 2),
        ("COLUMN_TYPE_U64", 3),
        ("COLUMN_TYPE_I64", 4),
        ("COLUMN_TYPE_F32", 5),
        ("COLUMN_TYPE_F64", 6),
        ("COLUMN_TYPE_U128", 7),
        ("COLUMN_TYPE_I128", 8),
        ("COLUMN_TYPE_BYTES", 9),
    ],
    "JobState": [
        ("JOB_STATE_UNSPECIFIED", 0),
        ("JOB_STATE_QUEUED", 1),
        ("JOB_STATE_RUNNING", 2),
        ("JOB_STATE_SUCCEEDED", 3),
        ("JOB_STATE_FAILED", 4),
        ("JOB_STATE_CANCELLED", 5),
    ],
}

# Messages: name -> [(field name, number, type[, oneof])]. A type is a scalar name, "repeated "
# before it for a repeated field, or the name of an enum or message above/below.
MESSAGES: dict[str, list[tuple]] = {
    "Status": [("code", 1, "StatusCode"), ("message", 2, "string")],
    "KeyField": [("type", 1, "ColumnType"), ("offset", 2, "uint32"), ("length", 3, "uint32"),
                 ("order", 4, "Order")],
    "HelloRequest": [("min_version", 1, "uint32"), ("max_version", 2, "uint32"),
                     ("client_name", 3, "string")],
    "ServerInfo": [("server_version", 1, "string"), ("pid", 2, "uint32"),
                   ("devices", 3, "repeated string"), ("max_body_bytes", 4, "uint32"),
                   ("max_fds_per_frame", 5, "uint32"), ("max_buffer_bytes", 6, "uint64"),
                   ("pinned_pool_bytes", 7, "uint64")],
    "HelloReply": [("status", 1, "Status"), ("version", 2, "uint32"), ("server", 3, "ServerInfo")],
    "AllocateRequest": [("bytes", 1, "uint64")],
    "AllocateReply": [("status", 1, "Status"), ("buffer_id", 2, "uint64"), ("size", 3, "uint64")],
    "ReleaseRequest": [("buffer_id", 1, "uint64")],
    "ReleaseReply": [("status", 1, "Status")],
    "DataRef": [("buffer_id", 1, "uint64", "source"), ("attached_fd", 2, "uint32", "source"),
                ("offset", 3, "uint64")],
    "SubmitRequest": [("dtype", 1, "DType"), ("order", 2, "Order"), ("count", 3, "uint64"),
                      ("keys", 4, "DataRef"), ("value_bytes", 5, "uint32"),
                      ("values", 6, "DataRef"), ("keys_out", 7, "DataRef"),
                      ("values_out", 8, "DataRef"), ("in_place", 9, "bool"),
                      ("stable", 10, "bool"), ("float_order", 11, "FloatOrder"),
                      ("kind", 12, "JobKind"), ("index_bytes", 13, "uint32"),
                      ("indices_out", 14, "DataRef"), ("profile", 15, "bool"),
                      ("journal", 16, "DataRef"), ("record_bytes", 17, "uint32"),
                      ("key_fields", 18, "repeated KeyField")],
    "SubmitReply": [("status", 1, "Status"), ("job_id", 2, "uint64"),
                    ("queue_position", 3, "uint32")],
    "CancelRequest": [("job_id", 1, "uint64")],
    "CancelReply": [("status", 1, "Status")],
    "JobInfo": [("job_id", 1, "uint64"), ("state", 2, "JobState"), ("dtype", 3, "DType"),
                ("count", 4, "uint64"), ("bytes", 5, "uint64"), ("queue_position", 6, "uint32"),
                ("round", 7, "uint32"), ("bytes_done", 8, "uint64"), ("bytes_total", 9, "uint64"),
                ("seconds", 10, "double"), ("client_pid", 11, "uint32"),
                ("host_memory", 12, "uint64"), ("lean", 13, "bool")],
    "JobStatusRequest": [("job_id", 1, "uint64")],
    "JobStatusReply": [("status", 1, "Status"), ("job", 2, "JobInfo")],
    "DaemonStatusRequest": [],
    "DeviceStatus": [("name", 1, "string"), ("model", 2, "string"),
                     ("memory_total", 3, "uint64"), ("memory_free", 4, "uint64"),
                     ("memory_budget", 5, "uint64"), ("running_jobs", 6, "uint32")],
    "Totals": [("jobs_submitted", 1, "uint64"), ("jobs_succeeded", 2, "uint64"),
               ("jobs_failed", 3, "uint64"), ("jobs_cancelled", 4, "uint64"),
               ("jobs_rejected", 5, "uint64"), ("bytes_sorted", 6, "uint64"),
               ("connections", 7, "uint64")],
    "DaemonStatusReply": [("status", 1, "Status"), ("server_version", 2, "string"),
                          ("uptime_seconds", 3, "double"), ("devices", 4, "repeated DeviceStatus"),
                          ("host_memory_budget", 5, "uint64"), ("host_memory_used", 6, "uint64"),
                          ("pinned_pool_bytes", 7, "uint64"), ("pinned_pool_used", 8, "uint64"),
                          ("buffers", 9, "uint32"), ("clients", 10, "uint32"),
                          ("queued_jobs", 11, "uint32"), ("running_jobs", 12, "uint32"),
                          ("jobs", 13, "repeated JobInfo"), ("totals", 14, "Totals")],
    "ErrorReply": [("status", 1, "Status")],
    "ProgressEvent": [("job_id", 1, "uint64"), ("round", 2, "uint32"),
                      ("bytes_done", 3, "uint64"), ("bytes_total", 4, "uint64"),
                      ("rate", 5, "double"), ("rounds", 6, "uint32")],
    "JobReport": [("elements", 1, "uint64"), ("bytes", 2, "uint64"), ("seconds", 3, "double"),
                  ("rate", 4, "double"), ("engine", 5, "string"), ("devices", 6, "repeated string"),
                  ("chunks", 7, "uint64"), ("rounds", 8, "uint32"),
                  ("compensated_chunks", 9, "uint64"), ("queue_seconds", 10, "double"),
                  ("stages", 11, "repeated StageProfile"), ("path", 12, "string"),
                  ("host_memory_limit", 13, "uint64"), ("host_memory_bytes", 14, "uint64")],
    "StageProfile": [("device", 1, "string"), ("round", 2, "uint32"), ("stage", 3, "string"),
                     ("chunks", 4, "uint64"), ("bytes", 5, "uint64"),
                     ("busy_seconds", 6, "double"), ("first_start", 7, "double"),
                     ("last_end", 8, "double"), ("round_start", 9, "double")],
    "JobFinishedEvent": [("job_id", 1, "uint64"), ("status", 2, "Status"),
                         ("report", 3, "JobReport")],
}

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": _F.TYPE_DOUBLE,
    "uint32": _F.TYPE_UINT32,
    "uint64": _F.TYPE_UINT64,
    "int32": _F.TYPE_INT32,
    "int64": _F.TYPE_INT64,
    "bool": _F.TYPE_BOOL,
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
}


def file_descriptor_proto() -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of the table above (what protoc would make of gpusort.proto)."""
    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.name = "gpusort/wire/gpusort_runtime.proto"  # a name of our own in a private pool
    fdp.package = PACKAGE
    fdp.syntax = "proto3"
    for name, values in ENUMS.items():
        e = fdp.enum_type.add()
        e.name = name
        for value_name, number in values:
            v = e.value.add()
            v.name = value_name
            v.number = number
    for name, fields in MESSAGES.items():
        m = fdp.message_type.add()
        m.name = name
        oneofs: list[str] = []
        for spec in fields:
            fname, number, ftype = spec[0], spec[1], spec[2]
            f = m.field.add()
            f.name = fname
            f.number = number
            f.json_name = _json_name(fname)
            f.label = _F.LABEL_OPTIONAL
            if ftype.startswith("repeated "):
                f.label = _F.LABEL_REPEATED
                ftype = ftype[len("repeated "):]
            if ftype in _SCALARS:
                f.type = _SCALARS[ftype]
            elif ftype in ENUMS:
                f.type = _F.TYPE_ENUM
                f.type_name = f".{PACKAGE}.{ftype}"
            elif ftype in MESSAGES:
                f.type = _F.TYPE_MESSAGE
                f.type_name = f".{PACKAGE}.{ftype}"
            else:  # a typo in the table: fail at import, not on the wire
                raise AssertionError(f"gpusort._proto: unknown type {ftype!r} of {name}.{fname}")
            if len(spec) > 3:
                if spec[3] not in oneofs:
                    oneofs.append(spec[3])
                    m.oneof_decl.add().name = spec[3]
                f.oneof_index = oneofs.index(spec[3])
    return fdp


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _build():
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(file_descriptor_proto().SerializeToString())
    get_class = getattr(message_factory, "GetMessageClass", None)
    factory = None if get_class is not None else message_factory.MessageFactory(pool)
    classes = {}
    for name in MESSAGES:
        desc = pool.FindMessageTypeByName(f"{PACKAGE}.{name}")
        classes[name] = get_class(desc) if get_class is not None else factory.GetPrototype(desc)
    return classes


_classes = _build()
globals().update(_classes)

# Enum values as module constants (StatusCode names stay bare, as in the proto).
for _enum, _values in ENUMS.items():
    for _name, _number in _values:
        globals()[_name] = _number

STATUS_NAMES: dict[int, str] = {number: name for name, number in ENUMS["StatusCode"]}


def status_name(code: int) -> str:
    """The StatusCode's name; codes this client does not know are failures named CODE_<n>."""
    return STATUS_NAMES.get(code, f"CODE_{code}")
