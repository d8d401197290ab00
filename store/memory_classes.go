package store

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"
)

// memClasses is Memory's part of Classes, guarded by Memory.mu. Its maps
// are made on first write.
type memClasses struct {
	classes map[string]Class
	members map[string]Member // by session
	logins  map[[32]byte]Login
}

func (c *memClasses) init() {
	if c.classes == nil {
		c.classes = make(map[string]Class)
		c.members = make(map[string]Member)
		c.logins = make(map[[32]byte]Login)
	}
}

// codeTaken reports whether an open class other than id has code.
func (c *memClasses) codeTaken(id, code string) bool {
	for _, x := range c.classes {
		if x.Open && x.Code == code && x.ID != id {
			return true
		}
	}
	return false
}

// CreateClass stores a new class.
func (m *Memory) CreateClass(_ context.Context, c Class) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.classes.init()
	if c.Open && m.classes.codeTaken(c.ID, c.Code) {
		return ErrCodeTaken
	}
	m.classes.classes[c.ID] = c
	return nil
}

func byClassAge(a, b Class) int {
	return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.ID, b.ID))
}

// Classes lists every class, oldest first.
func (m *Memory) Classes(context.Context) ([]Class, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Class, 0, len(m.classes.classes))
	for _, c := range m.classes.classes {
		out = append(out, c)
	}
	slices.SortFunc(out, byClassAge)
	return out, nil
}

// find returns the first class, in order, that keep accepts.
func (m *Memory) find(keep func(Class) bool, order func(a, b Class) int) (Class, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Class{}, ErrClosed
	}
	var found []Class
	for _, c := range m.classes.classes {
		if keep(c) {
			found = append(found, c)
		}
	}
	if len(found) == 0 {
		return Class{}, ErrNotFound
	}
	slices.SortFunc(found, order)
	return found[0], nil
}

// Class returns one class.
func (m *Memory) Class(_ context.Context, id string) (Class, error) {
	return m.find(func(c Class) bool { return c.ID == id }, byClassAge)
}

// ClassByCode returns the open class with code, else the newest closed one.
func (m *Memory) ClassByCode(_ context.Context, code string) (Class, error) {
	return m.find(func(c Class) bool { return c.Code == code }, func(a, b Class) int {
		if a.Open != b.Open {
			if a.Open {
				return -1
			}
			return 1
		}
		return -byClassAge(a, b)
	})
}

// ClassByKey returns the class whose key hashes to keyHash.
func (m *Memory) ClassByKey(_ context.Context, keyHash [32]byte) (Class, error) {
	return m.find(func(c Class) bool { return c.KeyHash == keyHash }, byClassAge)
}

// SetClassOpen closes or reopens a class.
func (m *Memory) SetClassOpen(_ context.Context, id string, open bool, code string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	c, ok := m.classes.classes[id]
	switch {
	case !ok:
		return ErrNotFound
	case open && m.classes.codeTaken(id, code):
		return ErrCodeTaken
	}
	c.Open, c.Code = open, code
	m.classes.classes[id] = c
	return nil
}

// SetClassPredictions sets whether the class requires predictions.
func (m *Memory) SetClassPredictions(_ context.Context, id string, required bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	c, ok := m.classes.classes[id]
	if !ok {
		return ErrNotFound
	}
	c.PredictionsRequired = required
	m.classes.classes[id] = c
	return nil
}

// SetClassKey replaces the class key and ends the class's logins.
func (m *Memory) SetClassKey(_ context.Context, id string, keyHash [32]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	c, ok := m.classes.classes[id]
	if !ok {
		return ErrNotFound
	}
	c.KeyHash = keyHash
	m.classes.classes[id] = c
	m.classes.dropLogins(id)
	return nil
}

func (c *memClasses) dropLogins(class string) {
	for k, l := range c.logins {
		if l.Class == class {
			delete(c.logins, k)
		}
	}
}

