#!/usr/bin/env python3
"""Writes the seed corpus of //fsdp/checkpoint:safetensors_header_fuzz_test.

    python3 fsdp/checkpoint/safetensors_header_fuzz_seeds.py   # from the repository root

Each case is written twice: as a file (valid_<case> or invalid_<case>, what
SafetensorsReader::Open would make of it) and, when it has data, as the same
header without its data (invalid_header_only_<case>): the fuzz target also
reads everything after the 8-byte length as a bare header checked against the
size its offsets claim, and header-only seeds keep that reading whole under
mutation (safetensors_header_fuzz.cc says why). Crash reproducers found later
are added to the directory by hand, named invalid_<what> or valid_<what>.
"""
import json
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors_header_fuzz_corpus")


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def compact(header):
    return json.dumps(header, separators=(",", ":"), ensure_ascii=False)


def floats(*values):
    return struct.pack("<%df" % len(values), *values)


# name -> (valid as a file?, header text, data bytes)
CASES = {
    "two_tensors_metadata": (True, compact({
        "__metadata__": {"format": "pt"},
        "w": entry("F32", [2, 3], 0, 24), "b": entry("F32", [3], 24, 36)}), floats(*range(9))),
    "empty_scalar_bf16_f4": (True, compact({
        "s": entry("F32", [], 0, 4), "z": entry("F32", [0, 5], 4, 4),
        "h": entry("BF16", [2], 4, 8), "q": entry("F4", [2], 8, 9)}),
        floats(1.5) + b"\x80\x3f\x00\x40" + b"\x21"),
    "no_tensors": (True, "{}", b""),
    "name_order_not_data_order": (True, compact({
        "a": entry("F32", [1], 4, 8), "b": entry("U8", [4], 0, 4)}), b"abcd" + floats(2.0)),
    "escaped_and_unicode_names": (True,
        '{"a\\u0000\\"b\\\\":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        '"caf\\u00e9 \u20ac":{"dtype":"U8","shape":[0],"data_offsets":[4,4]},'
        '"":{"dtype":"F4","shape":[2,1],"data_offsets":[4,5]}}', floats(3.0) + b"\x12"),
    "duplicate_name": (False,
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        '"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', floats(1, 2)),
    "overlap": (False, compact({"a": entry("F32", [2], 0, 8), "b": entry("F32", [1], 4, 8)}),
                floats(1, 2)),
    "hole": (False, compact({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}),
             floats(1, 2, 3)),
    "unknown_dtype": (False, compact({"a": entry("Q8", [2], 0, 2)}), b"xy"),
    "negative_shape": (False, '{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}',
                       floats(1)),
    "numel_overflow": (False, compact({"a": entry("U8", [4294967296, 4294967296], 0, 0)}), b""),
    "bits_overflow": (False, compact({"a": entry("F64", [2305843009213693952], 0, 0)}), b""),
    "sub_byte_remainder": (False, compact({"a": entry("F4", [3], 0, 2)}), b"\x01\x02"),
    "metadata_value_not_string": (False, '{"__metadata__":{"k":1}}', b""),
    "unknown_field": (False,
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":0}}', floats(1)),
}


def with_length(header, data):
    header = header.encode("utf-8")
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + data


def main():
    os.makedirs(HERE, exist_ok=True)
    for name in os.listdir(HERE):
        os.remove(os.path.join(HERE, name))
    for name, (valid, header, data) in CASES.items():
        with open(os.path.join(HERE, ("valid_" if valid else "invalid_") + name), "wb") as f:
            f.write(with_length(header, data))
        if data:
            with open(os.path.join(HERE, "invalid_header_only_" + name), "wb") as f:
                f.write(with_length(header, b""))
    # Only a file can get its length wrong.
    with open(os.path.join(HERE, "invalid_length_past_end"), "wb") as f:
        f.write(struct.pack("<Q", 1000) + b"{}")


if __name__ == "__main__":
    main()
