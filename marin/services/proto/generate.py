"""Regenerate the Python modules of ``services.proto`` (needs ``grpcio-tools``).

    python -m marin.services.proto.generate           # rewrite services_pb2*.py
    python -m marin.services.proto.generate --check   # exit 1 if they are out of date

The generated modules are committed, so installing marin needs no code generator; the
test suite runs ``--check`` so an edit to the .proto cannot ship without them.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PROTO = HERE / "services.proto"
OUTPUTS = ("services_pb2.py", "services_pb2.pyi", "services_pb2_grpc.py")


def generate(out_dir: Path) -> None:
    from grpc_tools import protoc

    rel = PROTO.relative_to(ROOT)
    code = protoc.main(["grpc_tools.protoc", f"-I{ROOT}", f"--python_out={out_dir}",
                        f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}", str(rel)])
    if code != 0:
        raise SystemExit(f"protoc failed on {PROTO} (exit {code})")


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        produced = Path(tmp) / PROTO.parent.relative_to(ROOT)
        stale = [name for name in OUTPUTS
                 if not (HERE / name).exists()
                 or (HERE / name).read_text() != (produced / name).read_text()]
        if "--check" in argv:
            if stale:
                print(f"out of date: {', '.join(stale)}; run python -m "
                      "marin.services.proto.generate", file=sys.stderr)
                return 1
            return 0
        for name in OUTPUTS:
            (HERE / name).write_text((produced / name).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
