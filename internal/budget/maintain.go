package budget

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"
)

// Run recovers this daemon's leases from an earlier run, then keeps its
// leases until ctx ends: every interval it updates rates and returns idle
// and expired leases, and every TTL/3 it renews its leases and forfeits
// other holders' expired ones. Until recovery is done, TAKE goes direct
// (and answers ErrLeasesNotReturned, not 0, when the earlier leases could
// cover it: Manager.recovering).
func (m *Manager) Run(ctx context.Context) {
	if m.opts.Holder == "" {
		return
	}
	m.recover(ctx)
	tick := time.NewTicker(m.opts.Interval)
	defer tick.Stop()
	renew := time.NewTicker(m.opts.TTL / 3)
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			m.tick(ctx)
		case <-renew.C:
			m.renew(ctx)
		}
	}
}

// Ready reports whether leases are in use (the journal replay is recorded
// and leases of an earlier run are returned).
func (m *Manager) Ready() bool { return m.ready.Load() }

// recover waits until every grant of an earlier run's journal is recorded,
// then returns every lease of this holder: after the flush their size is
// exactly the units never granted. It retries until it succeeds or ctx
// ends.
func (m *Manager) recover(ctx context.Context) {
	for attempt := 0; ; attempt++ {
		err := m.opts.Replayed(ctx)
		if err == nil && m.opts.KeepEarlier != nil && m.opts.KeepEarlier() {
			m.opts.Logger.Warn("leases of the earlier run are left to expire and be forfeited: it ran elsewhere and may have granted more than its journal here holds")
			m.keptEarlier = true
			m.ready.Store(true)
			return
		}
		if err == nil {
			var leases int
			var units int64
			leases, units, err = m.st.Reclaim(ctx, m.opts.Holder)
			if err == nil {
				if leases > 0 {
					m.opts.Logger.Info("returned the leases of an earlier run", "leases", leases, "units", units)
				}
				m.m.returnedUnits.Add(int(units))
				m.ready.Store(true)
				return
			}
		}
		m.opts.Logger.Warn("budget leases not recovered yet; TAKE goes to PostgreSQL directly meanwhile", "err", err)
		d := 100 * time.Millisecond << min(attempt, 5)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d/2 + rand.N(d/2)):
		}
	}
}

// tick folds the interval's demand into each key's rate and returns the
// unused units of leases that went idle or past their deadline.
func (m *Manager) tick(ctx context.Context) {
	now := m.opts.Now()
	var ids, units []int64
	for _, k := range m.allKeys() {
		k.mu.Lock()
		k.rate = ewma(k.rate, k.taken, m.opts.Interval)
		k.taken = 0
		idle := now.Sub(k.lastUse) >= m.opts.IdleReturn
		k.leases = slices.DeleteFunc(k.leases, func(l *lease) bool {
			if !idle && l.avail > 0 && now.Before(l.deadline) {
				return false
			}
			if l.avail > 0 {
				ids, units = append(ids, l.id), append(units, l.avail)
				l.avail = 0
			}
			return true
		})
		k.mu.Unlock()
	}
	m.mu.Lock()
	ids, units = append(m.unreturned[0], ids...), append(m.unreturned[1], units...)
	m.unreturned = [2][]int64{}
	m.mu.Unlock()
	m.giveBack(ctx, ids, units)
	m.returnLost(ctx)
	for _, s := range m.allSeqs() {
		s.mu.Lock()
		s.rate = ewma(s.rate, s.taken, m.opts.Interval)
		s.taken = 0
		s.mu.Unlock()
	}
}

// giveBack returns units to PostgreSQL. If it fails they stay counted in
// their leases and are returned at the next tick; they are gone from
// memory already, so they are never granted meanwhile.
func (m *Manager) giveBack(ctx context.Context, ids, units []int64) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, m.opts.TTL/3)
	defer cancel()
	if err := m.st.GiveBack(ctx, ids, units); err != nil {
		m.opts.Logger.Warn("return unused lease units; will retry", "leases", len(ids), "err", err)
		m.mu.Lock()
		m.unreturned[0], m.unreturned[1] = append(m.unreturned[0], ids...), append(m.unreturned[1], units...)
		m.mu.Unlock()
		return
	}
	var sum int64
	for _, u := range units {
		sum += u
	}
	m.m.returnedUnits.Add(int(sum))
}

// maxLost bounds the requests remembered for returnLost. A lease statement
// whose reply was lost commits at once or never, so a request still not
// found after a thousand later ones took nothing.
const maxLost = 1024

