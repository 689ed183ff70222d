#!/usr/bin/env python3
"""Differential corpus for lockstep's `.npy` reader, judged by real NumPy.

Writes tests/golden/data/npy_corpus/*.npy and tests/golden/data/npy_corpus/manifest.json,
read by crates/lockstep-data/tests/npy_differential.rs. Run from the repository root:

    python3 tools/golden_npy_corpus.py

Each file is a valid `.npy` written by NumPy, a hand-made header variant (duplicate keys,
odd `fortran_order` values, format versions, text after the dict, ...) or a seeded random
mutation of a valid file. For every file the manifest records whether `np.load(path)`
(allow_pickle=False, the default) accepts it and, if so, its dtype, shape and values in C
order (floats as the bits of their float64 widening, so NaN payloads and -0.0 compare
exactly). Nothing here is computed by lockstep.
"""

import json
import os
import random
import struct
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "data", "npy_corpus")


def header_bytes(text, version=(1, 0), pad=True, encoding=None):
    """The magic, version, length and header `text` (padded as NumPy pads, if `pad`)."""
    enc = encoding or ("utf8" if version == (3, 0) else "latin1")
    h = text.encode(enc)
    lfmt = "<H" if version == (1, 0) else "<I"
    pre = b"\x93NUMPY" + bytes(version)
    if pad:
        total = len(pre) + struct.calcsize(lfmt) + len(h) + 1
        h = h + b" " * ((64 - total % 64) % 64) + b"\n"
    return pre + struct.pack(lfmt, len(h)) + h


def npy_bytes(arr, version=None):
    import io

    b = io.BytesIO()
    np.lib.format.write_array(b, arr, version=version)
    return b.getvalue()


def dict_text(descr="'<f4'", fortran="False", shape="(2, 3)"):
    return "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)


