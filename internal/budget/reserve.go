package budget

import "github.com/counterd/counterd/internal/change"

// Reserve is TAKE's fast path for a pipeline: if a lease of budget key in
// hand can grant n now, it takes n from the lease and returns the grant
// for the caller to journal with the rest of its group (one journal
// append for a whole pipeline, as increments); the reply is then the
// grant's Delta. If the append fails, the caller must Unreserve the
// grant. It reports false when only the slow path (Take) can answer.
// key may alias a buffer the caller reuses: Reserve keeps nothing of it.
func (m *Manager) Reserve(key string, n int64) (change.Change, bool) {
	if n < 1 || m.opts.Holder == "" || !m.ready.Load() || m.closed.Load() {
		return change.Change{}, false
	}
	m.mu.RLock()
	k := m.keys[key]
	m.mu.RUnlock()
	if k == nil {
		return change.Change{}, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := m.opts.Now()
	l := k.find(n, now)
	if l == nil {
		return change.Change{}, false
	}
	l.avail -= n
	k.taken += n
	k.lastUse = now
	m.prefetch(k, now)
	m.m.grants.Inc()
	return change.Change{Key: key, Kind: change.Grant, Bucket: l.id, Delta: n}, true
}

// Unreserve gives back a grant Reserve returned that was not journaled.
// If its lease was given back or dropped meanwhile, the units stay counted
// in the lease in PostgreSQL until this daemon returns its leases at stop
// or start: under-spend, never a second grant.
func (m *Manager) Unreserve(c change.Change) {
	m.mu.RLock()
	k := m.keys[c.Key]
	m.mu.RUnlock()
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, l := range k.leases {
		if l.id == c.Bucket {
			l.avail += c.Delta
			m.m.grants.Dec()
			return
		}
	}
}
