package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browserStartTimeout bounds starting Chromium, and browserTestTimeout what a
// test then does with it. They are separate so that a slow start on a busy
// machine does not eat into the time the test's own steps have.
const (
	browserStartTimeout = 20 * time.Second
	browserTestTimeout  = 30 * time.Second
)

// findChromium returns the browser the tests drive: LAB_CHROMIUM if set, else
// Debian's chromium, else the first of the usual names in PATH.
func findChromium() (string, error) {
	if p := os.Getenv("LAB_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("LAB_CHROMIUM=%s: %w", p, err)
		}
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium", nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium")
}

// browserSlot holds one token per running browser.
var browserSlot = make(chan struct{}, 1)

// browser is one headless Chromium started for one test. Its tabs share the
// collector of page problems, and the test fails at cleanup if any tab logged
// a console error or threw an uncaught exception (CSP violations are console
// errors too).
type browser struct {
	t   *testing.T
	ctx context.Context // carries the whole test's deadline

	mu       sync.Mutex
	problems []string
	expected []string       // problems a test causes on purpose (expectProblem)
	readers  sync.WaitGroup // console readers, one per tab
}

// tab is one browser tab, with the actions the tests use on it. Every action
// fails the test at once with the step that failed.
type tab struct {
	b    *browser
	t    *testing.T
	name string
	ctx  context.Context
}

// newBrowser starts Chromium and returns its first tab. It skips the test when
// no Chromium is installed, unless LAB_E2E=1 asks for a failure instead.
func newBrowser(t *testing.T) *tab {
	t.Helper()
	return newBrowserWithin(t, browserTestTimeout)
}

// newBrowserWithin is newBrowser for a test that may take up to timeout.
func newBrowserWithin(t *testing.T, timeout time.Duration) *tab {
	t.Helper()
	if testing.Short() {
		// CI's race run: the pages are tested in the plain run, and a
		// browser's timings under the race detector test the machine.
		t.Skip("browser tests do not run with -short")
	}
	path, err := findChromium()
	if err != nil {
		// A LAB_CHROMIUM that names no file is a mistake to report, not a
		// missing browser to skip.
		if os.Getenv("LAB_E2E") == "1" || os.Getenv("LAB_CHROMIUM") != "" {
			t.Fatalf("chromium not found (%v): install Debian's chromium or set LAB_CHROMIUM", err)
		}
		t.Skip("chromium not found: install Debian's chromium or set LAB_CHROMIUM; set LAB_E2E=1 to make this a failure")
	}

	// One browser at a time: the browser tests run in parallel with the
	// others, not with each other (Chromium is heavy on a small machine).
	// Registered first, so released last, after the browser has exited.
	browserSlot <- struct{}{}
	t.Cleanup(func() { <-browserSlot })
	options := func() []chromedp.ExecAllocatorOption {
		return []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(path),
			chromedp.Headless,
			chromedp.NoSandbox, // the tests run as root, where the sandbox cannot start
			chromedp.DisableGPU,
			chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck,
			// This machine has no network beyond loopback; without these
			// Chromium keeps trying to reach Google's services.
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-extensions", true),
			chromedp.Flag("disable-default-apps", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			// Background tabs must keep their timers and sockets running: the
			// tests drive two tabs of one session at once.
			chromedp.Flag("disable-background-timer-throttling", true),
			chromedp.Flag("disable-backgrounding-occluded-windows", true),
			chromedp.Flag("disable-renderer-backgrounding", true),
			chromedp.WindowSize(1000, 900),
			chromedp.UserDataDir(t.TempDir()),
		}
	}
	// The browser's own contexts have no deadline: a deadline on the context
	// of the first Run would kill the browser when it ends, with no chance
	// to report what the page showed. The first Do starts the browser and
	// opens the first tab; a start that fails (Chromium now and then exits
	// at once on a busy machine) is tried once more, with a profile of its
	// own.
	var allocCtx, browserCtx context.Context
	var cancelAlloc, cancelBrowser context.CancelFunc
	for attempt := 1; ; attempt++ {
		allocCtx, cancelAlloc = chromedp.NewExecAllocator(context.Background(), options()...)
		browserCtx, cancelBrowser = chromedp.NewContext(allocCtx)
		tooSlow := time.AfterFunc(browserStartTimeout, cancelAlloc)
		err = chromedp.Do(browserCtx)
		slow := !tooSlow.Stop()
		if err == nil && !slow {
			break
		}
		cancelBrowser()
		cancelAlloc()
		if slow {
			err = fmt.Errorf("it took more than %v", browserStartTimeout)
		}
		if attempt == 2 {
			t.Fatalf("starting %s: %v", path, err)
		}
		t.Logf("starting %s: %v; once more", path, err)
	}
	ctx, cancelTest := context.WithTimeout(browserCtx, timeout)

	b := &browser{t: t, ctx: ctx}
	// Cleanups run last-in first-out: the browser goes first (which ends
	// every console reader), then the readers are waited for, then the
	// collected problems are reported. t.TempDir's removal, registered
	// earlier, runs after the browser has exited.
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, p := range b.problems {
			if !slices.ContainsFunc(b.expected, func(e string) bool { return strings.Contains(p, e) }) {
				t.Errorf("page problem: %s", p)
			}
		}
	})
	t.Cleanup(b.readers.Wait)
	t.Cleanup(cancelAlloc) // also waits for the browser process to exit
	t.Cleanup(cancelBrowser)
	t.Cleanup(cancelTest)

	return b.watch(ctx, "tab 1")
}