def cases():
    out = []  # (name, bytes)
    rng = np.random.default_rng(0)
    a23 = np.arange(6, dtype="<f4").reshape(2, 3) * np.float32(1.5) - 2
    # Valid files of every dtype lockstep reads, and some it does not.
    for dt in ["<f4", "<f8", "<i1", "<i2", "<i4", "<i8", "<u1", "<u2", "<u4", "|b1",
               ">f4", ">f8", ">i2", ">i4", ">i8", ">u2", ">u4", "<u8", "<f2", "<c8", "<U3"]:
        v = (rng.standard_normal(6) * 100).astype(dt) if dt[1] not in "bU" else None
        if dt == "|b1":
            v = np.array([True, False, True, True, False, False])
        if dt == "<U3":
            v = np.array(["ab", "c", "", "x", "yz", "q"], dtype=dt)
        out.append((f"valid_{dt[1:]}_{'be' if dt[0] == '>' else 'le'}", npy_bytes(v.reshape(2, 3))))
    out.append(("valid_f8_special", npy_bytes(np.array([np.nan, -0.0, np.inf, -np.inf, 5e-324, 1.0]))))
    out.append(("valid_0d", npy_bytes(np.array(3.25))))
    out.append(("valid_empty", npy_bytes(np.zeros((0,), "<f4"))))
    out.append(("valid_empty_2x0x3", npy_bytes(np.zeros((2, 0, 3), "<i8"))))
    out.append(("valid_fortran_2x3", npy_bytes(np.asfortranarray(a23))))
    out.append(("valid_fortran_2x3x4", npy_bytes(np.asfortranarray(np.arange(24, dtype="<i4").reshape(2, 3, 4)))))
    out.append(("valid_v2", npy_bytes(a23, version=(2, 0))))
    out.append(("valid_v3", npy_bytes(a23, version=(3, 0))))
    out.append(("valid_trailing_bytes", npy_bytes(a23) + b"junk"))
    data = a23.tobytes()
    data_f = np.asfortranarray(a23).tobytes(order="F")
    # Hand-made headers: (name, text, data, version, pad).
    H = [
        ("dup_fortran_true_then_false", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), 'fortran_order': False}", data),
        ("dup_fortran_false_then_true", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'fortran_order': True}", data_f),
        ("dup_descr", "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), 'descr': '<f4'}", data),
        ("dup_shape", "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'shape': (3, 2)}", data),
        ("fortran_1", dict_text(fortran="1"), data),
        ("fortran_0", dict_text(fortran="0"), data),
        ("fortran_None", dict_text(fortran="None"), data),
        ("fortran_str_False", dict_text(fortran="'False'"), data),
        ("fortran_lower_false", dict_text(fortran="false"), data),
        ("fortran_True", dict_text(fortran="True"), data_f),
        ("fortran_paren_True", dict_text(fortran="(True)"), data_f),
        ("shape_close_before_open", dict_text(shape=")2, 3("), data),
        ("shape_list", dict_text(shape="[2, 3]"), data),
        ("shape_int", dict_text(shape="6"), data),
        ("shape_paren_int", dict_text(shape="(6)"), data),
        ("shape_no_trailing_comma", dict_text(shape="(6,)"), data),
        ("shape_spaces", dict_text(shape="( 2 ,3 , )"), data),
        ("shape_newlines", dict_text(shape="(2,\n 3)"), data),
        ("shape_bool", dict_text(shape="(True, 6)"), data),
        ("shape_negative", dict_text(shape="(-1,)"), data),
        ("shape_negative_2", dict_text(shape="(-2, -3)"), data),
        ("shape_float", dict_text(shape="(2.0, 3)"), data),
        ("shape_hex", dict_text(shape="(0x2, 3)"), data),
        ("shape_underscore", dict_text(shape="(2, 0_3)"), data),
        ("shape_leading_zero", dict_text(shape="(02, 3)"), data),
        ("shape_zeros", dict_text(shape="(00, 3)"), b""),
        ("shape_long_L", dict_text(shape="(2L, 3L)"), data),
        ("shape_huge", dict_text(shape="(99999999999999999999999,)"), data),
        ("shape_overflow_i64", dict_text(shape="(4294967296, 4294967296)"), data),
        ("shape_overflow_with_zero", dict_text(shape="(4294967296, 4294967296, 0)"), b""),
        ("shape_too_big_for_data", dict_text(shape="(2, 4)"), data),
        ("shape_nested", dict_text(shape="((2, 3),)"), data),
        ("shape_plus", dict_text(shape="(+2, 3)"), data),
        ("shape_double_minus", dict_text(shape="(--2, 3)"), data),
        ("shape_expr", dict_text(shape="(1+1, 3)"), data),
        ("descr_no_order", dict_text(descr="'f4'"), data),
        ("descr_eq", dict_text(descr="'=f4'"), data),
        ("descr_pipe_f4", dict_text(descr="'|f4'"), data),
        ("descr_pipe_u1", dict_text(descr="'|u1'", shape="(6,)"), bytes(range(6))),
        ("descr_gt_u1", dict_text(descr="'>u1'", shape="(6,)"), bytes(range(6))),
        ("descr_lt_b1", dict_text(descr="'<b1'", shape="(6,)"), bytes([0, 1, 2, 0, 255, 1])),
        ("descr_qmark", dict_text(descr="'?'", shape="(6,)"), bytes([0, 1, 2, 0, 255, 1])),
        ("descr_float32_name", dict_text(descr="'float32'"), data),
        ("descr_double_quotes", dict_text(descr='"<f4"'), data),
        ("descr_concat", dict_text(descr="'<' 'f4'"), data),
        ("descr_u_prefix", dict_text(descr="u'<f4'"), data),
        ("descr_bytes", dict_text(descr="b'<f4'"), data),
        ("descr_escape", dict_text(descr="'\\x3cf4'"), data),
        ("descr_bad", dict_text(descr="'<q9'"), data),
        ("descr_int", dict_text(descr="4"), data),
        ("descr_structured", dict_text(descr="[('a', '<f4')]"), data),
        ("descr_object", dict_text(descr="'|O'"), data),
        ("extra_key", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", data),
        ("missing_key", "{'descr': '<f4', 'shape': (2, 3)}", data),
        ("double_quoted_keys", '{"descr": "<f4", "fortran_order": False, "shape": (2, 3)}', data),
        ("keys_reordered", "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", data),
        ("no_spaces", "{'descr':'<f4','fortran_order':False,'shape':(2,3)}", data),
        ("text_after_dict", dict_text() + " x", data),
        ("comment_after_dict", dict_text() + " # a comment", data),
        ("semicolon_after_dict", dict_text() + ";", data),
        ("second_dict", dict_text() + " " + dict_text(), data),
        ("paren_dict", "(" + dict_text() + ")", data),
        ("leading_newline", "\n" + dict_text(), data),
        ("leading_spaces", "   " + dict_text(), data),
        ("leading_newline_indent", "\n  " + dict_text(), data),
        ("leading_comment", "# c\n" + dict_text(), data),
        ("leading_backslash", "\\\n" + dict_text(), data),
        ("not_a_dict", "[1, 2]", data),
        ("set_not_dict", "{'descr', 'shape'}", data),
        ("empty_header", "", data),
        ("nul_in_header", dict_text() + "\x00", data),
        ("vt_in_header", dict_text() + "\x0b", data),
        ("formfeed_after", dict_text() + "\x0c", data),
        ("crlf", dict_text() + "\r\n", data),
        ("latin1_in_string", dict_text(descr="'<f4\xe9'"), data),
        ("nbsp_after", dict_text() + "\xa0", data),
    ]
    for name, text, d in H:
        for ver in [(1, 0), (3, 0)]:
            out.append((f"hdr_{name}_v{ver[0]}", header_bytes(text, ver) + d))
    # Whitespace and padding details.
    for name, tail in [("nl", "\n"), ("nl_spaces", "\n   "), ("nl_spaces_nl", "\n   \n"), ("spaces", "   "),
                       ("nl_comment", "\n  # c"), ("nl_tab", "\n\t"), ("none", ""), ("nl_nl", "\n\n"),
                       ("nl_x", "\nx"), ("spaces_comment", "  # c"), ("cr_spaces", "\r  ")]:
        for ver in [(1, 0), (2, 0), (3, 0)]:
            out.append((f"tail_{name}_v{ver[0]}", header_bytes(dict_text() + tail, ver, pad=False) + data))
    # Versions.
    good = npy_bytes(a23)
    for maj, mnr in [(1, 1), (2, 1), (0, 0), (4, 0), (3, 1), (255, 0), (1, 255)]:
        b = bytearray(good)
        b[6], b[7] = maj, mnr
        out.append((f"version_{maj}_{mnr}", bytes(b)))
    v3 = header_bytes(dict_text(descr="'<f4'") + " # \u00e9", (3, 0)) + data
    out.append(("v3_utf8_comment", v3))
    out.append(("v3_bad_utf8", header_bytes(dict_text(), (3, 0), encoding="latin1")[:-2] + b"\xff\n" + data))
    out.append(("v1_latin1_comment", header_bytes(dict_text() + " # \xe9", (1, 0)) + data))
    big = header_bytes(dict_text() + " " * 10001, (2, 0)) + data
    out.append(("header_over_10000", big))
    ok = header_bytes(dict_text() + " " * 9800, (2, 0)) + data
    out.append(("header_9900", ok))
    # Truncations.
    for n in [0, 3, 6, 8, 9, 10, 11, 40, len(good) - 24, len(good) - 1]:
        out.append((f"trunc_{n}", good[:n]))
    out.append(("header_len_past_eof", good[:8] + struct.pack("<H", 60000) + good[10:]))
    # Seeded random mutations of valid files.
    r = random.Random(1234)
    bases = [good, npy_bytes(np.arange(5, dtype="<i8")), npy_bytes(np.asfortranarray(np.arange(6, dtype="<f8").reshape(3, 2))),
             npy_bytes(a23, version=(3, 0))]
    alphabet = b"{}()[],:'\" \n\t#-+0123456789TFNLx<>|=fiub_.\\\x00\xff"
    for i in range(400):
        b = bytearray(r.choice(bases))
        for _ in range(r.randint(1, 3)):
            k = r.random()
            if k < 0.5:
                pos = r.randrange(6, min(len(b), 80))
                b[pos] = r.choice(alphabet)
            elif k < 0.7:
                pos = r.randrange(10, min(len(b), 80))
                b.insert(pos, r.choice(alphabet))
            elif k < 0.9:
                pos = r.randrange(10, min(len(b), 80))
                del b[pos]
            else:
                pos = r.randrange(6, len(b))
                b[pos] = r.randrange(256)
        out.append((f"mut_{i:03d}", bytes(b)))
    return out


