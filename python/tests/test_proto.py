"""The runtime-built messages against proto/gpusort.proto and the README's sample bytes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpusort import _proto as pb
from gpusort import _wire as w

PROTO = Path(__file__).resolve().parents[2] / "proto" / "gpusort.proto"


def test_readme_sample_frames():
    # proto/README.md, "A sample session": the HELLO and SUBMIT frames byte by byte.
    body = pb.HelloRequest(min_version=1, max_version=1, client_name="example").SerializeToString()
    frame = w.encode_header(w.HELLO, 1, len(body)) + body
    assert frame == bytes.fromhex(
        "47 50 53 52  01 00  01 00  0d 00 00 00  00 00 00 00  01 00 00 00 00 00 00 00"
        "08 01 10 01 1a 07 65 78 61 6d 70 6c 65")
    req = pb.SubmitRequest(dtype=pb.DTYPE_U64, count=1_000_000,
                           keys=pb.DataRef(buffer_id=1), in_place=True)
    body = req.SerializeToString()
    frame = w.encode_header(w.SUBMIT, 3, len(body)) + body
    assert frame == bytes.fromhex(
        "47 50 53 52  01 00  04 00  0c 00 00 00  00 00 00 00  03 00 00 00 00 00 00 00"
        "08 03 18 c0 84 3d 22 02 08 01 48 01")


def test_oneof_and_defaults():
    ref = pb.DataRef(attached_fd=0, offset=128)
    assert ref.WhichOneof("source") == "attached_fd"
    again = pb.DataRef()
    again.ParseFromString(ref.SerializeToString())
    assert again.WhichOneof("source") == "attached_fd" and again.offset == 128
    assert pb.status_name(4) == "TOO_LARGE" and pb.status_name(99) == "CODE_99"


@pytest.mark.skipif(shutil.which("protoc") is None or not PROTO.exists(),
                    reason="protoc (Debian protobuf-compiler) not installed")
def test_table_matches_gpusort_proto(tmp_path):
    """Every enum and message of gpusort.proto, field by field, as protoc reads the file."""
    from google.protobuf import descriptor_pb2
    out = tmp_path / "set.pb"
    subprocess.run(["protoc", f"--proto_path={PROTO.parent}", f"--descriptor_set_out={out}",
                    PROTO.name], check=True)
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(out.read_bytes())
    theirs = fds.file[0]
    ours = pb.file_descriptor_proto()
    assert theirs.package == ours.package
    assert {e.name: [(v.name, v.number) for v in e.value] for e in theirs.enum_type} == \
        {e.name: [(v.name, v.number) for v in e.value] for e in ours.enum_type}

    def fields(m):
        oneofs = [o.name for o in m.oneof_decl]
        return [(f.name, f.number, f.type, f.label, f.type_name,
                 oneofs[f.oneof_index] if f.HasField("oneof_index") else None)
                for f in m.field]

    assert {m.name: fields(m) for m in theirs.message_type} == \
        {m.name: fields(m) for m in ours.message_type}
