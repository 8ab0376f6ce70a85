package hll

import "math"

// Estimate is the number of distinct hashes added: exact for EMPTY and
// EXPLICIT sketches; for registers, Ertl's improved estimator ("New
// cardinality estimation algorithms for HyperLogLog sketches", 2017),
// rounded. Unlike the extension's hll_cardinality (ClassicEstimate) it has
// no switch between linear counting and the raw estimate, so no bias bump
// where classic HyperLogLog switches. An undefined sketch estimates 0.
func (s *Sketch) Estimate() uint64 {
	switch s.state {
	case KindExplicit:
		return uint64(len(s.explicit))
	case KindFull:
		return uint64(math.Round(s.ertl()))
	}
	return 0
}

// ertl evaluates the improved estimator on the register histogram. A
// register holds 1 + the trailing zeros of the hash above the index,
// capped at maxRegister, so values are 0..q+1 with q+1 meaning "q+1 or
// more": q is maxRegister-1, or less when the hash has fewer bits left
// above the index.
func (s *Sketch) ertl() float64 {
	var hist [256]int
	for _, v := range s.regs {
		hist[v]++
	}
	q := min(int(s.set.maxRegister())-1, 63-s.set.Log2m)
	m := float64(len(s.regs))
	top := 0 // registers at q+1 or above
	for v := q + 1; v < len(hist); v++ {
		top += hist[v]
	}
	z := m * tau(1-float64(top)/m)
	for k := q; k >= 1; k-- {
		z = 0.5 * (z + float64(hist[k]))
	}
	z += m * sigma(float64(hist[0])/m)
	return m * m / (2 * math.Ln2) / z
}

// sigma is Ertl's σ(x) = x + Σ_{k≥1} x^(2^k)·2^(k-1), for the share of
// empty registers.
func sigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for range 64 { // converges long before: x^(2^k) underflows
		x *= x
		prev := z
		z += x * y
		y += y
		if z == prev {
			break
		}
	}
	return z
}

// tau is Ertl's τ(x) = (1 - x - Σ_{k≥1} (1 - x^(2^-k))²·2^-k) / 3, for the
// share of registers below the cap.
func tau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for range 64 {
		x = math.Sqrt(x)
		prev := z
		y *= 0.5
		z -= (1 - x) * (1 - x) * y
		if z == prev {
			break
		}
	}
	return z / 3
}

// ClassicEstimate is what the extension's hll_cardinality returns for
// s: the exact count for EMPTY and EXPLICIT sketches; for registers,
// classic HyperLogLog (Flajolet et al. 2007) with linear counting while
// the raw estimate is below 2.5·m and registers are still zero, and the
// large-range correction for 2^(2^regwidth-2+log2m); NaN past linear
// counting for regwidth 6 and 7, as the extension's overflowing shift
// makes it. ok is false for an undefined sketch, where the extension
// returns NULL.
func (s *Sketch) ClassicEstimate() (estimate float64, ok bool) {
	switch s.state {
	case KindUndefined:
		return 0, false
	case KindEmpty:
		return 0, true
	case KindExplicit:
		return float64(len(s.explicit)), true
	}
	nregs := len(s.regs)
	sum, zeros := 0.0, 0
	for _, v := range s.regs {
		sum += negPow2[v]
		if v == 0 {
			zeros++
		}
	}
	n := float64(nregs)
	raw := alphaMM(nregs) / sum
	// The extension computes 2^L as a 64-bit shift, 1ULL << L, which
	// x86-64 and arm64 take modulo 64: with regwidth 6 or 7 (L >= 64) the
	// cutoff is tiny and every raw estimate goes to the log of a negative
	// number, NaN. Reproduced, since this is hll_cardinality's answer.
	twoToL := math.Ldexp(1, (int(s.set.maxRegister())-1+s.set.Log2m)&63)
	switch {
	case zeros != 0 && raw < 5.0*n/2.0:
		return n * math.Log(n/float64(zeros)), true
	case raw <= twoToL/30.0:
		return raw, true
	}
	return -twoToL * math.Log(1.0-raw/twoToL), true
}

// negPow2[v] is 2^-v, exactly the extension's 1.0 / (1L << v).
var negPow2 = func() (t [256]float64) {
	for v := range t {
		t[v] = math.Ldexp(1, -v)
	}
	return t
}()

// alphaMM is the bias constant times m², as the extension computes it.
func alphaMM(nregs int) float64 {
	n := float64(nregs)
	switch nregs {
	case 16:
		return 0.673 * n * n
	case 32:
		return 0.697 * n * n
	case 64:
		return 0.709 * n * n
	}
	return (0.7213 / (1.0 + 1.079/n)) * n * n
}
