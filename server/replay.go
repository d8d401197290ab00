package server

import (
	"context"
	"fmt"
	"slices"

	"github.com/toolcall-lab/lab/internal/sharedframe"
	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
)

// load rebuilds every stored session by replaying its events (for Start).
// It touches no Server state but the config: the caller adds the sessions.
func (s *Server) load(ctx context.Context) ([]*session, error) {
	infos, err := s.cfg.Store.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading sessions: %w", err)
	}
	loaded := make([]*session, 0, len(infos))
	for _, info := range infos {
		recs, err := s.cfg.Store.Events(ctx, info.ID)
		if err != nil {
			return nil, fmt.Errorf("loading sessions: %w", err)
		}
		sess, err := restoreSession(info, recs, &s.cfg, s.metrics, s.frames, s.overview.mark)
		if err != nil {
			return nil, fmt.Errorf("loading sessions: %w", err)
		}
		loaded = append(loaded, sess)
	}
	return loaded, nil
}

// restoreSession rebuilds a stored session by replaying its records.
func restoreSession(info store.Session, recs []store.Record, cfg *Config, m *metrics, frames *sharedframe.Pool, changed func()) (*session, error) {
	s := newSession(info.ID, cfg, m, frames, changed)
	s.lastActive = info.LastActive
	if !info.Created.IsZero() {
		s.lastOwn = info.Created
	}
	s.clock.began = info.Created
	for _, r := range recs {
		if r.Seq != s.lab.Seq()+1 {
			return nil, fmt.Errorf("session %s: stored seq %d follows seq %d", info.ID, r.Seq, s.lab.Seq())
		}
		if _, err := s.lab.Apply(r.Event); err != nil {
			return nil, fmt.Errorf("session %s: replaying seq %d: %w", info.ID, r.Seq, err)
		}
		if r.Event.Kind == model.CodeSubmitted && r.Event.Lang == model.ReScript {
			s.code.see(r.Event.Source) // the latest is dropped below: its check sees it
		}
		s.count(r.Event)
		s.clock.steps(s.lab.Exercise(), r.Seq, r.Time)
		if r.Event.By == model.Student {
			s.lastOwn = r.Time
		}
	}
	if in := s.lab.Code(); in.Submissions > 0 {
		s.code.unseen = slices.DeleteFunc(s.code.unseen, func(src string) bool { return in.Lang == model.ReScript && src == in.Source })
		s.code.set(in) // checked again once held (Server.holdStored)
		s.enc.code = s.code.json
	}
	frame, v := s.enc.frame(s.lab)
	s.clock.receipts(v.Receipts)
	s.frame.Release() // newSession's, seen by no one: the session is not shared yet
	s.frame = frame
	s.row = newRow(s.id, v, s.lastOwn)
	s.row.progress = s.clock.progress(v)
	s.publishCode()
	s.rowGen++
	return s, nil
}
