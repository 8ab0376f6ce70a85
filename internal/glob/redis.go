package glob

// MatchRedis reports whether s matches pattern by Redis's own glob rules
// (stringmatchlen), as SSCAN's MATCH takes them: * any run of bytes, ?
// one byte, [abc] [a-z] [^a] one byte of a class, \x the byte x; a
// malformed class matches its bytes literally. It matches any bytes (a
// set's members need not be UTF-8) and compiles nothing, unlike a
// Matcher, whose patterns are the configuration's (* and ? only, on
// UTF-8 keys, compiled once for the increment path).
func MatchRedis(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for len(pattern) > 1 && pattern[1] == '*' {
				pattern = pattern[1:]
			}
			if len(pattern) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if MatchRedis(pattern[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		case '[':
			if len(s) == 0 {
				return false
			}
			rest, ok := matchClass(pattern[1:], s[0])
			if !ok {
				return false
			}
			pattern, s = rest, s[1:]
		default:
			if pattern[0] == '\\' && len(pattern) > 1 {
				pattern = pattern[1:]
			}
			if len(s) == 0 || pattern[0] != s[0] {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		}
	}
	return len(s) == 0
}

// matchClass matches b against the class that p starts (after its '['),
// returning p after the class's ']' (or its end, as Redis does).
func matchClass(p string, b byte) (string, bool) {
	not := len(p) > 0 && p[0] == '^'
	if not {
		p = p[1:]
	}
	match := false
	for len(p) > 0 && p[0] != ']' {
		switch {
		case p[0] == '\\' && len(p) > 1:
			match = match || p[1] == b
			p = p[2:]
		case len(p) > 2 && p[1] == '-' && p[2] != ']':
			lo, hi := min(p[0], p[2]), max(p[0], p[2])
			match = match || (lo <= b && b <= hi)
			p = p[3:]
		default:
			match = match || p[0] == b
			p = p[1:]
		}
	}
	if len(p) > 0 {
		p = p[1:]
	}
	return p, match != not
}
