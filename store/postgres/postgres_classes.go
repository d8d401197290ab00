package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolcall-lab/lab/store"
)

// pgClassesSchema is PostgreSQL schema version 2: classes, members and
// logins, as classesSchema is for SQLite. A member's row goes with its
// session (the trigger; a member may join before its session has a row),
// so deleting sessions on any replica forgets their memberships and frees
// their names.
var pgClassesSchema = []string{
	`CREATE TABLE classes (
		id       text PRIMARY KEY,
		code     text NOT NULL,
		title    text NOT NULL,
		is_open  boolean NOT NULL,
		key_hash bytea NOT NULL,
		created  bigint NOT NULL
	)`,
	`CREATE UNIQUE INDEX classes_open_code ON classes (code) WHERE is_open`,
	`CREATE UNIQUE INDEX classes_key ON classes (key_hash)`,
	`CREATE TABLE members (
		session  text PRIMARY KEY,
		class    text NOT NULL,
		name     text NOT NULL,
		name_key text NOT NULL,
		joined   bigint NOT NULL,
		CONSTRAINT members_name UNIQUE (class, name_key)
	)`,
	`CREATE FUNCTION lab_forget_members() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN DELETE FROM members WHERE session = OLD.id; RETURN OLD; END $$`,
	`CREATE TRIGGER sessions_members AFTER DELETE ON sessions
		FOR EACH ROW EXECUTE FUNCTION lab_forget_members()`,
	`CREATE TABLE logins (
		id_hash    bytea PRIMARY KEY,
		class      text NOT NULL,
		credential bytea NOT NULL,
		expires    bigint NOT NULL
	)`,
	`CREATE INDEX logins_class ON logins (class)`,
}

// pgViolation reports whether err is PostgreSQL refusing a duplicate in the
// named unique index or constraint.
func pgViolation(err error, constraint string) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && e.Code == "23505" && e.ConstraintName == constraint
}

// inTx runs fn in one transaction on the pool.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	if err := s.check(); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// CreateClass stores a new class.
func (s *Store) CreateClass(ctx context.Context, c store.Class) error {
	if err := s.check(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO classes (id, code, title, is_open, key_hash, created, predictions_required) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		c.ID, c.Code, c.Title, c.Open, c.KeyHash[:], c.Created.UnixMilli(), c.PredictionsRequired)
	if pgViolation(err, "classes_open_code") {
		err = store.ErrCodeTaken
	}
	if err != nil {
		return fmt.Errorf("creating class %s in %s: %w", c.ID, s.name, err)
	}
	return nil
}

func pgClass(row pgx.CollectableRow) (store.Class, error) {
	return store.ScanClass(row) // the same columns as SQLite's (ClassColumns)
}

// Classes lists every class, oldest first.
func (s *Store) Classes(ctx context.Context) ([]store.Class, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+store.ClassColumns+` FROM classes ORDER BY created, id`)
	if err != nil {
		return nil, fmt.Errorf("listing classes in %s: %w", s.name, err)
	}
	out, err := pgx.CollectRows(rows, pgClass)
	if err != nil {
		return nil, fmt.Errorf("listing classes in %s: %w", s.name, err)
	}
	return out, nil
}

func (s *Store) oneClass(ctx context.Context, what, query string, args ...any) (store.Class, error) {
	if err := s.check(); err != nil {
		return store.Class{}, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+store.ClassColumns+` FROM classes `+query, args...)
	if err != nil {
		return store.Class{}, fmt.Errorf("reading %s from %s: %w", what, s.name, err)
	}
	c, err := pgx.CollectExactlyOneRow(rows, pgClass)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Class{}, store.ErrNotFound
	}
	if err != nil {
		return store.Class{}, fmt.Errorf("reading %s from %s: %w", what, s.name, err)
	}
	return c, nil
}

// Class returns one class.
func (s *Store) Class(ctx context.Context, id string) (store.Class, error) {
	return s.oneClass(ctx, "class "+id, `WHERE id = $1`, id)
}

