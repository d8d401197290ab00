package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// Classes, their members and instructor logins. They are not the lab's
// rules (package model knows nothing of them): a class groups sessions
// behind a join code, a member is a session that joined a class under a
// name, and a login is a console cookie that outlives a restart. Both
// stores implement Classes; the SQL keeps to what PostgreSQL also runs
// (partial unique indexes, no SQLite-only types).

// Class is one class. Its key is never stored, only KeyHash.
type Class struct {
	ID      string
	Code    string // six digits, unique among open classes
	Title   string
	Open    bool
	Created time.Time // millisecond precision, UTC
	KeyHash [32]byte  // HashSecret of the class key
	// PredictionsRequired: the class's students must predict each
	// delivery's outcome (docs/classes.md, "Settings").
	PredictionsRequired bool
}

// Member is a session that joined a class.
type Member struct {
	Session string
	Class   string
	Name    string // as given at the door, normalized
	Joined  time.Time
}

// Login is one console login: the cookie holds a random id, the store its
// hash. Class is "" for a login with the server's instructor token.
// Credential is HashSecret of the secret the login was made with (the
// token's, or the class key's), so that a login ends when that secret
// changes: a rotated key, or a restart with another token.
type Login struct {
	IDHash     [32]byte
	Class      string
	Credential [32]byte
	Expires    time.Time
}

var (
	// ErrNotFound: no such class (or login).
	ErrNotFound = errors.New("not found")
	// ErrCodeTaken: an open class already has this join code.
	ErrCodeTaken = errors.New("the join code is used by another open class")
	// ErrNameTaken: a member of the class already has this name.
	ErrNameTaken = errors.New("the name is already taken in this class")
	// ErrClassClosed: the class takes no new members.
	ErrClassClosed = errors.New("the class is closed")
)

// Classes is what a store keeps about classes, members and logins.
type Classes interface {
	// CreateClass stores a new class; ErrCodeTaken if an open class has
	// its code.
	CreateClass(ctx context.Context, c Class) error
	// Classes lists every class, oldest first.
	Classes(ctx context.Context) ([]Class, error)
	// Class returns one class, or ErrNotFound.
	Class(ctx context.Context, id string) (Class, error)
	// ClassByCode returns the open class with this code, else the newest
	// closed one, else ErrNotFound.
	ClassByCode(ctx context.Context, code string) (Class, error)
	// ClassByKey returns the class whose key hashes to keyHash, or
	// ErrNotFound.
	ClassByKey(ctx context.Context, keyHash [32]byte) (Class, error)
	// SetClassOpen closes or reopens a class; reopening with a code that
	// another open class now has is ErrCodeTaken (code is the code to
	// reopen with). ErrNotFound for an unknown class.
	SetClassOpen(ctx context.Context, id string, open bool, code string) error
	// SetClassPredictions sets whether the class requires predictions;
	// ErrNotFound for an unknown class.
	SetClassPredictions(ctx context.Context, id string, required bool) error
	// SetClassKey replaces the class key and ends the class's logins.
	SetClassKey(ctx context.Context, id string, keyHash [32]byte) error
	// DeleteClass deletes the class, its members, their sessions and
	// events, and its logins; it returns the deleted sessions.
	DeleteClass(ctx context.Context, id string) ([]string, error)
	// AddMember stores a member: ErrNotFound if the class is gone,
	// ErrClassClosed if it is closed, ErrNameTaken if the name (compared
	// by NameKey) is taken in it.
	AddMember(ctx context.Context, m Member) error
	// RenameMember changes the name of session's membership: ErrNameTaken
	// if another member of its class has the name (compared by NameKey),
	// ErrNotFound if the session is no member.
	RenameMember(ctx context.Context, session, name string) error
	// RemoveMembers forgets memberships; deleting a session does too.
	RemoveMembers(ctx context.Context, sessions []string) error
	// Members lists every member of every class, by class then join time.
	Members(ctx context.Context) ([]Member, error)
	// MemberOf returns the membership of one session, or ErrNotFound (a
	// replica reading a session another one made).
	MemberOf(ctx context.Context, session string) (Member, error)
	// SaveLogin stores a login, first deleting logins that expired by now
	// and, past keep logins, the ones that expire soonest.
	SaveLogin(ctx context.Context, l Login, now time.Time, keep int) error
	// Login returns the login with this id hash, or ErrNotFound.
	Login(ctx context.Context, idHash [32]byte) (Login, error)
	// DeleteLogin ends one login; unknown ones are no error.
	DeleteLogin(ctx context.Context, idHash [32]byte) error
}

// ClassColumns are the columns, in order, that ScanClass reads: the SQL
// drivers' classes tables have them alike.
const ClassColumns = `id, code, title, is_open, key_hash, created, predictions_required`

// ScanClass reads a class from a row of ClassColumns (a database/sql or a
// pgx row).
func ScanClass(row interface{ Scan(...any) error }) (Class, error) {
	var c Class
	var key []byte
	var created int64
	if err := row.Scan(&c.ID, &c.Code, &c.Title, &c.Open, &key, &created, &c.PredictionsRequired); err != nil {
		return Class{}, err
	}
	if len(key) != len(c.KeyHash) {
		return Class{}, fmt.Errorf("class %s: key hash of %d bytes", c.ID, len(key))
	}
	copy(c.KeyHash[:], key)
	c.Created = time.UnixMilli(created).UTC()
	return c, nil
}

// CodeDigits is how long a join code is.
const CodeDigits = 6

// NewCode returns a random join code of CodeDigits digits from crypto/rand.
// Uniqueness among open classes is the store's to enforce: on ErrCodeTaken
// draw another.
func NewCode() string {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		panic("crypto/rand failed: " + err.Error()) // it does not, on supported systems
	}
	return fmt.Sprintf("%06d", n.Int64())
}

// ValidCode reports whether s has the shape of a join code.
func ValidCode(s string) bool {
	if len(s) != CodeDigits {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// NewSecret returns a random secret for a class key or a login id: 26
// base32 characters (130 bits), typeable into a form.
func NewSecret() string { return rand.Text() }

// HashSecret is how a secret is kept: the secrets are random and long, so
// a plain SHA-256 suffices (no password stretching), and comparing hashes
// hides a secret's content and length from timing.
func HashSecret(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// NameKey is what two names are compared by for uniqueness in a class:
// case and runs of spaces do not make a name different.
func NameKey(name string) string {
	return strings.ToLower(strings.Join(strings.Fields(name), " "))
}
