"""Where the pre-fix fp8 bit view went wrong on sm_90 (issue 8, item 3).

`benchmarks/data/fp8_prefix_abs.ttir` is the kernel the Triton target emitted before the
fix for `(x.view(uint8) & 0x7F).view(float8_e4m3fn).float()`: decode the loaded fp8
(tt.fp_to_fp), encode it again (rtne + NaN/overflow fix-ups), bitcast, and, decode. This
script runs it and variants cut at each step on the GPU, and compares each with the TTIR
interpreter (test/python/ttir_interp.py) over all 256 codes:

    python benchmarks/fp8_bitcast_probe.py
"""
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))
os.environ.setdefault("STAX_CACHE_DIR", tempfile.mkdtemp(prefix="stax-probe-"))

import torch  # noqa: E402

import ttir_interp  # noqa: E402
from stax.targets import triton as stt  # noqa: E402
from stax.targets.triton_ttir import TTIRKernel  # noqa: E402

BASE = open(os.path.join(HERE, "data", "fp8_prefix_abs.ttir")).read()


def bytes_out(text, value):
    """The kernel storing the i8 value `value` instead of the decoded f32."""
    text = text.replace("%out0: !tt.ptr<f32>", "%out0: !tt.ptr<i8>")
    text = re.sub(r"    %p27 = .*\n    %p28 = .*\n    tt\.store .*\n",
                  f"    %p27 = tt.splat %out0 : !tt.ptr<i8> -> tensor<256x!tt.ptr<i8>>\n"
                  f"    %p28 = tt.addptr %p27, %offs5 : tensor<256x!tt.ptr<i8>>, tensor<256xi32>\n"
                  f"    tt.store %p28, {value}, %mask6 : tensor<256x!tt.ptr<i8>>\n", text)
    return text


VARIANTS = {
    "prefix (decode, encode, bitcast, and 0x7F, decode)": (BASE, torch.float32),
    "encode + bitcast, stored as bytes": (bytes_out(BASE, "%v12"), torch.int8),
    "encode + fix-ups, stored as bytes": (bytes_out(BASE, "%v21"), torch.int8),
    "encode + fix-ups + and 0x7F, stored as bytes": (bytes_out(BASE, "%v24"), torch.int8),
    "no fix-ups (and of the plain encode), decoded": (
        BASE.replace("%v23 = tt.bitcast %v22", "%v23 = tt.bitcast %v11"), torch.float32),
    "no and (fix-ups only), decoded": (
        BASE.replace("%v25 = tt.bitcast %v24", "%v25 = tt.bitcast %v23"), torch.float32),
}


def main():
    codes = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn)
    for label, (text, odt) in VARIANTS.items():
        tk = TTIRKernel("stax_k0", text, "pointwise", (1, 1, 1), 2, 1,
                        ("f8E4M3FN", "f32" if odt == torch.float32 else "i8"),
                        aligned=(True, True))
        ref = torch.full((256,), -1, dtype=odt) if odt != torch.float32 else \
            torch.full((256,), float("nan"))
        ttir_interp.run_kernel(tk, codes, ref)
        compiled, _ = stt.compile_ttir(tk, 90)
        x = codes.cuda()
        out = torch.empty(256, dtype=odt, device="cuda")
        compiled[(1, 1, 1)](x, out)
        got = out.cpu()
        g = got.view(torch.int32) if odt == torch.float32 else got
        r = ref.view(torch.int32) if odt == torch.float32 else ref
        bad = (g != r) & ~(got.isnan() & ref.isnan() if odt == torch.float32 else False)
        idx = bad.nonzero().flatten()
        print(f"{label:50s}: {len(idx):3d}/256 differ; first {[(hex(i), hex(g[i].item() & 0xffffffff), hex(r[i].item() & 0xffffffff)) for i in idx[:5].tolist()]}",
              flush=True)


if __name__ == "__main__":
    main()
