package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"debug/elf"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
)

// TestImage builds the repository's Dockerfile as it is, with the README's
// "docker build" line, and runs the image with the README's "docker run"
// line, both translated for buildah and runc (no Docker engine runs on CI
// machines, and no container registry is reachable from them). It needs
// root and LAB_IMAGE=1, and installs Debian's buildah, runc and mmdebstrap
// when they are missing.
//
// Where the Dockerfile's base images cannot be pulled, it makes local
// stand-ins under the same names, in a containers storage of its own
// (never the machine's), cached in $XDG_CACHE_HOME/lab-image (or
// ~/.cache/lab-image) and keyed by what they are made from: golang:1.26
// from Debian bookworm (mmdebstrap) and this machine's /usr/local/go,
// node:22-bookworm-slim from Debian's nodejs (trixie's: rescript 12.2.0
// wants Node 20.11 or later, bookworm has 18, and npm skips the
// compiler's package on an older Node) and npm from its own tarball, as
// the Node images ship it, and
// gcr.io/distroless/static-debian12:nonroot as a static root file system
// with the nonroot user (65532), CA certificates and tzdata.
//
// In the running container it checks /readyz, the user (uid 65532, no
// capabilities), a read-only root with /data the only writable place,
// the image's HEALTHCHECK, a ReScript submission compiled and passed,
// SIGTERM, and a restart on the same /data that keeps the sessions.
func TestImage(t *testing.T) {
	if os.Getenv("LAB_IMAGE") != "1" {
		t.Skip("builds the Dockerfile with buildah and runs it with runc, as root; set LAB_IMAGE=1 to run it (.ci/run does)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("LAB_IMAGE=1: the image test runs buildah and runc as root; run it as root")
	}
	e := newEngine(t)
	// CI runs this part, mostly downloads and dpkg, early and in the
	// background (-run 'TestImage/stand-ins'), while the other tests
	// run; the build, which compiles the lab (its Go build cache is kept
	// between runs, see build), runs last.
	if !t.Run("stand-ins", func(t *testing.T) { e.ensureBases(t) }) {
		t.FailNow()
	}
	t.Run("container", func(t *testing.T) { e.buildAndRun(t) })
}

// ensureBases installs the tools and makes sure the Dockerfile's base
// images are in the storage.
func (e *engine) ensureBases(t *testing.T) {
	e.installTools(t)
	var missing []standIn
	var bases []debian
	for _, s := range e.standIns(t) {
		if e.needsStandIn(t, s) {
			missing = append(missing, s)
			bases = append(bases, s.from)
		}
	}
	e.makeDebian(t, bases...)
	for _, s := range missing {
		e.makeStandIn(t, s)
	}
}

// buildAndRun builds the image with the README's docker build line and
// runs it with its docker run line.
func (e *engine) buildAndRun(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	buildLine, runLine := readmeDockerLines(t, string(readme))
	build := parseDockerBuild(t, buildLine)
	img := e.build(t, build)
	e.imageChecks(t, img, build)

	run := parseDockerRun(t, runLine)
	if run.image != build.tag {
		t.Fatalf("the README runs %q but builds %q", run.image, build.tag)
	}
	c := e.newContainer(t, img, run)

	first := c.start(t)
	t.Logf("first start: ready in %v", first.Round(time.Millisecond))
	c.processChecks(t)
	c.writeChecks(t)
	c.execChecks(t, img, build)
	t.Run("rescript", func(t *testing.T) { c.rescriptCheck(t) })
	t.Run("live", func(t *testing.T) { c.liveCheck(t) })

	// A change before SIGTERM, read after the restart on the same /data.
	id := uuid.NewString()
	ws, _ := c.socket(t, id)
	before := change(t, ws, `{"type":"rename","name":"Ada"}`)
	stopped := c.stop(t, ws)
	t.Logf("SIGTERM: stopped in %v", stopped.Round(time.Millisecond))

	again := c.start(t)
	t.Logf("restart on the same /data: ready in %v", again.Round(time.Millisecond))
	_, after := c.socket(t, id)
	if !bytes.Equal(after, before) {
		t.Fatalf("after the restart on the same /data:\n got %s\nwant %s", after, before)
	}
	c.stop(t, nil)
	if strings.Contains(c.stderr.String(), "level=ERROR") {
		t.Errorf("the lab logged an error:\n%s", c.stderr.String())
	}
	t.Logf("image %s: %.1f MB (%d bytes); build %v; ready in %v (first start), %v (restart); stopped on SIGTERM in %v",
		build.tag, float64(img.size)/1e6, img.size, img.buildTime.Round(time.Second),
		first.Round(time.Millisecond), again.Round(time.Millisecond), stopped.Round(time.Millisecond))
}

// engine runs buildah on a containers storage of the test's own, under
// the cache directory, and runc with a state directory of its own.
type engine struct {
	repo    string // the repository's root
	cache   string // $XDG_CACHE_HOME/lab-image
	storage []string
	runcDir string
}

func newEngine(t *testing.T) *engine {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "lab-image")
	for _, d := range []string{"storage", "go-build", "npm", "stand-ins"} {
		if err := os.MkdirAll(filepath.Join(cache, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &engine{
		repo:  repo,
		cache: cache,
		// vfs: no overlay mounts, which need more than CI machines allow.
		storage: []string{"--root", filepath.Join(cache, "storage"), "--runroot", "/run/lab-image/storage-" + hashOf(cache), "--storage-driver", "vfs"},
		runcDir: "/run/lab-image/runc",
	}
}

// command runs name with args in the repository's root and returns its
// standard output, trimmed; on failure it stops the test with both
// outputs.
func command(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return strings.TrimSpace(stdout.String())
}

func (e *engine) buildah(t *testing.T, args ...string) string {
	t.Helper()
	return command(t, e.repo, "buildah", append(slices.Clone(e.storage), args...)...)
}

func (e *engine) runc(t *testing.T, args ...string) string {
	t.Helper()
	return command(t, e.repo, "runc", append([]string{"--root", e.runcDir}, args...)...)
}

// installTools installs Debian's buildah, runc and mmdebstrap when one is
// missing.
func (e *engine) installTools(t *testing.T) {
	var missing []string
	for _, tool := range []string{"buildah", "runc", "mmdebstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	t.Logf("installing %s (apt-get)", strings.Join(missing, ", "))
	os.Setenv("DEBIAN_FRONTEND", "noninteractive")
	command(t, "/", "apt-get", "update", "-qq")
	command(t, "/", "apt-get", "install", "-y", "-qq", "buildah", "runc", "mmdebstrap")
}

// standIn is one of the Dockerfile's base images and how to make a local
// stand-in for it.
type standIn struct {
	ref  string // the name buildah stores, the Dockerfile's FROM qualified
	key  string // what the stand-in is made from, hashed
	from debian
	make func(t *testing.T, e *engine, mnt string) (config []string)
}

// debian is a Debian root file system made by mmdebstrap (variant
// minbase) with some packages, kept in the cache as a tarball.
type debian struct {
	suite    string
	packages []string
}

func (d debian) key() string {
	return hashOf(append([]string{d.suite, "minbase"}, d.packages...)...)
}

var (
	// The official Go image is bookworm with git and CA certificates.
	goDebian = debian{"bookworm", []string{"ca-certificates", "git", "tzdata"}}
	// Debian's nodejs: trixie's (Node 20), since rescript 12.2.0 asks
	// for Node 20.11 or later and bookworm's is 18. Not Debian's npm: its
	// few hundred packages took most of a cold run's minutes.
	nodeDebian = debian{"trixie", []string{"ca-certificates", "nodejs"}}
)

// npmTarball is npm as the Node 22 images ship it, from its registry,
// checked against its published integrity; it bundles its dependencies.
var npmTarball = struct{ version, url, integrity string }{
	"10.9.4",
	"https://registry.npmjs.org/npm/-/npm-10.9.4.tgz",
	"sha512-OnUG836FwboQIbqtefDNlyR0gTHzIfwRfE3DuiNewBvnMnWEpB0VEXwBlFVgqpNzIgYo/MHh3d2Hel/pszapAA==",
}

// npm returns the path of npm's tarball in the cache, fetched and
// checked the first time.
func (e *engine) npm(t *testing.T) string {
	path := filepath.Join(e.cache, "stand-ins", "npm-"+npmTarball.version+".tgz")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, npmTarball.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A transport of its own, closed here: no connection outlives the
	// test (goleak).
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("npm for the Node stand-in: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("npm for the Node stand-in: GET %s: %s", npmTarball.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		t.Fatalf("npm for the Node stand-in: %v", err)
	}
	sum := sha512.Sum512(body)
	if got := "sha512-" + base64.StdEncoding.EncodeToString(sum[:]); got != npmTarball.integrity {
		t.Fatalf("npm for the Node stand-in: %s is %s, not the published %s", npmTarball.url, got, npmTarball.integrity)
	}
	if err := os.WriteFile(path+".part", body, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".part", path); err != nil {
		t.Fatal(err)
	}
	return path
}

func hashOf(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:8])
}

// standIns lists the Dockerfile's FROM images with their stand-ins; it
// fails if the Dockerfile's base images are not these.
func (e *engine) standIns(t *testing.T) []standIn {
	dockerfile, err := os.ReadFile(filepath.Join(e.repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var from []string
	for _, m := range regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(string(dockerfile), -1) {
		from = append(from, m[1])
	}
	want := []string{"golang:1.26", "node:22-bookworm-slim", "gcr.io/distroless/static-debian12:nonroot"}
	if !slices.Equal(from, want) {
		t.Fatalf("the Dockerfile's base images are %q; the test has stand-ins for %q", from, want)
	}
	goVersion, err := os.ReadFile("/usr/local/go/VERSION")
	if err != nil {
		t.Fatalf("the Go stand-in is made from /usr/local/go: %v", err)
	}
	goVersionLine, _, _ := strings.Cut(string(goVersion), "\n")
	if !strings.HasPrefix(goVersionLine, "go1.26") {
		t.Fatalf("/usr/local/go is %s, not Go 1.26", goVersionLine)
	}
	// The build's go mod download goes through this machine's module
	// proxy setting.
	goEnv := map[string]string{}
	for _, v := range []string{"GOPROXY", "GOSUMDB", "GONOSUMDB", "GONOPROXY", "GOPRIVATE", "GOFLAGS"} {
		if val := command(t, e.repo, "go", "env", v); val != "" {
			goEnv[v] = val
		}
	}
	goEnvList := []string{
		"PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"GOLANG_VERSION=" + strings.TrimPrefix(goVersionLine, "go"),
		"GOTOOLCHAIN=local",
		"GOPATH=/go",
	}
	for _, k := range slices.Sorted(maps.Keys(goEnv)) {
		goEnvList = append(goEnvList, k+"="+goEnv[k])
	}
	const path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// The machine's own certificate authorities (update-ca-certificates'
	// /usr/local/share/ca-certificates) go into the Go and Node stand-ins,
	// so that go mod download and npm install reach what the machine
	// reaches, through a TLS proxy too.
	localCAs, _ := filepath.Glob("/usr/local/share/ca-certificates/*.crt")
	var caPEM []byte
	for _, f := range localCAs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		caPEM = append(append(caPEM, bytes.TrimSpace(b)...), '\n')
	}
	addCAs := func(t *testing.T, mnt string) {
		if len(caPEM) == 0 {
			return
		}
		bundle, err := os.OpenFile(filepath.Join(mnt, "etc/ssl/certs/ca-certificates.crt"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer bundle.Close()
		if _, err := bundle.Write(caPEM); err != nil {
			t.Fatal(err)
		}
	}
	caKey := hashOf(string(caPEM))
	nodeEnv := []string{"--env", path}
	if len(caPEM) > 0 {
		// Node reads its own list unless told.
		nodeEnv = append(nodeEnv, "--env", "NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt")
	}
	return []standIn{{
		ref:  "docker.io/library/golang:1.26",
		key:  hashOf(append([]string{goDebian.key(), caKey, goVersionLine}, goEnvList...)...),
		from: goDebian,
		make: func(t *testing.T, e *engine, mnt string) []string {
			command(t, "/", "tar", "-xpf", e.tarball(goDebian), "--numeric-owner", "-C", mnt)
			addCAs(t, mnt)
			command(t, "/", "cp", "-a", "/usr/local/go", filepath.Join(mnt, "usr/local/go"))
			for _, d := range []string{"go/bin", "go/src"} {
				command(t, "/", "mkdir", "-p", filepath.Join(mnt, d))
			}
			command(t, "/", "chmod", "-R", "1777", filepath.Join(mnt, "go"))
			config := []string{"--workingdir", "/go", "--cmd", "bash"}
			for _, kv := range goEnvList {
				config = append(config, "--env", kv)
			}
			return config
		},
	}, {
		ref:  "docker.io/library/node:22-bookworm-slim",
		key:  hashOf(nodeDebian.key(), caKey, "node", npmTarball.integrity),
		from: nodeDebian,
		make: func(t *testing.T, e *engine, mnt string) []string {
			command(t, "/", "tar", "-xpf", e.tarball(nodeDebian), "--numeric-owner", "-C", mnt)
			addCAs(t, mnt)
			// Where the Node images have it: /usr/local/lib/node_modules.
			npmDir := filepath.Join(mnt, "usr/local/lib/node_modules/npm")
			command(t, "/", "mkdir", "-p", npmDir, filepath.Join(mnt, "usr/local/bin"))
			command(t, "/", "tar", "-xzf", e.npm(t), "--no-same-owner", "--strip-components=1", "-C", npmDir)
			for _, bin := range []string{"npm", "npx"} {
				if err := os.Symlink("../lib/node_modules/npm/bin/"+bin+"-cli.js", filepath.Join(mnt, "usr/local/bin", bin)); err != nil {
					t.Fatal(err)
				}
			}
			return append(nodeEnv, "--cmd", "node")
		},
	}, {
		ref:  "gcr.io/distroless/static-debian12:nonroot",
		key:  hashOf(goDebian.key(), "distroless static nonroot"),
		from: goDebian,
		make: func(t *testing.T, e *engine, mnt string) []string {
			command(t, "/", "tar", "-xpf", e.tarball(goDebian), "--numeric-owner", "-C", mnt,
				"./etc/ssl/certs/ca-certificates.crt", "./usr/share/zoneinfo")
			files := map[string]string{
				"etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\n" +
					"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
					"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
				"etc/group":         "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n",
				"etc/nsswitch.conf": "hosts: files dns\n",
			}
			for name, text := range files {
				if err := os.WriteFile(filepath.Join(mnt, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range []struct {
				path string
				mode os.FileMode
				uid  int
			}{{"tmp", 0o1777, 0}, {"root", 0o700, 0}, {"home/nonroot", 0o700, 65532}} {
				p := filepath.Join(mnt, d.path)
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, d.mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(p, d.uid, d.uid); err != nil {
					t.Fatal(err)
				}
			}
			return []string{"--env", path, "--env", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
				"--user", "65532", "--workingdir", "/home/nonroot"}
		},
	}}
}

func (e *engine) tarball(d debian) string {
	return filepath.Join(e.cache, "stand-ins", d.suite+"-"+d.key()+".tar")
}

// makeDebian makes the tarballs of ds that the cache lacks, all at once:
// mmdebstrap mostly waits for downloads and dpkg.
func (e *engine) makeDebian(t *testing.T, ds ...debian) {
	type made struct {
		d   debian
		err error
		out []byte
	}
	done := make(chan made)
	began, n := time.Now(), 0
	for _, d := range ds {
		if _, err := os.Stat(e.tarball(d)); err == nil || slices.ContainsFunc(ds[:n], func(o debian) bool { return o.key() == d.key() }) {
			continue
		}
		ds[n] = d
		n++
		go func() {
			part := e.tarball(d) + ".part"
			cmd := exec.Command("mmdebstrap", "--quiet", "--variant=minbase", "--format=tar",
				"--include="+strings.Join(d.packages, ","),
				// dpkg without fsync: minutes faster, the same result.
				"--hook-dir=/usr/share/mmdebstrap/hooks/eatmydata",
				"--dpkgopt=path-exclude=/usr/share/man/*",
				"--dpkgopt=path-exclude=/usr/share/locale/*",
				"--dpkgopt=path-exclude=/usr/share/doc/*",
				"--dpkgopt=path-include=/usr/share/doc/*/copyright",
				d.suite, part)
			out, err := cmd.CombinedOutput()
			if err == nil {
				err = os.Rename(part, e.tarball(d))
			}
			done <- made{d, err, out}
		}()
	}
	for range n {
		m := <-done
		if m.err != nil {
			t.Errorf("mmdebstrap %s: %v\n%s", m.d.suite, m.err, m.out)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if n > 0 {
		t.Logf("made %d Debian root file systems for the stand-ins in %v", n, time.Since(began).Round(time.Second))
	}
}

// imageID is the ID of the image stored under ref, "" if there is none.
func (e *engine) imageID(ref string) string {
	cmd := exec.Command("buildah", append(slices.Clone(e.storage), "inspect", "--type", "image", "--format", "{{.FromImageID}}", ref)...)
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// marker is the cache's note of which stored image is the stand-in of
// which key.
func (e *engine) marker(s standIn) string {
	return filepath.Join(e.cache, "stand-ins", strings.NewReplacer("/", "_", ":", "_").Replace(s.ref)+".id")
}

// needsStandIn says whether s.ref must be made: not if an image is
// already stored under it (pulled before, or the stand-in of the same
// key), or if the real one can be pulled now.
func (e *engine) needsStandIn(t *testing.T, s standIn) bool {
	made, _ := os.ReadFile(e.marker(s))
	madeID, madeKey, _ := strings.Cut(strings.TrimSpace(string(made)), " ")
	id := e.imageID(s.ref)
	switch {
	case id != "" && id == madeID && madeKey == s.key:
		t.Logf("%s: the cached stand-in (%s)", s.ref, s.key)
		return false
	case id != "" && id != madeID:
		t.Logf("%s: the image in the storage", s.ref)
		return false
	case id != "":
		t.Logf("%s: the stand-in is stale; making it again", s.ref)
		e.buildah(t, "rmi", "--force", s.ref)
		return true
	}
	pull := exec.Command("buildah", append(slices.Clone(e.storage), "pull", "--quiet", s.ref)...)
	out, err := pull.CombinedOutput()
	if err == nil {
		t.Logf("%s: pulled", s.ref)
		return false
	}
	t.Logf("%s cannot be pulled (%s); making a stand-in", s.ref, firstLine(out))
	return true
}

// makeStandIn makes s.ref from its Debian tarball (makeDebian first).
func (e *engine) makeStandIn(t *testing.T, s standIn) {
	began := time.Now()
	ctr := e.buildah(t, "from", "--name", "lab-stand-in-"+randomHex(4), "scratch")
	defer exec.Command("buildah", append(slices.Clone(e.storage), "rm", ctr)...).Run()
	mnt := e.buildah(t, "mount", ctr)
	config := s.make(t, e, mnt)
	e.buildah(t, "umount", ctr)
	e.buildah(t, append(append([]string{"config"}, config...), ctr)...)
	e.buildah(t, "commit", "--quiet", "--format", "docker", ctr, s.ref)
	if err := os.WriteFile(e.marker(s), []byte(e.imageID(s.ref)+" "+s.key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: made a stand-in in %v", s.ref, time.Since(began).Round(time.Second))
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// readmeDockerLines returns the README's "docker build" and "docker run"
// lines, from its Container section.
func readmeDockerLines(t *testing.T, readme string) (build, run string) {
	_, section, ok := strings.Cut(readme, "\n## Container\n")
	if !ok {
		t.Fatal("the README has no Container section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, line := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(line, "docker build ") && build == "":
			build = line
		case strings.HasPrefix(line, "docker run ") && run == "":
			run = line
		}
	}
	if build == "" || run == "" {
		t.Fatal("the README's Container section has no `docker build` or no `docker run` line")
	}
	return build, run
}

// dockerBuild is the README's docker build line.
type dockerBuild struct {
	tag       string
	buildArgs []string // K=V, with $(…) already run
	context   string
}

// parseDockerBuild reads the README's docker build line. $(…) is run by
// sh in the repository's root, as the reader's shell would; an option the
// test cannot translate for buildah fails the test.
func parseDockerBuild(t *testing.T, line string) dockerBuild {
	line = regexp.MustCompile(`\$\(([^)]*)\)`).ReplaceAllStringFunc(line, func(sub string) string {
		return command(t, "../..", "sh", "-c", sub[2:len(sub)-1])
	})
	f := strings.Fields(line)[2:]
	var b dockerBuild
	for i := 0; i < len(f); i++ {
		switch {
		case (f[i] == "-t" || f[i] == "--tag") && i+1 < len(f):
			i++
			b.tag = f[i]
		case f[i] == "--build-arg" && i+1 < len(f):
			i++
			b.buildArgs = append(b.buildArgs, f[i])
		case !strings.HasPrefix(f[i], "-") && i == len(f)-1:
			b.context = f[i]
		default:
			t.Fatalf("the README's %q has %q, which the image test does not translate for buildah", line, f[i])
		}
	}
	if b.tag == "" || b.context == "" {
		t.Fatalf("the README's %q has no -t or no context", line)
	}
	return b
}

// dockerRun is the README's docker run line.
type dockerRun struct {
	readOnly bool
	ports    []string // HOST:CONTAINER
	volumes  []string // SOURCE:DESTINATION
	env      []string // K=V
	image    string
}

func parseDockerRun(t *testing.T, line string) dockerRun {
	f := strings.Fields(line)[2:]
	var r dockerRun
	for i := 0; i < len(f); i++ {
		switch {
		case f[i] == "--read-only":
			r.readOnly = true
		case f[i] == "-p" && i+1 < len(f):
			i++
			r.ports = append(r.ports, f[i])
		case f[i] == "-v" && i+1 < len(f):
			i++
			r.volumes = append(r.volumes, f[i])
		case f[i] == "-e" && i+1 < len(f):
			i++
			r.env = append(r.env, f[i])
		case !strings.HasPrefix(f[i], "-") && i == len(f)-1:
			r.image = f[i]
		default:
			t.Fatalf("the README's %q has %q, which the image test does not translate for runc", line, f[i])
		}
	}
	if r.image == "" {
		t.Fatalf("the README's %q names no image", line)
	}
	return r
}

// builtImage is the image built, as buildah inspect shows its config.
type builtImage struct {
	ref       string
	size      int64
	buildTime time.Duration
	config    struct {
		User         string
		Env          []string
		Entrypoint   []string
		Cmd          []string
		WorkingDir   string
		ExposedPorts map[string]struct{}
		Volumes      map[string]struct{}
		Healthcheck  *struct {
			Test []string
		}
	}
}

// build runs the README's docker build line with buildah. The module
// cache, Go's build cache and npm's cache are bind-mounted into the
// build's RUN steps (what BuildKit's cache mounts would be): the image
// is the same, made faster and without downloading modules again.
func (e *engine) build(t *testing.T, b dockerBuild) *builtImage {
	modcache := command(t, e.repo, "go", "env", "GOMODCACHE")
	if err := os.MkdirAll(modcache, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"bud", "--format", "docker", "--isolation", "chroot", "--network", "host",
		"--pull=never", "--layers=false",
		"--volume", modcache + ":/go/pkg/mod",
		"--volume", filepath.Join(e.cache, "go-build") + ":/root/.cache/go-build",
		"--volume", filepath.Join(e.cache, "npm") + ":/root/.npm",
		"--tag", b.tag}
	for _, a := range b.buildArgs {
		args = append(args, "--build-arg", a)
	}
	began := time.Now()
	e.buildah(t, append(args, b.context)...)
	img := &builtImage{ref: b.tag, buildTime: time.Since(began)}
	t.Logf("built %s in %v", b.tag, img.buildTime.Round(time.Second))
	t.Cleanup(func() {
		exec.Command("buildah", append(slices.Clone(e.storage), "rmi", "--force", b.tag)...).Run()
	})

	var inspect struct {
		Docker struct {
			Config json.RawMessage `json:"config"`
		}
	}
	if err := json.Unmarshal([]byte(e.buildah(t, "inspect", "--type", "image", b.tag)), &inspect); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(inspect.Docker.Config, &img.config); err != nil {
		t.Fatal(err)
	}
	var images []struct {
		Size string `json:"size"`
	}
	out := e.buildah(t, "images", "--json", b.tag)
	if err := json.Unmarshal([]byte(out), &images); err != nil || len(images) != 1 {
		t.Fatalf("buildah images --json: %v\n%s", err, out)
	}
	img.size = parseSize(t, images[0].Size)
	return img
}

// parseSize reads the size buildah images prints: a byte count or "33.5 MB".
func parseSize(t *testing.T, s string) int64 {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	num, unit, _ := strings.Cut(s, " ")
	f, err := strconv.ParseFloat(num, 64)
	mult := map[string]float64{"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
	if err != nil || mult == 0 {
		t.Fatalf("image size %q", s)
	}
	return int64(f * mult)
}

// imageChecks: what the Dockerfile promises of the image's config.
func (e *engine) imageChecks(t *testing.T, img *builtImage, b dockerBuild) {
	c := img.config
	if c.User == "" || c.User == "root" || c.User == "0" || strings.HasPrefix(c.User, "0:") {
		t.Errorf("the image runs as %q, not a non-root user", c.User)
	}
	if c.Healthcheck == nil || !slices.Equal(c.Healthcheck.Test, []string{"CMD", "/lab", "healthcheck"}) {
		t.Errorf("the image's health check is %+v, want CMD /lab healthcheck (was it built in OCI format, which drops it?)", c.Healthcheck)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("the image exposes %v, not 8080/tcp", c.ExposedPorts)
	}
	if _, ok := c.Volumes["/data"]; !ok {
		t.Errorf("the image's volumes are %v, not /data", c.Volumes)
	}
	if !slices.Equal(c.Entrypoint, []string{"/lab"}) {
		t.Errorf("the image's entrypoint is %q", c.Entrypoint)
	}
}

// container is the image's root file system (a buildah container,
// mounted) with a runc bundle whose spec is the README's docker run line.
type container struct {
	e        *engine
	id       string
	bundle   string
	data     string // the host directory mounted at /data
	base     string // http://127.0.0.1:port
	cmd      *exec.Cmd
	exited   chan error
	stdout   syncBuffer
	stderr   syncBuffer
	rootfs   string
	client   *http.Client
	initPID  int
	readOnly bool
}

func (e *engine) newContainer(t *testing.T, img *builtImage, r dockerRun) *container {
	name := "lab-image-test-" + randomHex(4)
	ctr := e.buildah(t, "from", "--pull=never", "--name", name, img.ref)
	t.Cleanup(func() {
		exec.Command("buildah", append(slices.Clone(e.storage), "umount", ctr)...).Run()
		exec.Command("buildah", append(slices.Clone(e.storage), "rm", ctr)...).Run()
	})
	c := &container{
		e: e, id: name, bundle: t.TempDir(), rootfs: e.buildah(t, "mount", ctr),
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second},
	}

	// The entrypoint must be the static binary the Dockerfile built.
	f, err := elf.Open(filepath.Join(c.rootfs, "lab"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/lab in the image asks for a dynamic loader: it is not statically linked")
		}
	}
	f.Close()

	command(t, c.bundle, "runc", "spec", "--bundle", c.bundle)
	raw, err := os.ReadFile(filepath.Join(c.bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	process := spec["process"].(map[string]any)
	linux := spec["linux"].(map[string]any)

	uid, gid := lookupUser(t, c.rootfs, img.config.User)
	env := slices.Clone(img.config.Env)
	env = append(env, r.env...)
	// No network namespace: the container shares the host's, so a
	// published port (-p HOST:CONTAINER) becomes the listen address, on
	// loopback and on a free port.
	for _, p := range r.ports {
		if _, cport, ok := strings.Cut(p, ":"); !ok || !slices.Contains(env, "LAB_ADDR=:"+cport) {
			t.Fatalf("the README publishes %q; the image listens on %v", p, env)
		}
	}
	port := freePort(t)
	env = append(env, "LAB_ADDR=127.0.0.1:"+port)
	c.base = "http://127.0.0.1:" + port
	process["terminal"] = false
	process["args"] = append(slices.Clone(img.config.Entrypoint), img.config.Cmd...)
	process["env"] = env
	process["cwd"] = cmp.Or(img.config.WorkingDir, "/")
	process["user"] = map[string]any{"uid": uid, "gid": gid}
	// As Docker does for a non-root user: the default capabilities bound
	// what the process could gain, and it has none.
	caps := process["capabilities"].(map[string]any)
	for _, set := range []string{"effective", "permitted", "inheritable", "ambient"} {
		caps[set] = []string{}
	}
	// No rlimits: the machine refuses to raise them.
	delete(process, "rlimits")
	c.readOnly = r.readOnly
	spec["root"] = map[string]any{"path": c.rootfs, "readonly": r.readOnly}
	spec["hostname"] = name

	mounts := spec["mounts"].([]any)
	for _, v := range r.volumes {
		src, dst, _ := strings.Cut(v, ":")
		if dst != "/data" || strings.Contains(src, "/") {
			t.Fatalf("the README mounts %q; the test translates a named volume at /data", v)
		}
		// A new named volume starts as a copy of the image's /data,
		// owner and all.
		if _, err := os.Stat(filepath.Join(c.rootfs, "data")); err != nil {
			t.Fatalf("the image has no /data: %v", err)
		}
		c.data = filepath.Join(t.TempDir(), src)
		command(t, "/", "cp", "-a", filepath.Join(c.rootfs, "data"), c.data)
		mounts = append(mounts, map[string]any{
			"destination": dst, "type": "bind", "source": c.data,
			"options": []string{"rbind", "rw"},
		})
	}
	if c.data == "" {
		t.Fatal("the README's docker run line mounts no volume at /data")
	}
	spec["mounts"] = mounts
	var namespaces []any
	for _, ns := range linux["namespaces"].([]any) {
		if ns.(map[string]any)["type"] != "network" {
			namespaces = append(namespaces, ns)
		}
	}
	linux["namespaces"] = namespaces

	raw, err = json.MarshalIndent(spec, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.bundle, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("runc", "--root", e.runcDir, "kill", c.id, "KILL").Run()
		if c.cmd != nil {
			<-c.exited
		}
		exec.Command("runc", "--root", e.runcDir, "delete", "--force", c.id).Run()
	})
	return c
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// lookupUser resolves the image's USER (name or number, with an optional
// group) in the image's own /etc/passwd and /etc/group.
func lookupUser(t *testing.T, rootfs, user string) (uid, gid int) {
	u, g, hasGroup := strings.Cut(user, ":")
	find := func(file, name string) (fields []string) {
		f, err := os.Open(filepath.Join(rootfs, file))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields = strings.Split(sc.Text(), ":")
			if len(fields) >= 3 && (fields[0] == name || fields[2] == name) {
				return fields
			}
		}
		t.Fatalf("%s has no %q", file, name)
		return nil
	}
	pw := find("etc/passwd", u)
	uid, _ = strconv.Atoi(pw[2])
	gid, _ = strconv.Atoi(pw[3])
	if hasGroup {
		gid, _ = strconv.Atoi(find("etc/group", g)[2])
	}
	return uid, gid
}

// start runs the container (runc run, in the foreground) and returns the
// time from starting runc to /readyz answering 200.
func (c *container) start(t *testing.T) time.Duration {
	t.Helper()
	c.cmd = exec.Command("runc", "--root", c.e.runcDir, "run", "--bundle", c.bundle, c.id)
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	began := time.Now()
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.exited = make(chan error, 1)
	go func() { c.exited <- c.cmd.Wait() }()
	for {
		if resp, err := c.client.Get(c.base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-c.exited:
			c.cmd = nil
			t.Fatalf("the container exited before it was ready: %v\n%s%s", err, c.stdout.String(), c.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Since(began) > 30*time.Second {
			t.Fatalf("/readyz not 200 after 30 s:\n%s%s", c.stdout.String(), c.stderr.String())
		}
	}
	ready := time.Since(began)
	var state struct{ Pid int }
	if err := json.Unmarshal([]byte(c.e.runc(t, "state", c.id)), &state); err != nil || state.Pid == 0 {
		t.Fatalf("runc state: %v", err)
	}
	c.initPID = state.Pid
	return ready
}

// stop sends SIGTERM (runc kill) and waits at most 10 s for the container
// to exit 0; ws, if not nil, must be closed with 1012 (service restart).
func (c *container) stop(t *testing.T, ws *websocket.Conn) time.Duration {
	t.Helper()
	began := time.Now()
	c.e.runc(t, "kill", c.id, "TERM")
	if ws != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, _, err := ws.Read(ctx); websocket.CloseStatus(err) != websocket.StatusServiceRestart {
			t.Errorf("after SIGTERM: %v, want close 1012", err)
		}
	}
	select {
	case err := <-c.exited:
		c.cmd = nil
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, c.stderr.String())
		}
	case <-time.After(10*time.Second - time.Since(began)):
		t.Fatalf("still running 10 s after SIGTERM:\n%s", c.stderr.String())
	}
	return time.Since(began)
}

func (c *container) socket(t *testing.T, id string) (*websocket.Conn, []byte) {
	t.Helper()
	return (&labProcess{base: c.base}).socket(t, id)
}

// processChecks: the container's process runs as the image's user with no
// capabilities.
func (c *container) processChecks(t *testing.T) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.initPID))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	if fields["Uid"] != "65532 65532 65532 65532" || fields["Gid"] != "65532 65532 65532 65532" {
		t.Errorf("the container's process runs as Uid %q Gid %q, want 65532", fields["Uid"], fields["Gid"])
	}
	if fields["CapEff"] != "0000000000000000" {
		t.Errorf("the container's process has capabilities %s", fields["CapEff"])
	}
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", c.initPID)); err != nil || exe != "/lab" {
		t.Errorf("the container's process is %q (%v), not /lab", exe, err)
	}
}

// writeChecks: the root file system is mounted read-only and /data is the
// only writable place, besides the kernel's /proc and /dev (as under
// docker run --read-only). The mounts are read from the container's
// /proc/<pid>/mountinfo, and writes are tried through /proc/<pid>/root,
// which resolves paths in the container's own mounts. runc 1.1 on a
// cgroup v1 host leaves the tmpfs holding the cgroup hierarchies at
// /sys/fs/cgroup read-write though its spec says ro; it must at least
// belong to root and be closed to others, so that the lab's user cannot
// write there.
func (c *container) writeChecks(t *testing.T) {
	if !c.readOnly {
		t.Fatal("the README's docker run line has no --read-only")
	}
	info, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", c.initPID))
	if err != nil {
		t.Fatal(err)
	}
	var writable []string
	for _, line := range strings.Split(strings.TrimSpace(string(info)), "\n") {
		f := strings.Fields(line)
		point, opts := f[4], strings.Split(f[5], ",")
		if !slices.Contains(opts, "rw") {
			continue
		}
		if point == "/" {
			t.Errorf("the root file system is mounted read-write: %s", line)
		}
		if point == "/sys/fs/cgroup" {
			var st syscall.Stat_t
			err := syscall.Stat(fmt.Sprintf("/proc/%d/root%s", c.initPID, point), &st)
			if err != nil || st.Uid != 0 || st.Mode&0o002 != 0 {
				t.Errorf("%s is mounted read-write and open to the lab's user (uid %d, mode %o, %v)", point, st.Uid, st.Mode, err)
			}
			continue
		}
		if point != "/data" && point != "/proc" && point != "/dev" && !strings.HasPrefix(point, "/dev/") && !strings.HasPrefix(point, "/proc/") {
			writable = append(writable, line)
		}
	}
	if len(writable) > 0 {
		t.Errorf("writable mounts besides /data:\n%s", strings.Join(writable, "\n"))
	}
	root := fmt.Sprintf("/proc/%d/root", c.initPID)
	for _, dir := range []string{"/", "/etc", "/tmp", "/home/nonroot", "/rescript"} {
		p := filepath.Join(root, dir, "lab-image-test-probe")
		err := os.WriteFile(p, nil, 0o600)
		if err == nil {
			os.Remove(p)
			t.Errorf("%s is writable in the container", dir)
		} else if !errors.Is(err, syscall.EROFS) {
			t.Errorf("writing in %s: %v, want a read-only file system", dir, err)
		}
	}
	p := filepath.Join(root, "data", "lab-image-test-probe")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Errorf("/data is not writable: %v", err)
	}
	os.Remove(p)
	for _, name := range []string{"lab.db", "tmp"} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(c.data, name), &st); err != nil || st.Uid != 65532 {
			t.Errorf("/data/%s on the volume: uid %d, %v; want one made by the lab as 65532", name, st.Uid, err)
		}
	}
}

// execChecks runs the image's HEALTHCHECK in the container (runc exec
// takes the container's user and environment) and /lab -version, which
// must print the version the README's build line passed.
func (c *container) execChecks(t *testing.T, img *builtImage, b dockerBuild) {
	if hc := img.config.Healthcheck; hc != nil && len(hc.Test) > 1 && hc.Test[0] == "CMD" {
		began := time.Now()
		c.e.runc(t, append([]string{"exec", c.id}, hc.Test[1:]...)...)
		t.Logf("health check (%s) passed in %v", strings.Join(hc.Test[1:], " "), time.Since(began).Round(time.Millisecond))
	}
	want := "dev"
	for _, a := range b.buildArgs {
		if v, ok := strings.CutPrefix(a, "VERSION="); ok {
			want = v
		}
	}
	if got := c.e.runc(t, "exec", c.id, "/lab", "-version"); got != "lab "+want {
		t.Errorf("/lab -version in the container: %q, want %q", got, "lab "+want)
	}
}

// rescriptCheck submits the lesson's ToolCall.res over the WebSocket and
// waits for the check to pass: the compiler in the image compiled it
// under the read-only root. It skips only while the lab has no ReScript
// server side (GET /code.json answers 404).
func (c *container) rescriptCheck(t *testing.T) {
	source, err := os.ReadFile("testdata/ToolCall.res")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.client.Get(c.base + "/code.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	codeJSON := resp.StatusCode

	ws, _ := c.socket(t, uuid.NewString())
	defer ws.Close(websocket.StatusNormalClosure, "")
	frame, _ := json.Marshal(map[string]string{"type": "submitCode", "language": "rescript", "source": string(source)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	if err := ws.Write(ctx, websocket.MessageText, frame); err != nil {
		t.Fatal(err)
	}
	var outcome string
	for outcome == "" {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for the check: %v", err)
		}
		var f struct {
			Type string
			Code *struct{ Status string }
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		switch {
		case f.Type == "error":
			outcome = string(data)
		case f.Type == "state" && f.Code != nil && f.Code.Status == "passed":
			t.Logf("the lesson's ToolCall.res compiled and passed in the container in %v", time.Since(began).Round(time.Millisecond))
			return
		case f.Type == "state" && f.Code != nil && f.Code.Status != "checking":
			outcome = string(data)
		}
	}
	if codeJSON == http.StatusNotFound {
		t.Skipf("the lab has no ReScript server side yet (GET /code.json answers 404); the submission got %s", outcome)
	}
	t.Fatalf("ToolCall.res did not pass in the container (GET /code.json %d): %s\nlab log:\n%s", codeJSON, outcome, c.stderr.String())
}

// liveCheck asks the lab in the image, as a page does while a student
// types (issue 52), for the type of accept in the lesson's ToolCall.res:
// rescript-editor-analysis.exe is in the image beside bsc.exe, and runs
// under the read-only root.
func (c *container) liveCheck(t *testing.T) {
	source, err := os.ReadFile("testdata/ToolCall.res")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(source), "let accept")
	if i < 0 {
		t.Fatal("no accept in testdata/ToolCall.res")
	}
	line := strings.Count(string(source[:i]), "\n") + 1
	ws, _ := c.socket(t, uuid.NewString())
	defer ws.Close(websocket.StatusNormalClosure, "")
	frame, _ := json.Marshal(map[string]any{"type": "typeAt", "id": 1, "language": "rescript", "source": string(source), "line": line, "column": 5})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, frame); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for the type: %v\nlab log:\n%s", err, c.stderr.String())
		}
		var f struct {
			Type string
			Text *string
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		switch {
		case f.Type == "typeAt" && f.Text != nil && *f.Text == "(call, reply) => update":
			return
		case f.Type == "typeAt" || f.Type == "error":
			t.Fatalf("accept's type in the container: %s\nlab log:\n%s", data, c.stderr.String())
		}
	}
}
