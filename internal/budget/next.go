package budget

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// seqKey is one sequence's ranges in this daemon.
type seqKey struct {
	mu     sync.Mutex
	ranges [][2]int64 // [next, last] still to hand out, oldest first
	fetch  chan struct{}
	taken  int64
	rate   float64
	prev   int64
	prevAt time.Time
}

// Next returns a number of sequence key that no call of any daemon ever
// gets again (NEXT key). Numbers start at 1; one daemon hands them out in
// increasing order, and numbers of different daemons interleave within one
// range of the true order. A range not used up when the daemon stops or
// crashes is skipped.
func (m *Manager) Next(ctx context.Context, key string) (int64, error) {
	s := m.seq(key)
	s.mu.Lock()
	s.taken++
	s.mu.Unlock()
	for {
		s.mu.Lock()
		if len(s.ranges) > 0 {
			r := &s.ranges[0]
			n := r[0]
			r[0]++
			if r[0] > r[1] {
				s.ranges = s.ranges[1:]
			}
			m.prefetchRange(key, s)
			s.mu.Unlock()
			return n, nil
		}
		if ch := s.fetch; ch != nil {
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return 0, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
			}
		}
		s.fetch = make(chan struct{})
		w := want(1, s.rate, m.opts.Interval, s.prev, m.opts.Now().Sub(s.prevAt))
		s.mu.Unlock()
		if err := m.acquireRange(ctx, key, s, w); err != nil {
			return 0, fmt.Errorf("%w: range in hand used up and %w", ErrUnavailable, err)
		}
	}
}

// prefetchRange leases the next range in the background once less than
// half of what demand wants is left in hand. s.mu is held.
func (m *Manager) prefetchRange(key string, s *seqKey) {
	if s.fetch != nil || m.closed.Load() {
		return
	}
	var left int64
	for _, r := range s.ranges {
		left += r[1] - r[0] + 1
	}
	w := want(1, s.rate, m.opts.Interval, s.prev, m.opts.Now().Sub(s.prevAt))
	if w < 2 || left >= w/2 {
		return
	}
	s.fetch = make(chan struct{})
	m.fetches.Add(1)
	go func() {
		defer m.fetches.Done()
		ctx, cancel := context.WithTimeout(context.Background(), m.opts.TTL/3)
		defer cancel()
		if err := m.acquireRange(ctx, key, s, w); err != nil {
			m.opts.Logger.Debug("prefetch NEXT range", "key", key, "err", err)
		}
	}()
}

// acquireRange leases w numbers for s, whose fetch channel the caller set.
func (m *Manager) acquireRange(ctx context.Context, key string, s *seqKey, w int64) error {
	sent := m.opts.Now()
	lo, err := m.st.NextRange(ctx, key, w)
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.fetch)
	s.fetch = nil
	if err != nil {
		return err
	}
	s.ranges = append(s.ranges, [2]int64{lo, lo + w - 1})
	s.prev, s.prevAt = w, sent
	m.m.ranges.Inc()
	return nil
}

func (m *Manager) seq(name string) *seqKey {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.seqs[name]
	if s == nil {
		s = &seqKey{}
		m.seqs[name] = s
	}
	return s
}
