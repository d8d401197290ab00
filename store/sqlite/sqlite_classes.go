package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolcall-lab/lab/store"
)

// classesSchema is schema version 2: classes, members and logins. Hashes
// are 32-byte BLOBs, times Unix milliseconds. Member rows go with their
// session (the trigger), so deleting sessions anywhere forgets their
// memberships and frees their names.
var classesSchema = []string{
	`CREATE TABLE classes (
		id       TEXT PRIMARY KEY,
		code     TEXT NOT NULL,
		title    TEXT NOT NULL,
		is_open  INTEGER NOT NULL,
		key_hash BLOB NOT NULL,
		created  INTEGER NOT NULL
	)`,
	`CREATE UNIQUE INDEX classes_open_code ON classes (code) WHERE is_open = 1`,
	`CREATE UNIQUE INDEX classes_key ON classes (key_hash)`,
	`CREATE TABLE members (
		session  TEXT PRIMARY KEY,
		class    TEXT NOT NULL,
		name     TEXT NOT NULL,
		name_key TEXT NOT NULL,
		joined   INTEGER NOT NULL,
		UNIQUE (class, name_key)
	)`,
	`CREATE TRIGGER sessions_members AFTER DELETE ON sessions
		BEGIN DELETE FROM members WHERE session = OLD.id; END`,
	`CREATE TABLE logins (
		id_hash    BLOB PRIMARY KEY,
		class      TEXT NOT NULL,
		credential BLOB NOT NULL,
		expires    INTEGER NOT NULL
	)`,
	`CREATE INDEX logins_class ON logins (class)`,
}

// classSettingsSchema is schema version 5: a class's settings. Classes
// made before it require no predictions.
var classSettingsSchema = []string{
	`ALTER TABLE classes ADD COLUMN predictions_required INTEGER NOT NULL DEFAULT 0`,
}

// uniqueViolation reports whether err is SQLite's refusal of a duplicate
// in a unique index; its message names the index's columns.
func uniqueViolation(err error, column string) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed") && strings.Contains(err.Error(), column)
}

