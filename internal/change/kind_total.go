package change

// Total is the all-time total of a key: INCR, INCRBY, DECR and their
// sampled forms add to it, GET reads it. It is the plain kind.
const Total Kind = 1

func init() {
	Register(Total, Spec{Name: "total", Plain: true})
}
