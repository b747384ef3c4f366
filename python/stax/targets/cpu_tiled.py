"""Mode "tiled" of the CPU generator (passes/cpu_tiling.py decides it): the domain's two
innermost loops in 16 x 16 tiles, a transposed read loaded along its own stride-1 dim and
transposed in registers. A mixin of `llvm._KernelLowering`, which supplies the emitter,
the schedule, the loop helpers (`_part_range`, `_tail`, `_tail_loop`, `_lane_loop`),
value evaluation and stores.
"""
from __future__ import annotations

from stax.dialects.schedule import split_loop, stride_along
from stax.passes import kernel_schedule
from stax.targets.cpu_emitter import Val
from stax.targets.cpu_errors import KernelLoweringError
from stax.targets.cpu_index import Aff, Var

__all__ = ["TiledMixin"]


class TiledMixin:
    def _emit_tiled_kernel(self):
        """Mode "tiled" (cpu_tiling.cpu_tile): the domain's two innermost loops (p, q) in
        TP x TQ tiles. Per tile, a read contiguous along p and strided along q (a
        transposed input) is TQ vector loads along p, one 2-D vector.transpose, and a row
        extract per p; every other read and each store is a vector along q, the
        results' stride-1 dim. Rows past the last full tile run the vector loop along q
        (per-lane loads of the transposed read), columns past it 1 lane."""
        em, t = self.em, self.tiling
        S = list(self.full_sched.domain)
        order = list(t.loop_order)
        p, q = order[-2], order[-1]
        TP, TQ = t.tile
        if TQ != em.W:
            raise KernelLoweringError(f"internal error: kernel {self.name}: tile {t.tile} "
                                      f"needs rows of the vector width {em.W}")
        P, Q = S[p], S[q]
        c = lambda v: em.const(v, "index")  # noqa: E731
        idx = [None] * len(S)
        opened = 0
        split = split_loop([S[d] for d in order[:-1]])   # the last: p, in whole tiles
        for k, d in enumerate(order[:-2]):
            iv = em.fresh()
            lo, hi = self._part_range(S[d], 1) if k == split else (c(0), c(S[d]))
            em.emit(f"scf.for {iv} = {lo} to {hi} step {c(1)} {{")
            em.push()
            opened += 1
            em.vars[iv] = Var(iv, S[d])
            idx[d] = Aff.var(iv)
        if split < len(order) - 2:
            plo, phi, pmid = c(0), c(P), c((P // TP) * TP)
        else:   # p is the loop the threads split: parts of whole tiles
            plo, phi = self._part_range(P, TP)
            pmid = em.vector_end(plo, phi, TP)
        qmain = (Q // TQ) * TQ

        def store_all(ix):
            point = self._at_domain(ix)
            for i in range(len(self.yielded)):
                self._store(i, self._eval(self.yielded[i], point), point)

        pt = em.fresh()
        em.emit(f"scf.for {pt} = {plo} to {pmid} step {c(TP)} {{")
        em.push()
        em.vars[pt] = Var(pt, P)
        if qmain:
            qt = em.fresh()
            em.emit(f"scf.for {qt} = {c(0)} to {c(qmain)} step {c(TQ)} {{")
            em.push()
            em.vars[qt] = Var(qt, qmain, lane=True)
            em.lane_var = qt
            self._preload_tiles(p, q, pt, qt, idx)
            for i in range(TP):
                self.tile_row = (i, pt)
                ix = list(idx)
                ix[p], ix[q] = Aff.var(pt) + Aff(i), Aff.var(qt)
                store_all(ix)
            self.tile_row = None
            em.lane_var = None
            em.pop()
            em.emit("}")
        if self._tail(Q, TQ):   # the columns past the last full tile, 1 lane
            pi = em.fresh()
            em.emit(f"scf.for {pi} = {pt} to {em.op(f'arith.addi {pt}, {c(TP)} : index', 'index')}"
                    f" step {c(1)} {{")
            em.push()
            em.vars[pi] = Var(pi, P)
            self._tail_loop(c(qmain), c(Q), Q, [], lambda r: store_all(
                [Aff.var(pi) if d == p else r[0] if d == q else idx[d] for d in range(len(S))]))
            em.pop()
            em.emit("}")
        em.pop()
        em.emit("}")
        # the rows past the last full tile: vectors along q
        pr = em.fresh()
        em.emit(f"scf.for {pr} = {pmid} to {phi} step {c(1)} {{")
        em.push()
        em.vars[pr] = Var(pr, P)

        def row(r):
            store_all([Aff.var(pr) if d == p else r[0] if d == q else idx[d]
                       for d in range(len(S))])
        if qmain:
            self._lane_loop(c(0), c(qmain), em.W, qmain, [], row)
        if self._tail(Q, TQ):
            self._tail_loop(c(qmain), c(Q), Q, [], row)
        em.pop()
        em.emit("}")
        for _ in range(opened):
            em.pop()
            em.emit("}")

    def _preload_tiles(self, p, q, pt, qt, idx):
        """At the top of a tile, the transposed tiles of its branch-guarded reads (under
        a concat's or pad's scf.if: the read has a `where`). Such a read is otherwise
        loaded inside the branch of the row that first uses it, where the later rows
        (each its own scf.if) cannot see it: loaded again per row. Loaded here, at the
        tile's scope, every row's branch extracts its row from the one tile.

        Reads of one tile (one input at one offset) share it. It is loaded as it is
        where one of them has no condition or the offset is in bounds over the whole
        domain; otherwise their conditions guard it (an scf.if yielding the tile where
        one of the reads happens, zeros where none does): a tiled kernel has no
        boundary that can fail along p or q (cpu_tiling.one_lane_reason), so each
        condition is the whole tile's. A tile whose condition still moves within the
        tile keeps its per-row loads."""
        if self.sched is None:
            return
        em = self.em
        S = list(self.sched.domain)
        self.tile_row = (0, pt)
        ix = list(idx)
        ix[p], ix[q] = Aff.var(pt), Aff.var(qt)
        self._at_domain(ix)
        tiles = {}   # key -> [arg, base, lane step, [(the read's `where`, safe)]]
        for r in self.sched.reads:
            if r.map is None:
                continue
            e = r.offset.results[0]
            lane_step = stride_along(r.offset, q)
            if stride_along(r.offset, p) != 1 or lane_step in (None, 0, 1):
                continue
            arg = self.inputs[r.input]
            base = em.from_affine(e, self.dims)
            lo, hi = kernel_schedule.expr_range(e, S)
            t = tiles.setdefault(("tile", arg.name, base), [arg, base, lane_step, []])
            t[3].append((r.where, r.where is None or (0 <= lo and hi < arg.extent)))
        for key, (arg, base, lane_step, reads) in tiles.items():
            if all(w is None for w, _ in reads) or em.lookup(key) is not None:
                continue   # no branch reads it: loaded by row 0 at the tile's scope
            if any(safe for _, safe in reads):
                em.remember(key, self._load_tile(arg, base, lane_step))
                continue
            guard = self._tile_guard([w for w, _ in reads], pt, qt, S)
            if guard is None:
                continue
            mty = f"vector<{em.W}x{em.W}x{arg.dtype.mem}>"
            t = em.fresh()
            em.emit(f"{t} = scf.if {guard} -> ({mty}) {{")
            em.push()
            em.emit(f"scf.yield {self._load_tile(arg, base, lane_step)} : {mty}")
            em.pop()
            em.emit("} else {")
            em.push()
            zero = em.const(0.0 if arg.dtype.is_float else 0, arg.dtype.mem)
            z = em.op(f"vector.broadcast {zero} : {arg.dtype.mem} to {mty}", mty)
            em.emit(f"scf.yield {z} : {mty}")
            em.pop()
            em.emit("}")
            em.remember(key, t)

    def _tile_guard(self, wheres, pt, qt, S):
        """An i1 SSA value: does one of the reads with these conditions (`where` maps,
        each result >= 0) happen in the current tile? None where a condition moves
        within the tile (on its p or q variable)."""
        em = self.em
        anys = []
        for where in wheres:
            alls = []
            for w in where.results:
                if kernel_schedule.expr_range(w, S)[0] >= 0:
                    continue   # holds everywhere
                a = em.from_affine(w, self.dims)
                if a.coeff(pt) or a.coeff(qt):
                    return None
                alls.append(em.op(f"arith.cmpi sge, {em.index(a)}, "
                                  f"{em.const(0, 'index')} : index", "i1"))
            if not alls:
                return em.const(1, "i1")
            c = alls[0]
            for x in alls[1:]:
                c = em.op(f"arith.andi {c}, {x} : i1", "i1")
            anys.append(c)
        c = anys[0]
        for x in anys[1:]:
            c = em.op(f"arith.ori {c}, {x} : i1", "i1")
        return c

    def _load_tile(self, arg, base: Aff, lane_step: int) -> str:
        """The W x W tile at `base` (its row 0, lane 0) of a read contiguous along p that
        moves `lane_step` per lane: W vector loads along p, transposed in registers."""
        em = self.em
        W = em.W
        mem = arg.dtype.mem
        vty, mty = f"vector<{W}x{mem}>", f"vector<{W}x{W}x{mem}>"
        b = em.index(base)
        zero = em.const(0.0 if arg.dtype.is_float else 0, mem)
        m = em.op(f"vector.broadcast {zero} : {mem} to {mty}", mty)
        for j in range(W):
            a = b if j == 0 else em.op(
                f"arith.addi {b}, {em.const(j * lane_step, 'index')} : index", "index")
            col = em.op(f"vector.load {arg.name}[{a}] : {arg.memref}, {vty}", vty)
            m = em.op(f"vector.insert {col}, {m} [{j}] : {vty} into {mty}", mty)
        return em.op(f"vector.transpose {m}, [1, 0] : {mty} to {mty}", mty)

    def _tile_load(self, arg, off: Aff, lane_step: int) -> Val:
        """Row i of the tile of a read contiguous along p (coefficient 1 on the tile's p
        variable) that moves `lane_step` per lane along q: the tile's TQ vectors along p,
        loaded once per tile and transposed in registers, then row i extracted.

        The transposed tile and its rows are memoized in the emitter's scopes, as every
        other value: a tile loaded inside a concat's or pad's scf.if branch is not
        visible to a later row's evaluation outside that branch (`_preload_tiles` loads
        a guarded read's tile at the tile's scope, so its rows share one)."""
        em = self.em
        i, pt = self.tile_row
        W = em.W
        base = off + Aff(-i)
        key = ("tile", arg.name, base)
        vty, mty = f"vector<{W}x{arg.dtype.mem}>", f"vector<{W}x{W}x{arg.dtype.mem}>"
        tr = em.lookup(key)
        if tr is None:
            tr = self._load_tile(arg, base, lane_step)
            em.remember(key, tr)
        row = em.lookup(key + (i,))
        if row is None:
            row = em.op(f"vector.extract {tr}[{i}] : {vty} from {mty}", vty)
            em.remember(key + (i,), row)
        return self._from_mem(row, arg.dtype, True)

    # --------------------------------------------------------------- evaluation
