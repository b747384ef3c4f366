"""dialects/stax.irdl.mlir must be what the Python dialect generates."""
import difflib

from stax.dialects import gen_irdl


def test_irdl_file_matches_dialect():
    want = gen_irdl.expected_text()
    try:
        with open(gen_irdl.DEFAULT_PATH, encoding="utf-8") as f:
            have = f.read()
    except FileNotFoundError:
        have = ""
    if have != want:
        diff = "".join(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                            "stax.irdl.mlir (committed)",
                                            "irdl_text() (generated)", n=1))
        raise AssertionError(
            "dialects/stax.irdl.mlir is out of date with dialects/stax_dialect.py; "
            "run: python -m stax.dialects.gen_irdl\n" + diff[:4000])