func (s *Store) closed() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// CreateClass stores a new class.
func (s *Store) CreateClass(ctx context.Context, c store.Class) error {
	err := s.write(ctx, func(tx *sql.Conn) error {
		_, err := tx.ExecContext(context.Background(), `INSERT INTO classes (id, code, title, is_open, key_hash, created, predictions_required) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			c.ID, c.Code, c.Title, c.Open, c.KeyHash[:], c.Created.UnixMilli(), c.PredictionsRequired)
		if uniqueViolation(err, "classes.code") {
			return store.ErrCodeTaken
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("creating class %s in %s: %w", c.ID, s.path, err)
	}
	return nil
}

// Classes lists every class, oldest first.
func (s *Store) Classes(ctx context.Context) ([]store.Class, error) {
	if s.closed() {
		return nil, store.ErrClosed
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+store.ClassColumns+` FROM classes ORDER BY created, id`)
	if err != nil {
		return nil, fmt.Errorf("listing classes in %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []store.Class
	for rows.Next() {
		c, err := store.ScanClass(rows)
		if err != nil {
			return nil, fmt.Errorf("listing classes in %s: %w", s.path, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing classes in %s: %w", s.path, err)
	}
	return out, nil
}

func (s *Store) oneClass(ctx context.Context, what, query string, args ...any) (store.Class, error) {
	if s.closed() {
		return store.Class{}, store.ErrClosed
	}
	c, err := store.ScanClass(s.db.QueryRowContext(ctx, `SELECT `+store.ClassColumns+` FROM classes `+query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Class{}, store.ErrNotFound
	}
	if err != nil {
		return store.Class{}, fmt.Errorf("reading %s from %s: %w", what, s.path, err)
	}
	return c, nil
}

// Class returns one class.
func (s *Store) Class(ctx context.Context, id string) (store.Class, error) {
	return s.oneClass(ctx, "class "+id, `WHERE id = ?`, id)
}

// ClassByCode returns the open class with code, else the newest closed one.
func (s *Store) ClassByCode(ctx context.Context, code string) (store.Class, error) {
	return s.oneClass(ctx, "a class by code", `WHERE code = ? ORDER BY is_open DESC, created DESC, id LIMIT 1`, code)
}

// ClassByKey returns the class whose key hashes to keyHash.
func (s *Store) ClassByKey(ctx context.Context, keyHash [32]byte) (store.Class, error) {
	return s.oneClass(ctx, "a class by key", `WHERE key_hash = ?`, keyHash[:])
}

// changed fails with ErrNotFound when res changed no row.
func changed(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// SetClassOpen closes or reopens a class.
func (s *Store) SetClassOpen(ctx context.Context, id string, open bool, code string) error {
	err := s.write(ctx, func(tx *sql.Conn) error {
		err := changed(tx.ExecContext(context.Background(), `UPDATE classes SET is_open = ?, code = ? WHERE id = ?`, open, code, id))
		if uniqueViolation(err, "classes.code") {
			return store.ErrCodeTaken
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("opening or closing class %s in %s: %w", id, s.path, err)
	}
	return nil
}

// SetClassPredictions sets whether the class requires predictions.
func (s *Store) SetClassPredictions(ctx context.Context, id string, required bool) error {
	err := s.write(ctx, func(tx *sql.Conn) error {
		return changed(tx.ExecContext(context.Background(), `UPDATE classes SET predictions_required = ? WHERE id = ?`, required, id))
	})
	if err != nil {
		return fmt.Errorf("setting predictions of class %s in %s: %w", id, s.path, err)
	}
	return nil
}

// SetClassKey replaces the class key and ends the class's logins.
func (s *Store) SetClassKey(ctx context.Context, id string, keyHash [32]byte) error {
	err := s.write(ctx, func(tx *sql.Conn) error {
		if err := changed(tx.ExecContext(context.Background(), `UPDATE classes SET key_hash = ? WHERE id = ?`, keyHash[:], id)); err != nil {
			return err
		}
		_, err := tx.ExecContext(context.Background(), `DELETE FROM logins WHERE class = ?`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("rotating the key of class %s in %s: %w", id, s.path, err)
	}
	return nil
}

// DeleteClass deletes the class with its members, sessions, events and logins.
func (s *Store) DeleteClass(ctx context.Context, id string) ([]string, error) {
	var sessions []string
	err := s.write(ctx, func(tx *sql.Conn) error {
		sessions = sessions[:0] // a retried transaction starts again
		rows, err := tx.QueryContext(context.Background(), `SELECT session FROM members WHERE class = ? ORDER BY joined, session`, id)
		if err != nil {
			return err
		}
		for rows.Next() {
			var sid string
			if err := rows.Scan(&sid); err != nil {
				rows.Close()
				return err
			}
			sessions = append(sessions, sid)
			s.txSeqs[sid] = 0 // deleted below: a later append starts it again
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if err := changed(tx.ExecContext(context.Background(), `DELETE FROM classes WHERE id = ?`, id)); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM chunks WHERE session IN (SELECT session FROM members WHERE class = ?)`,
			`DELETE FROM sessions WHERE id IN (SELECT session FROM members WHERE class = ?)`,
			`DELETE FROM members WHERE class = ?`,
			`DELETE FROM logins WHERE class = ?`,
		} {
			if _, err := tx.ExecContext(context.Background(), q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("deleting class %s from %s: %w", id, s.path, err)
	}
	return sessions, nil
}

// AddMember stores a member of an open class under a name not taken in it.
func (s *Store) AddMember(ctx context.Context, m store.Member) error {
	err := s.write(ctx, func(tx *sql.Conn) error {
		var open bool
		switch err := tx.QueryRowContext(context.Background(), `SELECT is_open FROM classes WHERE id = ?`, m.Class).Scan(&open); {
		case errors.Is(err, sql.ErrNoRows):
			return store.ErrNotFound
		case err != nil:
			return err
		case !open:
			return store.ErrClassClosed
		}
		_, err := tx.ExecContext(context.Background(), `INSERT INTO members (session, class, name, name_key, joined) VALUES (?, ?, ?, ?, ?)`,
			m.Session, m.Class, m.Name, store.NameKey(m.Name), m.Joined.UnixMilli())
		if uniqueViolation(err, "members.name_key") {
			return store.ErrNameTaken
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("adding session %s to class %s in %s: %w", m.Session, m.Class, s.path, err)
	}
	return nil
}

// RenameMember renames session's membership to a name not taken in its class.
func (s *Store) RenameMember(ctx context.Context, session, name string) error {
	err := s.write(ctx, func(tx *sql.Conn) error {
		err := changed(tx.ExecContext(context.Background(), `UPDATE members SET name = ?, name_key = ? WHERE session = ?`, name, store.NameKey(name), session))
		if uniqueViolation(err, "members.name_key") {
			return store.ErrNameTaken
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("renaming member %s in %s: %w", session, s.path, err)
	}
	return nil
}

// RemoveMembers forgets the sessions' memberships.
func (s *Store) RemoveMembers(ctx context.Context, sessions []string) error {
	err := s.write(ctx, func(tx *sql.Conn) error {
		for _, id := range sessions {
			if _, err := tx.ExecContext(context.Background(), `DELETE FROM members WHERE session = ?`, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("removing %d members from %s: %w", len(sessions), s.path, err)
	}
	return nil
}

// Members lists every member, by class then join time.
func (s *Store) Members(ctx context.Context) ([]store.Member, error) {
	if s.closed() {
		return nil, store.ErrClosed
	}
	rows, err := s.db.QueryContext(ctx, `SELECT session, class, name, joined FROM members ORDER BY class, joined, session`)
	if err != nil {
		return nil, fmt.Errorf("listing members in %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []store.Member
	for rows.Next() {
		var m store.Member
		var joined int64
		if err := rows.Scan(&m.Session, &m.Class, &m.Name, &joined); err != nil {
			return nil, fmt.Errorf("listing members in %s: %w", s.path, err)
		}
		m.Joined = time.UnixMilli(joined).UTC()
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing members in %s: %w", s.path, err)
	}
	return out, nil
}

// MemberOf returns one session's membership.
func (s *Store) MemberOf(ctx context.Context, session string) (store.Member, error) {
	if s.closed() {
		return store.Member{}, store.ErrClosed
	}
	m := store.Member{Session: session}
	var joined int64
	err := s.db.QueryRowContext(ctx, `SELECT class, name, joined FROM members WHERE session = ?`, session).Scan(&m.Class, &m.Name, &joined)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Member{}, store.ErrNotFound
	}
	if err != nil {
		return store.Member{}, fmt.Errorf("reading the membership of %s from %s: %w", session, s.path, err)
	}
	m.Joined = time.UnixMilli(joined).UTC()
	return m, nil
}

// SaveLogin stores a login after dropping expired ones and, past keep, the
// soonest to expire.
func (s *Store) SaveLogin(ctx context.Context, l store.Login, now time.Time, keep int) error {
	err := s.write(ctx, func(tx *sql.Conn) error {
		if _, err := tx.ExecContext(context.Background(), `DELETE FROM logins WHERE expires <= ?`, now.UnixMilli()); err != nil {
			return err
		}
		if _, err := tx.ExecContext(context.Background(), `DELETE FROM logins WHERE id_hash IN (SELECT id_hash FROM logins ORDER BY expires, id_hash
			LIMIT MAX(0, (SELECT COUNT(*) FROM logins) - ?))`, max(keep-1, 0)); err != nil {
			return err
		}
		_, err := tx.ExecContext(context.Background(), `INSERT INTO logins (id_hash, class, credential, expires) VALUES (?, ?, ?, ?)`,
			l.IDHash[:], l.Class, l.Credential[:], l.Expires.UnixMilli())
		return err
	})
	if err != nil {
		return fmt.Errorf("saving a login in %s: %w", s.path, err)
	}
	return nil
}

// Login returns the login with this id hash.
func (s *Store) Login(ctx context.Context, idHash [32]byte) (store.Login, error) {
	if s.closed() {
		return store.Login{}, store.ErrClosed
	}
	var l store.Login
	var cred []byte
	var expires int64
	err := s.db.QueryRowContext(ctx, `SELECT class, credential, expires FROM logins WHERE id_hash = ?`, idHash[:]).Scan(&l.Class, &cred, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Login{}, store.ErrNotFound
	}
	if err != nil {
		return store.Login{}, fmt.Errorf("reading a login from %s: %w", s.path, err)
	}
	l.IDHash = idHash
	copy(l.Credential[:], cred)
	l.Expires = time.UnixMilli(expires).UTC()
	return l, nil
}

// DeleteLogin ends one login.
func (s *Store) DeleteLogin(ctx context.Context, idHash [32]byte) error {
	err := s.write(ctx, func(tx *sql.Conn) error {
		_, err := tx.ExecContext(context.Background(), `DELETE FROM logins WHERE id_hash = ?`, idHash[:])
		return err
	})
	if err != nil {
		return fmt.Errorf("deleting a login from %s: %w", s.path, err)
	}
	return nil
}