// DeleteClass deletes the class with its members, sessions, events and logins.
func (m *Memory) DeleteClass(_ context.Context, id string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if _, ok := m.classes.classes[id]; !ok {
		return nil, ErrNotFound
	}
	delete(m.classes.classes, id)
	var gone []Member
	for sid, mem := range m.classes.members {
		if mem.Class == id {
			gone = append(gone, mem)
			delete(m.classes.members, sid)
			delete(m.sessions, sid)
		}
	}
	m.classes.dropLogins(id)
	slices.SortFunc(gone, byJoin)
	sessions := make([]string, len(gone))
	for i, mem := range gone {
		sessions[i] = mem.Session
	}
	return sessions, nil
}

func byJoin(a, b Member) int {
	return cmp.Or(strings.Compare(a.Class, b.Class), a.Joined.Compare(b.Joined), strings.Compare(a.Session, b.Session))
}

// AddMember stores a member of an open class under a name not taken in it.
func (m *Memory) AddMember(_ context.Context, mem Member) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.classes.init()
	c, ok := m.classes.classes[mem.Class]
	switch {
	case !ok:
		return ErrNotFound
	case !c.Open:
		return ErrClassClosed
	}
	key := NameKey(mem.Name)
	for _, other := range m.classes.members {
		if other.Class == mem.Class && NameKey(other.Name) == key {
			return ErrNameTaken
		}
	}
	if _, ok := m.classes.members[mem.Session]; ok {
		return ErrNameTaken // SQLite refuses a second row for the session too
	}
	m.classes.members[mem.Session] = mem
	return nil
}

// RenameMember renames session's membership to a name not taken in its class.
func (m *Memory) RenameMember(_ context.Context, session, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	mem, ok := m.classes.members[session]
	if !ok {
		return ErrNotFound
	}
	key := NameKey(name)
	for sid, other := range m.classes.members {
		if sid != session && other.Class == mem.Class && NameKey(other.Name) == key {
			return ErrNameTaken
		}
	}
	mem.Name = name
	m.classes.members[session] = mem
	return nil
}

// RemoveMembers forgets the sessions' memberships.
func (m *Memory) RemoveMembers(_ context.Context, sessions []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for _, id := range sessions {
		delete(m.classes.members, id)
	}
	return nil
}

// Members lists every member, by class then join time.
func (m *Memory) Members(context.Context) ([]Member, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Member, 0, len(m.classes.members))
	for _, mem := range m.classes.members {
		out = append(out, mem)
	}
	slices.SortFunc(out, byJoin)
	return out, nil
}

// MemberOf returns one session's membership.
func (m *Memory) MemberOf(_ context.Context, session string) (Member, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Member{}, ErrClosed
	}
	mem, ok := m.classes.members[session]
	if !ok {
		return Member{}, ErrNotFound
	}
	return mem, nil
}

// SaveLogin stores a login after dropping expired ones and, past keep, the
// soonest to expire.
func (m *Memory) SaveLogin(_ context.Context, l Login, now time.Time, keep int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.classes.init()
	var live []Login
	for k, x := range m.classes.logins {
		if !x.Expires.After(now) {
			delete(m.classes.logins, k)
			continue
		}
		live = append(live, x)
	}
	slices.SortFunc(live, func(a, b Login) int {
		return cmp.Or(a.Expires.Compare(b.Expires), slices.Compare(a.IDHash[:], b.IDHash[:]))
	})
	for i := 0; i < len(live)-max(keep-1, 0); i++ {
		delete(m.classes.logins, live[i].IDHash)
	}
	m.classes.logins[l.IDHash] = l
	return nil
}

// Login returns the login with this id hash.
func (m *Memory) Login(_ context.Context, idHash [32]byte) (Login, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Login{}, ErrClosed
	}
	l, ok := m.classes.logins[idHash]
	if !ok {
		return Login{}, ErrNotFound
	}
	return l, nil
}

// DeleteLogin ends one login.
func (m *Memory) DeleteLogin(_ context.Context, idHash [32]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	delete(m.classes.logins, idHash)
	return nil
}
