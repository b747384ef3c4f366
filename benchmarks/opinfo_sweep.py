"""The OpInfo sweep: every op of torch's `op_db`, every sample input, eager vs stax.

    python benchmarks/opinfo_sweep.py [--device cpu|cuda] [--dtypes f32,bf16,i64]
        [--ops REGEX] [--max-samples K] [--json out.jsonl] [--jobs N] [--timeout S]
        [--dynamic]

Each op's samples (`op.sample_inputs(device, dtype)`, first K) are compiled with
`torch.compile(fn, backend="stax", fullgraph=True, dynamic=False)` after
`torch._dynamo.reset()`, under STAX_STRICT=1, and classified pass / fallback / error /
mismatch / skip (see `test/python/opinfo_common.py`); every value mismatch is judged
against a float64 evaluation of the op (eager- or stax-closer). The samples run in
worker processes (`--jobs`, default: the core count, at most 4): a sample that crashes
the process (a JIT-compiled kernel can segfault) or runs past `--timeout` is recorded as
an error ("crash" / "timeout") and the worker restarts at the next sample.

Prints a summary (per-sample and per-op counts, failing ops with their first detail)
and writes one JSON line per sample to `--json`. `--summary FILE.jsonl` re-prints the
summary of an earlier run without running anything. `--dynamic` compiles with
`dynamic=True` instead (every dim of size >= 2 symbolic): the same comparison, and the
summary counts the samples stax compiled per size rather than dynamically, by reason.
`--device cuda` needs a GPU (torch.cuda.is_available()); it refuses otherwise.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "test", "python"))
os.environ["STAX_STRICT"] = "1"          # a fallback is never reported as compiled
os.environ.pop("STAX_DEBUG", None)


# ---------------------------------------------------------------------------- worker

def worker_main(args) -> int:
    """Run the (op index, first sample) items given on stdin, one per line; print one
    `START <op> <sample>` line before each sample and one `REC <json>` after."""
    import torch
    torch.set_num_threads(args.threads)
    import torch._dynamo
    torch._dynamo.config.cache_size_limit = 64
    torch._dynamo.config.suppress_errors = False
    import opinfo_common as C
    import warnings
    warnings.filterwarnings("ignore")
    op_db = C.load_op_db()
    dtype = C.DTYPES[args.dtype]
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        idx, start = map(int, line.split())
        op = op_db[idx]

        def on_start(i, idx=idx):
            out.write(f"START {idx} {i}\n")
            out.flush()
        for rec in C.run_op(op, args.device, dtype, args.max_samples, start, on_start,
                            dynamic=args.dynamic):
            rec["op_index"] = idx
            out.write("REC " + json.dumps(rec, default=str) + "\n")
            out.flush()
        out.write(f"DONE {idx}\n")
        out.flush()
    return 0


class Worker:
    def __init__(self, argv):
        self.argv = argv
        self.proc = None
        self.q: queue.Queue = queue.Queue()

    def start(self):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)
        q = self.q = queue.Queue()
        proc = self.proc

        def read():
            for line in proc.stdout:
                q.put(line)
            q.put(None)
        threading.Thread(target=read, daemon=True).start()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        if self.proc:
            self.proc.wait()


def run_items(items, args, emit):
    """Run the op indices `items` in `args.jobs` workers; `emit(rec)` for each record."""
    argv = [sys.executable, os.path.abspath(__file__), "--worker", "--device", args.device,
            "--dtype", args.dtype, "--threads", str(args.threads)]
    if args.dynamic:
        argv.append("--dynamic")
    if args.max_samples is not None:
        argv += ["--max-samples", str(args.max_samples)]
    lock = threading.Lock()
    todo = collections.deque(items)

    def serve():
        w = Worker(argv)
        while True:
            with lock:
                if not todo:
                    break
                idx, start = todo.popleft()
            w.start() if w.proc is None or w.proc.poll() is not None else None
            w.proc.stdin.write(f"{idx} {start}\n")
            w.proc.stdin.flush()
            current = None
            deadline = time.monotonic() + args.timeout
            while True:
                try:
                    line = w.q.get(timeout=max(0.1, deadline - time.monotonic()))
                except queue.Empty:
                    line = "TIMEOUT"
                if line is None or line == "TIMEOUT":
                    why = "timeout" if line == "TIMEOUT" else f"crash (rc {w.proc.poll()})"
                    w.kill()
                    w.proc = None
                    if current is not None:
                        emit({"op_index": idx, "sample_index": current, "status": "error",
                              "detail": f"{why}: the worker process died or hung on this "
                                        f"sample", "dtype": args.dtype})
                        with lock:
                            todo.appendleft((idx, current + 1))
                    else:
                        emit({"op_index": idx, "sample_index": -1, "status": "error",
                              "detail": f"{why} before the first sample", "dtype": args.dtype})
                    break
                if line.startswith("START"):
                    current = int(line.split()[2])
                    deadline = time.monotonic() + args.timeout
                elif line.startswith("REC "):
                    emit(json.loads(line[4:]))
                elif line.startswith("DONE"):
                    break
        if w.proc is not None:
            w.proc.stdin.close()
            w.kill()

    threads = [threading.Thread(target=serve) for _ in range(args.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# ---------------------------------------------------------------------------- summary

STATUSES = ("pass", "fallback", "error", "mismatch", "skip")


def op_status(recs) -> str:
    """An op passes when every sample that is stax's to answer passes (at least one);
    otherwise its worst status: mismatch > error > fallback > skip."""
    sts = {r["status"] for r in recs}
    for s in ("mismatch", "error", "fallback"):
        if s in sts:
            return s
    return "pass" if "pass" in sts else "skip"


def summarize(recs, out=sys.stdout, title=None):
    by_dtype = collections.defaultdict(list)
    for r in recs:
        by_dtype[r.get("dtype", "?")].append(r)
    for dt, rs in by_dtype.items():
        p = lambda *a: print(*a, file=out)  # noqa: E731
        p(f"\n## {title + ' ' if title else ''}{dt}")
        samples = [r for r in rs if r.get("sample_index", 0) >= 0]
        c = collections.Counter(r["status"] for r in samples)
        p(f"samples: {len(samples)}  " + "  ".join(f"{s} {c.get(s, 0)}" for s in STATUSES))
        mm = [r for r in samples if r["status"] == "mismatch"]
        closer = collections.Counter(r.get("closer", "metadata") for r in mm)
        p("mismatches by closer to float64: " +
          "  ".join(f"{k} {v}" for k, v in sorted(closer.items())))
        ops = collections.defaultdict(list)
        for r in rs:
            ops[r["op"]].append(r)
        oc = collections.Counter(op_status(v) for v in ops.values())
        p(f"ops: {len(ops)}  " + "  ".join(f"{s} {oc.get(s, 0)}" for s in STATUSES))
        partial = sum(1 for v in ops.values() if op_status(v) != "pass" and
                      any(r["status"] == "pass" for r in v))
        p(f"ops with at least one passing sample: {oc.get('pass', 0) + partial}")
        why = collections.Counter(r["dynamic"][len("per-size: "):][:90] for r in samples
                                  if str(r.get("dynamic", "")).startswith("per-size"))
        if why:
            p(f"samples compiled per size (not dynamic): {sum(why.values())}; why:")
            for k, v in why.most_common(12):
                p(f"  {v:4d}  {k}")
        for s in ("mismatch", "error", "fallback"):
            bad = sorted(k for k, v in ops.items() if op_status(v) == s)
            if not bad:
                continue
            p(f"\n### {s} ({len(bad)} ops)")
            for k in bad:
                v = ops[k]
                first = next(r for r in v if r["status"] == s)
                n = sum(1 for r in v if r["status"] == s)
                npass = sum(1 for r in v if r["status"] == "pass")
                extra = ""
                if s == "mismatch" and "closer" in first:
                    extra = (f" closer={first['closer']} "
                             f"(eager {first.get('eager_err', 0):.3g}, stax "
                             f"{first.get('stax_err', 0):.3g})"
                             f" decomp_eager_matches={first.get('decomp_eager_matches')}")
                p(f"- {k}: {n} {s}, {npass} pass; {first.get('detail', '')[:220]}{extra}")


def diagnose(r) -> str:
    """A one-line diagnosis of a failing record, from its detail."""
    d = r.get("detail", "")
    if r["status"] == "fallback":
        m = re.match(r"only stax_graph.fallback ops: (.*)", d)
        if m:
            return f"no stax lowering: PyTorch runs {m.group(1)}"
        if "complex" in d:
            return "complex dtype: the whole graph is refused"
        if "symbolic shape" in d:
            return "data-dependent output shape: refused (static shapes only)"
        if d.startswith("refused: "):
            return d[len("refused: "):][:140]
        return d[:140]
    if r["status"] == "error":
        if "reduction over an empty dim" in d:
            return "0-element reduction: the CPU lowering refuses it (eager: identity/nan)"
        if "does not parse" in d:
            return "generated kernel MLIR does not parse"
        if "convert all Tensors to FakeTensors" in d:
            return ("a tensor constant of the graph is read inside the backend's fake mode "
                    "(importer._dense_attr / driver constants)")
        if "list index out of range" in d and r.get("op") in ("unbind_copy", "histogramdd"):
            return ("a fallback op returning Tensor[]: driver._emit_fallback indexes the "
                    "schema's returns by list position")
        if "ImporterError" in d:
            return "importer handler bug: " + d.split("failed: ")[-1][:100]
        if d.startswith(("timeout", "crash")):
            return d.split(":")[0] + " of the worker process"
        return d[:140]
    kinds = r.get("kind", [])
    parts = []
    if "alias" in kinds:
        parts.append("output aliases an input/output where eager's is fresh" if
                     "in stax, is fresh in eager" in d else
                     "aliasing differs from eager")
    if "strides" in kinds:
        de = r.get("decomp_eager") or []
        parts.append("strides differ" + (" (torch's decomposition gives them too)"
                                         if "strides" in de else ""))
    if "values" in kinds:
        dm = r.get("decomp_eager_matches")
        who = {True: "stax lowering", False: "torch's decomposition (aot_eager too)",
               None: "stax"}[dm]
        parts.append(f"wrong values from {who}, {r.get('closer', '?')}-closer to float64")
    for k in kinds:
        if k not in ("alias", "strides", "values"):
            parts.append(f"{k} differs")
    return "; ".join(parts) or d[:140]


def markdown(recs, out=sys.stdout):
    """The failing-ops tables of the results file: mismatch and error ops one per line
    with a diagnosis; fallback ops grouped by diagnosis."""
    ops = collections.defaultdict(list)
    for r in recs:
        ops[(r.get("dtype"), r["op"])].append(r)
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p("| dtype | op | status | samples failing / passing | diagnosis | first failing sample |")
    p("| --- | --- | --- | --- | --- | --- |")
    groups = collections.defaultdict(list)
    for (dt, op), v in sorted(ops.items()):
        st = op_status(v)
        if st not in ("mismatch", "error", "fallback"):
            continue
        first = next(r for r in v if r["status"] == st)
        n = sum(1 for r in v if r["status"] == st)
        npass = sum(1 for r in v if r["status"] == "pass")
        if st == "fallback":
            groups[(dt, diagnose(first))].append(f"{op} ({n}/{npass})")
            continue
        smp = (first.get("sample") or "").replace("|", "\\|")[:90]
        p(f"| {dt} | `{op}` | {st} | {n} / {npass} | {diagnose(first)} | `{smp}` |")
    p("\nFallback ops (stax compiles nothing of these samples), by diagnosis; "
      "op (fallback samples / passing samples):\n")
    p("| dtype | diagnosis | ops |")
    p("| --- | --- | --- |")
    for (dt, why), v in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        p(f"| {dt} | {why.replace('|', '/')} | {', '.join(v)} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtypes", default="f32", help="comma list of " + ",".join(
        __import__("opinfo_common").DTYPES))
    ap.add_argument("--dtype", help=argparse.SUPPRESS)
    ap.add_argument("--ops", default=None, help="regex on the op id (name[.variant])")
    ap.add_argument("--max-samples", type=int, default=None)
    ap.add_argument("--json", default=None, help="write one JSON line per sample")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per sample")
    ap.add_argument("--shard", default=None, help="i/n: run every n-th op from the i-th")
    ap.add_argument("--summary", default=None, help="summarize an earlier --json file")
    ap.add_argument("--markdown", action="store_true",
                    help="with --summary: print the failing-ops tables as markdown")
    ap.add_argument("--dynamic", action="store_true",
                    help="compile with dynamic=True: every dim of size >= 2 symbolic")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main(args)
    if args.summary:
        with open(args.summary) as f:
            recs = [json.loads(x) for x in f if x.strip()]
        markdown(recs) if args.markdown else summarize(recs)
        return 0
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    import opinfo_common as C
    op_db = C.load_op_db()
    rx = re.compile(args.ops) if args.ops else None
    items = [(i, 0) for i, op in enumerate(op_db) if rx is None or rx.search(C.op_id(op))]
    if args.shard:
        k, n = map(int, args.shard.split("/"))
        items = items[k::n]
    print(f"opinfo sweep: {len(items)} ops, device {args.device}, dtypes {args.dtypes}, "
          f"max samples {args.max_samples}, {'dynamic=True, ' if args.dynamic else ''}"
          f"{args.jobs} workers x {args.threads} threads, "
          f"torch {torch.__version__}", flush=True)
    jf = open(args.json, "w") if args.json else None
    all_recs = []
    t0 = time.time()
    for dt in args.dtypes.split(","):
        args.dtype = dt
        recs = []
        lock = threading.Lock()

        def emit(rec):
            rec.setdefault("dtype", str(C.DTYPES[dt]).replace("torch.", ""))
            rec["device"] = args.device
            if "op" not in rec:
                rec["op"] = C.op_id(op_db[rec["op_index"]])
            with lock:
                recs.append(rec)
                if jf:
                    jf.write(json.dumps(rec, default=str) + "\n")
                    jf.flush()
                if rec["status"] in ("mismatch", "error"):
                    print(f"  {rec['status']}: {rec['op']}[{rec.get('sample_index')}] "
                          f"{rec.get('detail', '')[:160]}", flush=True)
        run_items(items, args, emit)
        all_recs += recs
    if jf:
        jf.close()
    summarize(all_recs)
    print(f"\n{len(all_recs)} records in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