// returnLost finds the leases whose reply never came (the statement's
// deadline passed while PostgreSQL committed it) and returns them whole:
// this daemon never knew their ids, so it granted nothing from them.
// Without it their units stayed leased, renewed with the holder's other
// leases, until the daemon stopped. A request not found yet is looked
// for again at the next tick, since its statement may still be running.
func (m *Manager) returnLost(ctx context.Context) {
	m.mu.Lock()
	lost := slices.Clone(m.lost)
	m.mu.Unlock()
	if len(lost) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, m.opts.TTL/3)
	defer cancel()
	found, units, err := m.st.ReturnLost(ctx, m.opts.Holder, lost)
	if err != nil {
		m.opts.Logger.Warn("return leases whose reply was lost; will retry", "requests", len(lost), "err", err)
		return
	}
	if units > 0 {
		m.opts.Logger.Info("returned leases whose reply was lost", "leases", len(found), "units", units)
		m.m.returnedUnits.Add(int(units))
	}
	m.mu.Lock()
	m.lost = slices.DeleteFunc(m.lost, func(r int64) bool { return slices.Contains(found, r) })
	m.mu.Unlock()
}

// renew extends this holder's leases, moves their local deadlines, and
// forfeits every holder's expired leases. A lease not renewed keeps its
// old deadline, after which it grants nothing.
func (m *Manager) renew(ctx context.Context) {
	if !m.inUse() {
		// Nothing to renew, forfeit is any budget user's chore and there
		// is nothing to prune: a daemon of a fleet that never took a
		// lease spends no transactions here (docs/operations.md, Running
		// a fleet).
		return
	}
	ctx, cancel := context.WithTimeout(ctx, m.opts.TTL/3)
	defer cancel()
	sent := m.opts.Now()
	ids, err := m.st.Renew(ctx, m.opts.Holder, m.opts.TTL)
	if err != nil {
		m.opts.Logger.Warn("renew budget leases; they stop granting at their deadline unless renewed", "err", err)
		return
	}
	for _, k := range m.allKeys() {
		k.mu.Lock()
		for _, l := range k.leases {
			if slices.Contains(ids, l.id) {
				l.deadline = sent.Add(m.opts.TTL)
			}
		}
		k.mu.Unlock()
	}
	if n, err := m.st.Forfeit(ctx); err != nil {
		m.opts.Logger.Warn("forfeit expired leases", "err", err)
	} else if n > 0 {
		m.opts.Logger.Warn("forfeited expired leases of daemons that did not renew them", "budgets", n)
	}
	if err := m.st.Prune(ctx, m.opts.Holder); err != nil {
		m.opts.Logger.Warn("prune leases", "err", err)
	}
}

// Close stops granting from leases and gives their units back; call it
// after Run has returned and the final flush is done. flushed says the
// final flush succeeded: then every grant is recorded and every lease of
// this holder is returned whole; otherwise only the units not granted
// are, and the rest waits for the next start.
func (m *Manager) Close(ctx context.Context, flushed bool) error {
	m.closed.Store(true)
	m.fetches.Wait()
	if m.opts.Holder == "" || !m.ready.Load() {
		return nil
	}
	// After keeping an earlier run's leases, Reclaim would return them
	// too: give back only this run's unused units.
	if flushed && !m.keptEarlier {
		_, units, err := m.st.Reclaim(ctx, m.opts.Holder)
		m.m.returnedUnits.Add(int(units))
		return err
	}
	var ids, units []int64
	for _, k := range m.allKeys() {
		k.mu.Lock()
		for _, l := range k.leases {
			if l.avail > 0 {
				ids, units = append(ids, l.id), append(units, l.avail)
				l.avail = 0
			}
		}
		k.leases = nil
		k.mu.Unlock()
	}
	ids, units = append(ids, m.unreturned[0]...), append(units, m.unreturned[1]...)
	if err := m.st.GiveBack(ctx, ids, units); err != nil {
		return err
	}
	m.returnLost(ctx)
	return nil
}

// inUse reports whether this run has taken from a budget or a sequence,
// or has units to return.
func (m *Manager) inUse() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.keys) > 0 || len(m.seqs) > 0 || len(m.unreturned[0]) > 0 || len(m.lost) > 0
}

func (m *Manager) allKeys() []*budgetKey {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*budgetKey, 0, len(m.keys))
	for _, k := range m.keys {
		out = append(out, k)
	}
	return out
}

func (m *Manager) allSeqs() []*seqKey {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*seqKey, 0, len(m.seqs))
	for _, s := range m.seqs {
		out = append(out, s)
	}
	return out
}