// ClassByCode returns the open class with code, else the newest closed one.
func (s *Store) ClassByCode(ctx context.Context, code string) (store.Class, error) {
	return s.oneClass(ctx, "a class by code", `WHERE code = $1 ORDER BY is_open DESC, created DESC, id LIMIT 1`, code)
}

// ClassByKey returns the class whose key hashes to keyHash.
func (s *Store) ClassByKey(ctx context.Context, keyHash [32]byte) (store.Class, error) {
	return s.oneClass(ctx, "a class by key", `WHERE key_hash = $1`, keyHash[:])
}

// pgChanged fails with ErrNotFound when the statement changed no row.
func pgChanged(tag pgconn.CommandTag, err error) error {
	if err == nil && tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return err
}

// SetClassOpen closes or reopens a class.
func (s *Store) SetClassOpen(ctx context.Context, id string, open bool, code string) error {
	if err := s.check(); err != nil {
		return err
	}
	err := pgChanged(s.pool.Exec(ctx, `UPDATE classes SET is_open = $1, code = $2 WHERE id = $3`, open, code, id))
	if pgViolation(err, "classes_open_code") {
		err = store.ErrCodeTaken
	}
	if err != nil {
		return fmt.Errorf("opening or closing class %s in %s: %w", id, s.name, err)
	}
	return nil
}

// SetClassPredictions sets whether the class requires predictions.
func (s *Store) SetClassPredictions(ctx context.Context, id string, required bool) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := pgChanged(tx.Exec(ctx, `UPDATE classes SET predictions_required = $1 WHERE id = $2`, required, id)); err != nil {
			return err
		}
		// Delivered on commit: other replicas apply the setting (heard).
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, pgChannel, store.ClassChanged+id+" 0")
		return err
	})
	if err != nil {
		return fmt.Errorf("setting predictions of class %s in %s: %w", id, s.name, err)
	}
	return nil
}

// SetClassKey replaces the class key and ends the class's logins.
func (s *Store) SetClassKey(ctx context.Context, id string, keyHash [32]byte) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := pgChanged(tx.Exec(ctx, `UPDATE classes SET key_hash = $1 WHERE id = $2`, keyHash[:], id)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM logins WHERE class = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("rotating the key of class %s in %s: %w", id, s.name, err)
	}
	return nil
}

// DeleteClass deletes the class with its members, sessions, events and
// logins.
func (s *Store) DeleteClass(ctx context.Context, id string) ([]string, error) {
	var sessions []string
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT session FROM members WHERE class = $1 ORDER BY joined, session`, id)
		if err != nil {
			return err
		}
		if sessions, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if err := pgChanged(tx.Exec(ctx, `DELETE FROM classes WHERE id = $1`, id)); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM sessions WHERE id IN (SELECT session FROM members WHERE class = $1)`, // events go with them
			`DELETE FROM members WHERE class = $1`,
			`DELETE FROM logins WHERE class = $1`,
		} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, notifyDeletedSQL, pgChannel, sessions)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("deleting class %s from %s: %w", id, s.name, err)
	}
	return sessions, nil
}

// AddMember stores a member of an open class under a name not taken in it.
// The class's row is locked meanwhile, so that it cannot close between the
// check and the insert.
func (s *Store) AddMember(ctx context.Context, m store.Member) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var open bool
		switch err := tx.QueryRow(ctx, `SELECT is_open FROM classes WHERE id = $1 FOR SHARE`, m.Class).Scan(&open); {
		case errors.Is(err, pgx.ErrNoRows):
			return store.ErrNotFound
		case err != nil:
			return err
		case !open:
			return store.ErrClassClosed
		}
		_, err := tx.Exec(ctx, `INSERT INTO members (session, class, name, name_key, joined) VALUES ($1, $2, $3, $4, $5)`,
			m.Session, m.Class, m.Name, store.NameKey(m.Name), m.Joined.UnixMilli())
		if pgViolation(err, "members_name") {
			return store.ErrNameTaken
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("adding session %s to class %s in %s: %w", m.Session, m.Class, s.name, err)
	}
	return nil
}

