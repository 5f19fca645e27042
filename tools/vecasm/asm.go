// Command asm generates the amd64 assembly of package vec with avo
// (github.com/mmcloughlin/avo): the AVX-512 and AVX2+FMA variants of the
// dot product, the fused SGD step, the paired update and axpy. Run it
// through go generate in internal/vec:
//
//	go generate ./internal/vec
//
// which writes vec_amd64.s and stubs_amd64.go.
//
// The SGD kernels run a whole block of ratings: for each, the fused step
// of Step on its user and item rows, the biases if any, and a prefetch of
// the rows of the rating a few places ahead (random rows of a block that
// sits in L2 would otherwise be waited for one by one).
//
// Every kernel has the same shape: an unrolled loop over full vectors (16
// lanes for AVX-512, 8 for AVX2), a loop over single vectors, then at most
// one step of each narrower width down to 4 lanes (YMM, XMM) and a scalar
// loop for the last 0..3 elements. The tail uses no AVX-512 masks: a
// masked tail was measured slower here (a load that follows a masked store
// to the same place is not forwarded from the store, and SGD updates the
// same rows again soon), and the narrower steps need no mask setup. The
// pure Go loops in vec.go are the reference the tests hold these to.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// isa is one vector width: the name suffix and the float32 lanes of its
// widest register.
type isa struct {
	name  string
	lanes int
}

func main() {
	Package("github.com/privrec/privrec/internal/vec")
	ConstraintExpr("!purego")
	for _, s := range []isa{{"AVX512", 16}, {"AVX2", 8}} {
		dot(s)
		step(s)
		update(s)
		axpy(s)
		sgd(s, false)
		sgd(s, true)
	}
	Generate()
}

// vreg allocates a vector register of the given number of float32 lanes.
func vreg(lanes int) VecVirtual {
	switch lanes {
	case 16:
		return ZMM()
	case 8:
		return YMM()
	}
	return XMM()
}

// narrow returns the low lanes of r (a ZMM, YMM or XMM register).
func narrow(r VecVirtual, lanes int) Op {
	switch lanes {
	case 16:
		return r
	case 8:
		return r.AsY()
	}
	return r.AsX()
}

