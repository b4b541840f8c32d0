package core

import "github.com/beamdedup/beamdedup/transforms/rowkind"

// OnTimer decides on the firing of the key's timer, for First and Last
// alike (they share retention and cleanup). finalize is true for a firing
// of a Finalize timer, whose hold time is hold; now is the processing time
// and windowEnd the last event time of the key's window (timers past it
// are not set: the runner drops the window's state then).
func (c Config) OnTimer(st *State, finalize bool, hold, now, windowEnd int64) TimerDecision {
	var d TimerDecision
	switch st.Phase {
	case Pending:
		if !finalize || hold != st.CandTime {
			d.Stale = true // a cleanup timer or an overwritten finalization
			return d
		}
		d.Emit, d.Kind, d.EmitTime = true, rowkind.Insert, st.CandTime
		*st = State{Phase: Emitted, CandTime: st.CandTime}
		c.retain(st, st.CandTime, now) // retention starts at emission
		d.Write = true
		d.Timer = ClampToWindow(c.cleanupAfterEmit(st), windowEnd)
		return d
	case Emitted:
		if finalize {
			d.Stale = true
			return d
		}
		stateExpired := c.StateTTL > 0 && now >= st.ExpireAt
		if c.EventTime && c.EventTTL == 0 && c.StateTTL > 0 && !stateExpired {
			// The expiry check (Config.expiryCheck), or the window's end
			// it was clamped to, fired before the wall clock passed the
			// expiry: the watermark runs more than a TTL ahead of it (the
			// end of a finite input), or the window ends first. Keep the
			// state and set no timer: a later check would fire at once
			// again at the end of the input (event time has moved past
			// any time a check could name), and the runner drops the
			// state with its window; a row of the key that arrives
			// meanwhile finds it expired once it is.
			return d
		}
		if c.Family() == EventTimeFamily && c.EventTTL > 0 && st.MaxEvent+c.EventTTL+1 > windowEnd && !stateExpired {
			// The cleanup was clamped to the window's end, before the
			// retention ends: keep the state until the window expires.
			return d
		}
		// A cleanup timer fires only at the latest time it was set to
		// (timers are overwritten, never cleared), so the key expired.
		if c.RetractOnExpiry && len(st.Cand) > 0 {
			// KeepLast: the expired row, retracted at its own time.
			d.Emit, d.Kind, d.EmitTime = true, rowkind.Delete, st.CandTime
		}
		*st = State{}
		d.Write, d.Expired = true, true
		return d
	}
	d.Stale = true
	return d
}
