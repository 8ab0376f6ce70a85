package resp

import "math"

// ParseInt parses a Redis integer argument, such as INCRBY's increment, as
// strictly as Redis does: an optional '-', then decimal digits without
// leading zeros ("0" itself is fine, "-0" is not), with no '+' or spaces,
// and in the int64 range, math.MinInt64 included. ok is false otherwise.
func ParseInt(b []byte) (n int64, ok bool) {
	neg := len(b) > 0 && b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	// 19 digits cannot overflow a uint64, and 20 are out of int64's range.
	if len(digits) == 0 || len(digits) > 19 || digits[0] == '0' && len(b) > 1 {
		return 0, false
	}
	var u uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > -math.MinInt64 {
			return 0, false
		}
		return int64(-u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}