// addr returns the stack address of the named argument.
func addr(name string) Mem {
	b, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

// baseAddr returns the stack address of the named slice argument's base
// pointer.
func baseAddr(name string) Mem {
	b, err := Param(name).Base().Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

// loops emits the loop structure shared by the kernels over n float32
// elements at the pointers ptrs: body(w, off) handles w lanes at byte
// offset off from every pointer (w = 1 is the scalar case). The pointers
// and n are advanced.
func loops(s isa, fn string, n GPVirtual, ptrs []Mem, unroll int, body func(w, off int)) {
	advance := func(elems int) {
		for _, p := range ptrs {
			ADDQ(U32(4*elems), p.Base)
		}
		SUBQ(U32(elems), n)
	}
	L := s.lanes
	Label(fn + "_block")
	CMPQ(n, U32(unroll*L))
	JL(LabelRef(fn + "_single"))
	for j := 0; j < unroll; j++ {
		body(L, 4*L*j)
	}
	advance(unroll * L)
	JMP(LabelRef(fn + "_block"))

	Label(fn + "_single")
	CMPQ(n, U32(L))
	JL(LabelRef(fmt.Sprintf("%s_w%d", fn, L/2)))
	body(L, 0)
	advance(L)
	JMP(LabelRef(fn + "_single"))

	for w := L / 2; w >= 4; w /= 2 {
		Label(fmt.Sprintf("%s_w%d", fn, w))
		next := fmt.Sprintf("%s_w%d", fn, w/2)
		if w == 4 {
			next = fn + "_scalar"
		}
		CMPQ(n, U32(w))
		JL(LabelRef(next))
		body(w, 0)
		advance(w)
	}

	Label(fn + "_scalar")
	TESTQ(n, n)
	JZ(LabelRef(fn + "_done"))
	body(1, 0)
	advance(1)
	JMP(LabelRef(fn + "_scalar"))
	Label(fn + "_done")
}

// dotInto emits the dot product of the n float32 at a and b and returns
// the XMM register whose low lane holds it. a, b and n are advanced.
func dotInto(s isa, fn string, a, b Mem, n GPVirtual) Op {
	const unroll = 4
	L := s.lanes
	acc := make([]VecVirtual, unroll)
	for j := range acc {
		acc[j] = vreg(L)
		VXORPS(acc[j], acc[j], acc[j])
	}
	// part[w] accumulates the steps of w < L lanes (w = 1: scalar).
	part := map[int]VecVirtual{}
	for w := L / 2; w >= 1; w /= 2 {
		if w == 2 {
			continue
		}
		part[w] = vreg(max(w, 4))
		VXORPS(part[w], part[w], part[w])
	}
	j := 0
	loops(s, fn+"_dot", n, []Mem{a, b}, unroll, func(w, off int) {
		switch {
		case w == L:
			x := vreg(L)
			VMOVUPS(a.Offset(off), x)
			VFMADD231PS(b.Offset(off), x, acc[j%unroll])
			j++
		case w == 1:
			x := XMM()
			VMOVSS(a, x)
			VFMADD231SS(b, x, part[1])
		default:
			x := vreg(w)
			VMOVUPS(a, x)
			VFMADD231PS(b, x, part[w])
		}
	})
	VADDPS(acc[1], acc[0], acc[0])
	VADDPS(acc[3], acc[2], acc[2])
	VADDPS(acc[2], acc[0], acc[0])
	r := acc[0]
	if L == 16 {
		hi := YMM()
		VEXTRACTF64X4(U8(1), r, hi)
		VADDPS(hi, r.AsY(), r.AsY())
		VADDPS(part[8], r.AsY(), r.AsY())
	}
	hx := XMM()
	VEXTRACTF128(U8(1), r.AsY(), hx)
	VADDPS(hx, r.AsX(), r.AsX())
	VADDPS(part[4], r.AsX(), r.AsX())
	VMOVHLPS(r.AsX(), hx, hx) // hx's low pair = the high pair of r
	VADDPS(hx, r.AsX(), r.AsX())
	VMOVSHDUP(r.AsX(), hx)
	VADDSS(hx, r.AsX(), r.AsX())
	VADDSS(part[1], r.AsX(), r.AsX())
	return r.AsX()
}

func dot(s isa) {
	fn := "dot" + s.name
	TEXT(fn, NOSPLIT, "func(a, b []float32) float32")
	Doc(fmt.Sprintf("%s returns a·b over len(a) elements; len(b) >= len(a).", fn))
	a := Mem{Base: Load(Param("a").Base(), GP64())}
	b := Mem{Base: Load(Param("b").Base(), GP64())}
	n := GP64()
	Load(Param("a").Len(), n)
	r := dotInto(s, fn, a, b, n)
	VZEROUPPER()
	Store(r.(Register), ReturnIndex(0))
	RET()
}

// pairUpdate emits p ← c·p + g·q, q ← c·q + g·p over n elements, with c
// and g broadcast to every lane of vector registers.
func pairUpdate(s isa, fn string, p, q Mem, n GPVirtual, c, g VecVirtual) {
	loops(s, fn+"_upd", n, []Mem{p, q}, 2, func(w, off int) {
		pm, qm := p.Offset(off), q.Offset(off)
		if w == 1 {
			pv, qv, np, nq := XMM(), XMM(), XMM(), XMM()
			VMOVSS(pm, pv)
			VMOVSS(qm, qv)
			VMULSS(c.AsX(), pv, np)
			VFMADD231SS(g.AsX(), qv, np)
			VMULSS(c.AsX(), qv, nq)
			VFMADD231SS(g.AsX(), pv, nq)
			VMOVSS(np, pm)
			VMOVSS(nq, qm)
			return
		}
		cw, gw := narrow(c, w), narrow(g, w)
		pv, qv, np, nq := vreg(w), vreg(w), vreg(w), vreg(w)
		VMOVUPS(pm, pv)
		VMOVUPS(qm, qv)
		VMULPS(cw, pv, np)
		VFMADD231PS(gw, qv, np)
		VMULPS(cw, qv, nq)
		VFMADD231PS(gw, pv, nq)
		VMOVUPS(np, pm)
		VMOVUPS(nq, qm)
	})
}

func step(s isa) {
	fn := "step" + s.name
	TEXT(fn, NOSPLIT, "func(p, q []float32, t, c, lr float32) float32")
	Doc(fmt.Sprintf("%s computes e = t − p·q over len(p) elements, applies", fn),
		"p ← c·p + lr·e·q, q ← c·q + lr·e·p_old and returns e; len(q) >= len(p).")
	pb := Load(Param("p").Base(), GP64())
	qb := Load(Param("q").Base(), GP64())
	n := GP64()
	Load(Param("p").Len(), n)
	a, b := Mem{Base: GP64()}, Mem{Base: GP64()}
	m := GP64()
	MOVQ(pb, a.Base)
	MOVQ(qb, b.Base)
	MOVQ(n, m)
	d := dotInto(s, fn, a, b, m)
	e, t := XMM(), XMM()
	Load(Param("t"), t)
	VSUBSS(d, t, e) // e = t − p·q
	Store(e, ReturnIndex(0))
	gs := XMM()
	Load(Param("lr"), gs)
	VMULSS(e, gs, gs)
	c, g := vreg(s.lanes), vreg(s.lanes)
	VBROADCASTSS(addr("c"), c)
	VBROADCASTSS(gs, g)
	pairUpdate(s, fn, Mem{Base: pb}, Mem{Base: qb}, n, c, g)
	VZEROUPPER()
	RET()
}

func update(s isa) {
	fn := "update" + s.name
	// The gain is named s, not g: g is a register name in Go assembly.
	TEXT(fn, NOSPLIT, "func(p, q []float32, c, s float32)")
	Doc(fmt.Sprintf("%s applies p ← c·p + s·q, q ← c·q + s·p_old over len(p)", fn),
		"elements; len(q) >= len(p).")
	p := Mem{Base: Load(Param("p").Base(), GP64())}
	q := Mem{Base: Load(Param("q").Base(), GP64())}
	n := GP64()
	Load(Param("p").Len(), n)
	c, g := vreg(s.lanes), vreg(s.lanes)
	VBROADCASTSS(addr("c"), c)
	VBROADCASTSS(addr("s"), g)
	pairUpdate(s, fn, p, q, n, c, g)
	VZEROUPPER()
	RET()
}

func axpy(s isa) {
	fn := "axpy" + s.name
	TEXT(fn, NOSPLIT, "func(y, x []float32, a float32)")
	Doc(fmt.Sprintf("%s adds a·x to y over len(y) elements; len(x) >= len(y).", fn))
	y := Mem{Base: Load(Param("y").Base(), GP64())}
	x := Mem{Base: Load(Param("x").Base(), GP64())}
	n := GP64()
	Load(Param("y").Len(), n)
	av := vreg(s.lanes)
	VBROADCASTSS(addr("a"), av)
	loops(s, fn, n, []Mem{y, x}, 2, func(w, off int) {
		ym, xm := y.Offset(off), x.Offset(off)
		if w == 1 {
			v := XMM()
			VMOVSS(ym, v)
			VFMADD231SS(xm, av.AsX(), v)
			VMOVSS(v, ym)
			return
		}
		v := vreg(w)
		VMOVUPS(ym, v)
		VFMADD231PS(xm, narrow(av, w), v)
		VMOVUPS(v, ym)
	})
	VZEROUPPER()
	RET()
}

func sgd(s isa, biased bool) {
	fn := "sgd" + s.name
	sig := "func(es []Rating, u, v []float32, stride, n, ahead int, c, lr float32) float64"
	if biased {
		fn = "sgdBiased" + s.name
		sig = "func(es []Rating, u, v, bu, bi []float32, stride, n, ahead int, mean, c, lr, cb float32) float64"
	}
	TEXT(fn, NOSPLIT, sig)
	Doc(fmt.Sprintf("%s is SGD (SGDBiased) with the %s kernels: see there.", fn, s.name))
	e := Load(Param("es").Base(), GP64())
	cnt := Load(Param("es").Len(), GP64())
	s4 := Load(Param("stride"), GP64())
	SHLQ(U8(2), s4)
	ubase, vbase := baseAddr("u"), baseAddr("v")
	sse := XMM()
	VXORPD(sse, sse, sse)
	c := vreg(s.lanes)
	VBROADCASTSS(addr("c"), c)

	Label(fn + "_loop")
	TESTQ(cnt, cnt)
	JZ(LabelRef(fn + "_end"))

	// Prefetch the rows of the rating ahead places on, if there is one.
	{
		a := Load(Param("ahead"), GP64())
		TESTQ(a, a)
		JZ(LabelRef(fn + "_fetched"))
		CMPQ(cnt, a)
		JLE(LabelRef(fn + "_fetched"))
		IMUL3Q(U32(12), a, a)
		pn, qn := GP64(), GP64()
		MOVLQSX(Mem{Base: e, Index: a, Scale: 1}, pn)
		MOVLQSX(Mem{Base: e, Index: a, Scale: 1, Disp: 4}, qn)
		IMULQ(s4, pn)
		IMULQ(s4, qn)
		ADDQ(ubase, pn)
		ADDQ(vbase, qn)
		rb := Load(Param("n"), GP64())
		SHLQ(U8(2), rb)
		Label(fn + "_prefetch")
		PREFETCHT0(Mem{Base: pn})
		PREFETCHT0(Mem{Base: qn})
		ADDQ(U32(64), pn)
		ADDQ(U32(64), qn)
		SUBQ(U32(64), rb)
		JG(LabelRef(fn + "_prefetch"))
		Label(fn + "_fetched")
	}

	p, q := GP64(), GP64()
	MOVLQSX(Mem{Base: e}, p)
	MOVLQSX(Mem{Base: e, Disp: 4}, q)
	var bup, bip GPVirtual
	if biased {
		bup, bip = GP64(), GP64()
		MOVQ(p, bup)
		MOVQ(q, bip)
		SHLQ(U8(2), bup)
		SHLQ(U8(2), bip)
		ADDQ(baseAddr("bu"), bup)
		ADDQ(baseAddr("bi"), bip)
	}
	IMULQ(s4, p)
	IMULQ(s4, q)
	ADDQ(ubase, p)
	ADDQ(vbase, q)
	t := XMM()
	VMOVSS(Mem{Base: e, Disp: 8}, t)
	if biased { // t = r − ((mean + bu) + bi)
		b := XMM()
		VMOVSS(addr("mean"), b)
		VADDSS(Mem{Base: bup}, b, b)
		VADDSS(Mem{Base: bip}, b, b)
		VSUBSS(b, t, t)
	}
	a, b := Mem{Base: GP64()}, Mem{Base: GP64()}
	m := Load(Param("n"), GP64())
	MOVQ(p, a.Base)
	MOVQ(q, b.Base)
	d := dotInto(s, fn, a, b, m.(GPVirtual))
	err := XMM()
	VSUBSS(d, t, err) // err = t − p·q
	sq := XMM()
	VMULSS(err, err, sq)
	VCVTSS2SD(sq, sq, sq)
	VADDSD(sq, sse, sse)
	gs := XMM()
	VMOVSS(addr("lr"), gs)
	VMULSS(err, gs, gs)
	g := vreg(s.lanes)
	VBROADCASTSS(gs, g)
	n := Load(Param("n"), GP64())
	pairUpdate(s, fn, Mem{Base: p}, Mem{Base: q}, n.(GPVirtual), c, g)
	if biased { // b ← cb·b + g
		cb := XMM()
		VMOVSS(addr("cb"), cb)
		for _, ptr := range []GPVirtual{bup, bip} {
			x := XMM()
			VMULSS(Mem{Base: ptr}, cb, x)
			VADDSS(gs, x, x)
			VMOVSS(x, Mem{Base: ptr})
		}
	}
	ADDQ(U32(12), e)
	DECQ(cnt)
	JMP(LabelRef(fn + "_loop"))

	Label(fn + "_end")
	VZEROUPPER()
	Store(sse, ReturnIndex(0))
	RET()
}