// RenameMember renames session's membership to a name not taken in its class.
func (s *Store) RenameMember(ctx context.Context, session, name string) error {
	if err := s.check(); err != nil {
		return err
	}
	err := pgChanged(s.pool.Exec(ctx, `UPDATE members SET name = $1, name_key = $2 WHERE session = $3`, name, store.NameKey(name), session))
	if pgViolation(err, "members_name") {
		err = store.ErrNameTaken
	}
	if err != nil {
		return fmt.Errorf("renaming member %s in %s: %w", session, s.name, err)
	}
	return nil
}

// RemoveMembers forgets the sessions' memberships.
func (s *Store) RemoveMembers(ctx context.Context, sessions []string) error {
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM members WHERE session = ANY($1)`, sessions); err != nil {
		return fmt.Errorf("removing %d members from %s: %w", len(sessions), s.name, err)
	}
	return nil
}

// Members lists every member, by class then join time.
func (s *Store) Members(ctx context.Context) ([]store.Member, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT session, class, name, joined FROM members ORDER BY class, joined, session`)
	if err != nil {
		return nil, fmt.Errorf("listing members in %s: %w", s.name, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Member, error) {
		var m store.Member
		var joined int64
		if err := row.Scan(&m.Session, &m.Class, &m.Name, &joined); err != nil {
			return store.Member{}, err
		}
		m.Joined = time.UnixMilli(joined).UTC()
		return m, nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing members in %s: %w", s.name, err)
	}
	return out, nil
}

// MemberOf returns one session's membership.
func (s *Store) MemberOf(ctx context.Context, session string) (store.Member, error) {
	if err := s.check(); err != nil {
		return store.Member{}, err
	}
	m := store.Member{Session: session}
	var joined int64
	err := s.pool.QueryRow(ctx, `SELECT class, name, joined FROM members WHERE session = $1`, session).Scan(&m.Class, &m.Name, &joined)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Member{}, store.ErrNotFound
	}
	if err != nil {
		return store.Member{}, fmt.Errorf("reading the membership of %s from %s: %w", session, s.name, err)
	}
	m.Joined = time.UnixMilli(joined).UTC()
	return m, nil
}

// SaveLogin stores a login after dropping expired ones and, past keep, the
// soonest to expire.
func (s *Store) SaveLogin(ctx context.Context, l store.Login, now time.Time, keep int) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM logins WHERE expires <= $1`, now.UnixMilli()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM logins WHERE id_hash IN (SELECT id_hash FROM logins ORDER BY expires, id_hash
			LIMIT GREATEST(0, (SELECT COUNT(*) FROM logins) - $1))`, max(keep-1, 0)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO logins (id_hash, class, credential, expires) VALUES ($1, $2, $3, $4)`,
			l.IDHash[:], l.Class, l.Credential[:], l.Expires.UnixMilli())
		return err
	})
	if err != nil {
		return fmt.Errorf("saving a login in %s: %w", s.name, err)
	}
	return nil
}

// Login returns the login with this id hash.
func (s *Store) Login(ctx context.Context, idHash [32]byte) (store.Login, error) {
	if err := s.check(); err != nil {
		return store.Login{}, err
	}
	var l store.Login
	var cred []byte
	var expires int64
	err := s.pool.QueryRow(ctx, `SELECT class, credential, expires FROM logins WHERE id_hash = $1`, idHash[:]).Scan(&l.Class, &cred, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Login{}, store.ErrNotFound
	}
	if err != nil {
		return store.Login{}, fmt.Errorf("reading a login from %s: %w", s.name, err)
	}
	l.IDHash = idHash
	copy(l.Credential[:], cred)
	l.Expires = time.UnixMilli(expires).UTC()
	return l, nil
}

// DeleteLogin ends one login.
func (s *Store) DeleteLogin(ctx context.Context, idHash [32]byte) error {
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM logins WHERE id_hash = $1`, idHash[:]); err != nil {
		return fmt.Errorf("deleting a login from %s: %w", s.name, err)
	}
	return nil
}
