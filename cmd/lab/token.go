package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolcall-lab/lab/store/postgres"
)

// minTokenLength is the shortest token the server takes (server.Config.Validate).
const minTokenLength = 16

// tokenFileName is the file beside the SQLite data file that keeps a
// generated instructor token, so that a restart keeps it (and with it the
// console logins made with it, which the store ties to its hash).
const tokenFileName = "instructor-token"

// tokenFile is where a generated token is kept for the data setting data:
// beside the SQLite file; "" for the memory store and PostgreSQL, which
// have no file of their own (a fresh token each start).
func tokenFile(data string) string {
	if data == memoryData || postgres.IsURL(data) {
		return ""
	}
	return filepath.Join(filepath.Dir(data), tokenFileName)
}

// keptToken reads the token kept at path, or makes one and writes it there
// readable by the owner only (0600). made says it was made now. A file
// others may read is made private first; a file that holds no usable token
// is an error naming it, never silently replaced (it may be a typo'd edit).
func keptToken(path string, minLen int) (token string, made bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		token = strings.TrimSpace(string(b))
		if len([]rune(token)) < minLen || strings.ContainsAny(token, " \t\r\n") {
			return "", false, fmt.Errorf("the instructor token file %s holds no token of at least %d characters: delete it to have a new one made", path, minLen)
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path, 0o600); err != nil {
				return "", false, fmt.Errorf("making %s readable by its owner only: %w", path, err)
			}
		}
		return token, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, fmt.Errorf("reading the instructor token: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("making the directory of %s: %w", path, err)
	}
	token = rand.Text()
	// O_EXCL: two starts racing on one directory never overwrite each
	// other's token; the loser reads the winner's.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return keptToken(path, minLen)
	}
	if err != nil {
		return "", false, fmt.Errorf("writing the instructor token: %w", err)
	}
	_, werr := f.WriteString(token + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(path)
		return "", false, fmt.Errorf("writing the instructor token to %s: %w", path, err)
	}
	return token, true, nil
}

// tokenOrigin says, beside the printed token, where a generated token lives.
func tokenOrigin(data, keptAt string, madeNow bool) string {
	switch {
	case keptAt == "" && data == memoryData:
		return "generated, new at every start: " + memoryData + " keeps nothing"
	case keptAt == "":
		return "generated, new at every start: PostgreSQL keeps no token file, so give every replica the same one"
	case madeNow:
		return "generated, kept in " + keptAt
	}
	return "generated before, kept in " + keptAt
}
