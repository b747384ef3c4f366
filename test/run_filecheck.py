"""FileCheck for the lit tests: the Python `filecheck` package, plus
`--implicit-check-not=TEXT` (which filecheck 1.0.6 lacks): the check fails when TEXT
occurs anywhere in the input (stricter than LLVM's, which skips matched lines)."""
import io
import sys


def main(argv):
    implicit, rest, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        key = a.lstrip("-")
        if key.startswith("implicit-check-not"):
            if "=" in a:
                implicit.append(a.split("=", 1)[1])
            else:
                i += 1
                implicit.append(argv[i])
        else:
            rest.append(a)
        i += 1

    input_file = "-"
    for j, a in enumerate(rest):
        if a.startswith("--input-file="):
            input_file = a.split("=", 1)[1]
        elif a == "--input-file" and j + 1 < len(rest):
            input_file = rest[j + 1]
    data = sys.stdin.buffer.read() if input_file == "-" else open(input_file, "rb").read()
    text = data.decode("utf-8", errors="replace")

    from filecheck.main import main as filecheck_main

    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    try:
        filecheck_main(["filecheck", *rest])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    if code:
        return code
    for needle in implicit:
        for n, line in enumerate(text.splitlines(), 1):
            if needle in line:
                sys.stderr.write(f"error: --implicit-check-not: found '{needle}' on input "
                                 f"line {n}: {line}\n")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
