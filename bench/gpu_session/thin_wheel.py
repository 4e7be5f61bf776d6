"""Shrink onnxruntime-gpu's wheel for one GPU generation, so that it fits the device tool's 64 MiB transfers.

    python bench/gpu_session/thin_wheel.py WHEEL OUT.tar.xz [--sm 90]

libonnxruntime_providers_cuda.so holds its kernels for every GPU generation (sm_75 ... sm_120), compressed, in
fatbin containers: 284 MB of the wheel's 350. This zeroes the payload of every kernel image that is not for
``--sm`` (headers kept, so the file layout and the loader's view stay the same; the CUDA runtime picks the image
of the GPU it runs on and never reads the others), drops the TensorRT provider, and writes the package as a
tar.xz: 255 MB -> 70 MB for sm_90 (H100, H200). Only for carrying to a measurement machine, never to ship.
"""

from __future__ import annotations

import argparse
import io
import lzma
import struct
import tarfile
import zipfile

MAGIC = struct.pack("<I", 0xBA55ED50)  # a fatbin container's header


def thin(data: bytearray, keep_sm: int) -> tuple[int, int]:
    """Zero every kernel image not for ``keep_sm`` in place; (images kept, bytes zeroed)."""
    pos = kept = zeroed = 0
    while (start := data.find(MAGIC, pos)) >= 0:
        version, header, size = struct.unpack_from("<HHQ", data, start + 4)
        if version != 1 or header != 16:
            pos = start + 4
            continue
        entry, end = start + header, start + header + size
        while entry < end:
            _kind, _version, entry_header, payload = struct.unpack_from("<HHII", data, entry)
            sm = struct.unpack_from("<I", data, entry + 28)[0]
            if sm == keep_sm:
                kept += 1
            else:
                data[entry + entry_header : entry + entry_header + payload] = bytes(payload)
                zeroed += payload
            entry += entry_header + payload
        pos = end
    return kept, zeroed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel")
    parser.add_argument("out")
    parser.add_argument("--sm", type=int, default=90, help="compute capability to keep (90: H100/H200)")
    args = parser.parse_args()
    with zipfile.ZipFile(args.wheel) as wheel, lzma.open(args.out, "wb", preset=6) as xz:
        with tarfile.open(fileobj=xz, mode="w") as tar:
            for info in wheel.infolist():
                if info.is_dir() or info.filename.endswith("libonnxruntime_providers_tensorrt.so"):
                    continue
                data = bytearray(wheel.read(info))
                if info.filename.endswith("libonnxruntime_providers_cuda.so"):
                    kept, zeroed = thin(data, args.sm)
                    print(f"kept {kept} sm_{args.sm} kernel images, zeroed {zeroed / 1e6:.0f} MB of the others")
                member = tarfile.TarInfo(info.filename)
                member.size, member.mode = len(data), 0o755 if info.filename.endswith(".so") else 0o644
                tar.addfile(member, io.BytesIO(bytes(data)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
