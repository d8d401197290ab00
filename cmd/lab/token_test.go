package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestKeptToken: a generated token is made once, 0600, and read back; a
// file others could read is made private; a file without a token is an
// error naming it, never replaced.
func TestKeptToken(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", tokenFileName)
	tok, made, err := keptToken(path, minTokenLength)
	if err != nil || !made || len(tok) < minTokenLength {
		t.Fatalf("first: %q %v %v", tok, made, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	again, made, err := keptToken(path, minTokenLength)
	if err != nil || made || again != tok {
		t.Fatalf("second: %q %v %v, want %q kept", again, made, err, tok)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keptToken(path, minTokenLength); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("a readable file stays %v", fi.Mode())
	}
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keptToken(path, minTokenLength); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("a file without a token: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "short\n" {
		t.Fatalf("the bad file was replaced: %q", b)
	}
	for data, want := range map[string]string{
		memoryData:                  "",
		"postgres://u@h/db":         "",
		"./lab-data/lab.db":         filepath.Join("lab-data", tokenFileName),
		filepath.Join("/x", "a.db"): filepath.Join("/x", tokenFileName),
	} {
		if got := tokenFile(data); got != want {
			t.Errorf("tokenFile(%q) = %q, want %q", data, got, want)
		}
	}
}

// TestRestartKeepsTokenAndLogin: two starts of run on one data directory
// with no token set print the same token with where it lives, and a
// console login made before the restart still opens the class list after
// it; the login form returns to the page that asked (next), never to
// another site.
func TestRestartKeepsTokenAndLogin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "lab.db")
	start := func() (base, token string, stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		var stdout, stderr syncBuffer
		exited := make(chan int, 1)
		go func() {
			exited <- run(ctx, []string{"lab", "-addr", "127.0.0.1:0", "-data", data}, env(nil), &stdout, &stderr)
		}()
		line := regexp.MustCompile(`Instructor console: (http://\S+)/instructor [\s\S]*Instructor token \(generated[^)]*kept in ([^;]+);[^)]*\): (\S+)\n`)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if m := line.FindStringSubmatch(stdout.String()); m != nil {
				if m[2] != filepath.Join(dir, tokenFileName) {
					t.Errorf("the token is said to live in %q", m[2])
				}
				return m[1], m[3], func() { cancel(); <-exited }
			}
			if time.Now().After(deadline) {
				t.Fatalf("no token printed; stdout %s stderr %s", stdout.String(), stderr.String())
			}
		}
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base, token, stop := start()
	form := url.Values{"token": {token}, "next": {"/instructor/classes/x/projector?session=y"}}
	resp, err := noRedirect.PostForm(base+"/instructor/login", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/instructor/classes/x/projector?session=y" {
		t.Fatalf("login: %d to %q, want back to the projector", resp.StatusCode, loc)
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "lab_instructor" {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatal("no login cookie")
	}
	for _, evil := range []string{"//evil.example/instructor", "https://evil.example/", "/instructor/../j/1", "/\\evil.example", "/instructor/login"} {
		resp, err := noRedirect.PostForm(base+"/instructor/login", url.Values{"token": {token}, "next": {evil}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); loc != "/instructor" {
			t.Errorf("next %q led to %q, want /instructor", evil, loc)
		}
	}
	stop()

	base2, token2, stop2 := start()
	defer stop2()
	if token2 != token {
		t.Fatalf("the restart printed another token")
	}
	req, _ := http.NewRequest(http.MethodGet, base2+"/instructor", nil)
	req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after the restart the console answers %d to %q: the login did not survive", resp.StatusCode, resp.Header.Get("Location"))
	}
}
