package server

import (
	"context"
	"errors"
	"time"

	"github.com/toolcall-lab/lab/store"
)

// bounded runs every call of the store it wraps under Config.StoreTimeout,
// whatever context the caller has (often none: a change's append, a
// catch-up, the janitor): a database that stalls refuses the change with
// the store's error frame after the deadline instead of holding it, its
// session and its tab for as long as the stall lasts. New wraps
// Config.Store once, so every call site in the package is bounded; a
// Listener stays one (boundedListener), its Listen unbounded but told the
// deadline as how long a frozen listener may go unnoticed.
//
// It also tells writes (when not nil) of every append's result.
type bounded struct {
	st     store.Store
	d      time.Duration
	writes *outage
}

// boundedListener is bounded for a store that is also a Listener.
type boundedListener struct {
	bounded
	l store.Listener
}

func (b boundedListener) Listen(ctx context.Context, alive time.Duration, ready func(), notify func(string, uint64)) error {
	return b.l.Listen(ctx, alive, ready, notify)
}

// bound wraps st so that each call has at most d, and each append's result
// goes to writes.
func bound(st store.Store, d time.Duration, writes *outage) store.Store {
	if b, ok := st.(bounded); ok {
		st = b.st
	} else if b, ok := st.(boundedListener); ok {
		st = b.st
	}
	b := bounded{st: st, d: d, writes: writes}
	if l, ok := st.(store.Listener); ok {
		return boundedListener{b, l}
	}
	return b
}

func (b bounded) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.d)
}

func call[T any](b bounded, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return f(ctx)
}

func do(b bounded, ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return f(ctx)
}

// errStoreDown refuses an append at once while the store's writes fail and
// another append is already finding out whether they work again.
var errStoreDown = errors.New("the store's writes are failing; another change is trying them")

func (b bounded) Append(ctx context.Context, r store.Record) error {
	if b.writes != nil && b.writes.failing() {
		// One append at a time tries a failing store; the others are
		// refused at once instead of each waiting out the deadline (a
		// connection's frames wait behind its change: at a frame every
		// 100 ms they would pile up for as long as the stall lasts).
		if !b.writes.trying.CompareAndSwap(false, true) {
			return errStoreDown
		}
		defer b.writes.trying.Store(false)
	}
	err := do(b, ctx, func(ctx context.Context) error { return b.st.Append(ctx, r) })
	if b.writes != nil {
		b.writes.noteWrite(err)
	}
	return err
}

func (b bounded) Sessions(ctx context.Context) ([]store.Session, error) {
	return call(b, ctx, b.st.Sessions)
}

func (b bounded) Events(ctx context.Context, id string) ([]store.Record, error) {
	return call(b, ctx, func(ctx context.Context) ([]store.Record, error) { return b.st.Events(ctx, id) })
}

func (b bounded) EventsAfter(ctx context.Context, id string, after uint64) ([]store.Record, error) {
	return call(b, ctx, func(ctx context.Context) ([]store.Record, error) { return b.st.EventsAfter(ctx, id, after) })
}

func (b bounded) Delete(ctx context.Context, ids []string) error {
	return do(b, ctx, func(ctx context.Context) error { return b.st.Delete(ctx, ids) })
}

func (b bounded) Ready(ctx context.Context) error { return do(b, ctx, b.st.Ready) }

func (b bounded) CreateClass(ctx context.Context, c store.Class) error {
	return do(b, ctx, func(ctx context.Context) error { return b.st.CreateClass(ctx, c) })
}

func (b bounded) Classes(ctx context.Context) ([]store.Class, error) {
	return call(b, ctx, b.st.Classes)
}

func (b bounded) Class(ctx context.Context, id string) (store.Class, error) {
	return call(b, ctx, func(ctx context.Context) (store.Class, error) { return b.st.Class(ctx, id) })
}

func (b bounded) ClassByCode(ctx context.Context, code string) (store.Class, error) {
	return call(b, ctx, func(ctx context.Context) (store.Class, error) { return b.st.ClassByCode(ctx, code) })
}

func (b bounded) ClassByKey(ctx context.Context, keyHash [32]byte) (store.Class, error) {
	return call(b, ctx, func(ctx context.Context) (store.Class, error) { return b.st.ClassByKey(ctx, keyHash) })
}

func (b bounded) SetClassOpen(ctx context.Context, id string, open bool, code string) error {
	return do(b, ctx, func(ctx context.Context) error { return b.st.SetClassOpen(ctx, id, open, code) })
}

func (b bounded) SetClassPredictions(ctx context.Context, id string, required bool) error {
	return do(b, ctx, func(ctx context.Context) error { return b.st.SetClassPredictions(ctx, id, required) })
}

func (b bounded) SetClassKey(ctx context.Context, id string, keyHash [32]byte) error {
	return do(b, ctx, func(ctx context.Context) error { return b.st.SetClassKey(ctx, id, keyHash) })
}

func (b bounded) DeleteClass(ctx context.Context, id string) ([]string, error) {
	return call(b, ctx, func(ctx context.Context) ([]string, error) { return b.st.DeleteClass(ctx, id) })
}

func (b bounded) AddMember(ctx context.Context, m store.Member) error {
	return do(b, ctx, func(ctx context.Context) error { return b.st.AddMember(ctx, m) })
}

func (b bounded) RenameMember(ctx context.Context, session, name string) error {
	return do(b, ctx, func(ctx context.Context) error { return b.st.RenameMember(ctx, session, name) })
}

func (b bounded) RemoveMembers(ctx context.Context, sessions []string) error {
	return do(b, ctx, func(ctx context.Context) error { return b.st.RemoveMembers(ctx, sessions) })
}

func (b bounded) Members(ctx context.Context) ([]store.Member, error) {
	return call(b, ctx, b.st.Members)
}

func (b bounded) MemberOf(ctx context.Context, session string) (store.Member, error) {
	return call(b, ctx, func(ctx context.Context) (store.Member, error) { return b.st.MemberOf(ctx, session) })
}

func (b bounded) SaveLogin(ctx context.Context, l store.Login, now time.Time, keep int) error {
	return do(b, ctx, func(ctx context.Context) error { return b.st.SaveLogin(ctx, l, now, keep) })
}

func (b bounded) Login(ctx context.Context, idHash [32]byte) (store.Login, error) {
	return call(b, ctx, func(ctx context.Context) (store.Login, error) { return b.st.Login(ctx, idHash) })
}

func (b bounded) DeleteLogin(ctx context.Context, idHash [32]byte) error {
	return do(b, ctx, func(ctx context.Context) error { return b.st.DeleteLogin(ctx, idHash) })
}