// newTab opens another tab in the same browser.
func (p *tab) newTab(name string) *tab {
	p.t.Helper()
	ctx, cancel := chromedp.NewContext(p.b.ctx)
	p.t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		p.t.Fatalf("opening %s: %v", name, err)
	}
	return p.b.watch(ctx, name)
}

// watch records the console errors and exceptions of the tab in ctx.
func (b *browser) watch(ctx context.Context, name string) *tab {
	messages := chromedp.Console(ctx)
	b.readers.Go(func() {
		for m, err := range messages {
			if err != nil {
				return // the tab or the test has ended
			}
			if m.Type != chromedp.ConsoleError && !m.IsException() {
				continue
			}
			where := m.URL
			if where != "" {
				where = fmt.Sprintf(" (%s:%d)", where, m.Line+1)
			}
			b.mu.Lock()
			b.problems = append(b.problems, fmt.Sprintf("%s: %s%s", name, m, where))
			b.mu.Unlock()
		}
	})
	return &tab{b: b, t: b.t, name: name, ctx: ctx}
}

// expectProblem says that a console message holding what is the test's own
// doing (a form refused with its 400 page), not a page problem.
func (p *tab) expectProblem(what string) {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	p.b.expected = append(p.b.expected, what)
}

// do runs actions in the tab and fails the test if one fails.
func (p *tab) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %s: %v", p.name, step, err)
	}
}

// evalJS evaluates a JavaScript expression in the tab and decodes its value.
func evalJS[T any](p *tab, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("%s: evaluating %.60q: %v", p.name, expr, err)
	}
	return v
}

// waitTimeout bounds one wait for a condition, well inside the test's
// deadline, so that a page that never gets there fails with the step it
// was waiting for and leaves time to shut everything down.
const waitTimeout = 10 * time.Second

// waitUntil reads the page over and over until check accepts what it read,
// and fails the test with the last thing read if that does not happen
// within waitTimeout. It waits for a condition, never for a duration: the
// pause between two reads only keeps it from spinning.
func waitUntil[V any](p *tab, what string, read func(context.Context) (V, error), check func(V) bool) V {
	p.t.Helper()
	return waitUntilWithin(p, waitTimeout, what, read, check)
}

// waitUntilWithin is waitUntil with a wait of its own.
func waitUntilWithin[V any](p *tab, wait time.Duration, what string, read func(context.Context) (V, error), check func(V) bool) V {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, wait)
	defer cancel()
	var last V
	var seen bool
	var lastErr error
	for {
		v, err := read(ctx)
		if err == nil {
			if check(v) {
				return v
			}
			last, seen = v, true
		} else if ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			switch {
			case seen:
				p.t.Fatalf("%s: gave up waiting for %s; the page shows:\n%s", p.name, what, describe(last))
			case lastErr != nil:
				p.t.Fatalf("%s: gave up waiting for %s: %v", p.name, what, lastErr)
			default:
				p.t.Fatalf("%s: gave up waiting for %s: %v", p.name, what, ctx.Err())
			}
		case <-time.After(15 * time.Millisecond):
		}
	}
}

// describe formats a value for a failure message.
func describe(v any) string {
	if s, ok := v.(fmt.Stringer); ok {
		return s.String()
	}
	return strings.TrimSpace(fmt.Sprintf("%+v", v))
}
