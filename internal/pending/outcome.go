package pending

import "sync"

// outcomes keeps what committed rounds decided for changes whose effect
// is their reply (store.ApplyResult.Outcomes: SADD's "was it new"), until
// the command waiting for its round takes it. Two generations, turned
// every outcomeRounds rounds: an outcome nobody takes (its client left,
// or the round was a replay) is dropped within twice that.
type outcomes struct {
	mu        sync.Mutex
	cur, prev map[string]int64
	rounds    int
}

// outcomeRounds is how many committed rounds an outcome is kept for at
// least: a command takes it as soon as its round commits.
const outcomeRounds = 64

// record keeps a committed round's outcomes.
func (o *outcomes) record(m map[string]int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rounds++; o.rounds >= outcomeRounds {
		o.prev, o.cur, o.rounds = o.cur, nil, 0
	}
	if len(m) == 0 {
		return
	}
	if o.cur == nil {
		o.cur = make(map[string]int64, len(m))
	}
	for id, v := range m {
		o.cur[id] = v
	}
}

// take returns and forgets the outcome of id.
func (o *outcomes) take(id string) (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range []map[string]int64{o.cur, o.prev} {
		if v, ok := m[id]; ok {
			delete(m, id)
			return v, true
		}
	}
	return 0, false
}

// Outcome returns, and forgets, what a committed round decided for the
// change whose change.OpID is id; false if no round this daemon
// committed recently decided it (its round is not committed, or was
// committed by an attempt whose reply was lost and then found a
// duplicate).
func (b *Buffer) Outcome(id string) (int64, bool) { return b.flusher.outcomes.take(id) }