def describe(path):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = np.load(path)
    except Exception as e:  # noqa: BLE001 - any refusal counts
        return {"accepted": False, "error": f"{type(e).__name__}: {e}"[:200]}
    if not isinstance(a, np.ndarray):
        return {"accepted": False, "error": "not an array"}
    rec = {"accepted": True, "dtype": a.dtype.str, "kind": a.dtype.kind, "shape": list(a.shape)}
    flat = a.ravel(order="C")
    if a.dtype.kind == "f":
        rec["values"] = [str(int(x)) for x in flat.astype(np.float64).view(np.uint64)]
    elif a.dtype.kind in "iub":
        rec["values"] = [str(int(x)) for x in flat]
    else:
        rec["values"] = None
    return rec


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".npy"):
            os.remove(os.path.join(OUT, f))
    manifest = {"numpy": np.__version__, "files": {}}
    for name, b in cases():
        fn = name.replace("/", "_") + ".npy"
        p = os.path.join(OUT, fn)
        with open(p, "wb") as fh:
            fh.write(b)
        manifest["files"][fn] = describe(p)
    with open(os.path.join(OUT, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=0, sort_keys=True)
        fh.write("\n")
    acc = sum(v["accepted"] for v in manifest["files"].values())
    print(f"{len(manifest['files'])} files, {acc} accepted by NumPy {np.__version__}")


if __name__ == "__main__":
    main()
