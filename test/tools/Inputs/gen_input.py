"""Write an input for the test/tools lit tests to stdout (or -o FILE): big and bad inputs
that are better generated than checked in.

    gen_input.py chain N      one func: N ops alternating stax.add / stax.tanh, one chain
    gen_input.py wide N       N ops in N/10 independent chains, every chain returned, plus
                              one value with N/10 users
    gen_input.py kernels N    stax_graph.kernel regions nested N deep (custom func syntax)
    gen_input.py generic N    an unregistered op with a region, nested N deep, generic form
    gen_input.py strings N    a legal func whose string attribute and comment hold N braces
    gen_input.py latin1       a func whose comment has a Latin-1 byte (not UTF-8)
    gen_input.py binary       the start of an ELF file (NUL bytes)
    gen_input.py empty        nothing
"""
import sys

T = "tensor<4x8xf32>"


def chain(n):
    out = [f"func.func @chain(%x: {T}) -> {T} {{"]
    prev = "%x"
    for i in range(n):
        if i % 2 == 0:
            out.append(f'  %v{i} = "stax.add"({prev}, %x) : ({T}, {T}) -> {T}')
        else:
            out.append(f'  %v{i} = "stax.tanh"({prev}) : ({T}) -> {T}')
        prev = f"%v{i}"
    out.append(f"  return {prev} : {T}\n}}")
    return "\n".join(out) + "\n"


def wide(n):
    c = max(1, n // 10)
    out = [f"func.func @wide(%x: {T}) -> ({', '.join([T] * (c + 1))}) {{",
           f'  %e = "stax.exp"(%x) : ({T}) -> {T}']
    rets = []
    for j in range(c):
        prev = "%x"
        for i in range(9):
            name = f"%c{j}_{i}"
            if i % 2 == 0:
                out.append(f'  {name} = "stax.add"({prev}, %x) : ({T}, {T}) -> {T}')
            else:
                out.append(f'  {name} = "stax.tanh"({prev}) : ({T}) -> {T}')
            prev = name
        rets.append(prev)
    prev = "%e"
    for j in range(c):  # %e has c users; a running sum of them
        out.append(f'  %s{j} = "stax.add"({prev}, %e) : ({T}, {T}) -> {T}')
        prev = f"%s{j}"
    rets.append(prev)
    out.append(f"  return {', '.join(rets)} : {', '.join([T] * len(rets))}\n}}")
    return "\n".join(out) + "\n"


def kernels(n):
    s = [f"func.func @deep(%x: {T}) -> {T} {{", '  %r0 = "stax_graph.kernel"(%x) ({']
    for d in range(1, n):
        s.append(f"  ^bb0(%a{d}: {T}):")
        s.append(f'  %r{d} = "stax_graph.kernel"(%a{d}) ({{')
    s.append(f"  ^bb0(%a{n}: {T}):")
    s.append(f'    %e = "stax.exp"(%a{n}) : ({T}) -> {T}')
    s.append(f'    "stax_graph.yield"(%e) : ({T}) -> ()')
    for d in range(n - 1, 0, -1):
        s.append(f'  }}) {{kind = "pointwise", name = "k{d}"}} : ({T}) -> {T}')
        s.append(f'  "stax_graph.yield"(%r{d}) : ({T}) -> ()')
    s.append(f'  }}) {{kind = "pointwise", name = "k0"}} : ({T}) -> {T}')
    s.append(f"  return %r0 : {T}\n}}")
    return "\n".join(s) + "\n"


def generic(n):
    return '"test.op"() ({\n' * n + '}) : () -> ()\n' * n


def strings(n):
    return (f'func.func @braces(%x: {T}) -> {T} attributes {{note = "{"{" * n}\\"{"[" * n}"}} {{\n'
            f'  // {"(" * n}\n'
            f'  %0 = "stax.neg"(%x) : ({T}) -> {T}\n'
            f'  return %0 : {T}\n}}\n')


def main(argv):
    kind, n = argv[0], int(argv[1]) if len(argv) > 1 and argv[1].isdigit() else 0
    if kind == "latin1":
        data = b"func.func @f() {\n  return // caf\xe9\n}\n"
    elif kind == "binary":
        data = b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x02\x00\x3e\x00"
    elif kind == "empty":
        data = b""
    else:
        data = {"chain": chain, "wide": wide, "kernels": kernels, "generic": generic,
                "strings": strings}[kind](n).encode()
    if "-o" in argv:
        with open(argv[argv.index("-o") + 1], "wb") as f:
            f.write(data)
    else:
        sys.stdout.buffer.write(data)


if __name__ == "__main__":
    main(sys.argv[1:])
