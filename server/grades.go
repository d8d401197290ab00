package server

import (
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
)

// The grades export (docs/export.md, "Grades"): one row per student, read
// from the event log, so it agrees with the progress board, a restart and
// the JSON lines export. GET /api/grades.csv grades every stored session;
// a class's route grades its own with a filter (serveGrades's keep).

// gradeRow is one student's line of the grades.
type gradeRow struct {
	Name, Class, Session string // Class is the class's title, "" for the open lab
	// StepAt[s-1] is when step s was first done; zero while it is not.
	StepAt      [model.NumSteps]time.Time
	Made, Right int // predictions made, and those the notices bore out
	// progress is the board's columns (current step, stuck), as of when
	// the grades were made.
	progress progress
	// LastActivity is the student's own last change (an injection is
	// not), or the session's creation: the console's "last activity".
	LastActivity time.Time
	// Submissions counts the programs submitted; Code is the code columns
	// (Server.codeColumns), filled by serveGrades.
	Submissions int
	Code        []string
	// Mastery is the student's mastery per kind (model/practice.go).
	Mastery model.Mastery
}

// gradesHeader is the grades CSV's first row.
func gradesHeader() []string {
	h := []string{"name", "class", "session"}
	for s := 1; s <= model.NumSteps; s++ {
		h = append(h, "step "+strconv.Itoa(s))
	}
	h = append(h, "steps done", "current step", "stuck", "predictions made", "predictions right", "last activity")
	for _, k := range model.PracticeKinds() {
		h = append(h, "mastery "+k.String())
	}
	h = append(h, "kinds mastered")
	return append(h, "code_submissions", "code_status", "code_passed", "code_cases", "code_property")
}

// grade replays one stored session: the same fold (model.Lab), the same
// step clock and the same "last activity" (the student's own) as a live
// session, so the row agrees with the board at now.
func grade(info store.Session, recs []store.Record, now time.Time, stuckAfter time.Duration) (gradeRow, error) {
	g := gradeRow{Name: info.Name, Session: info.ID, LastActivity: info.Created}
	lab := model.NewLab()
	clock := stepClock{began: info.Created}
	for _, r := range recs {
		if _, err := lab.Apply(r.Event); err != nil {
			return gradeRow{}, fmt.Errorf("grading session %s: replaying seq %d: %w", info.ID, r.Seq, err)
		}
		clock.steps(lab.Exercise(), r.Seq, r.Time)
		if r.Event.By == model.Student {
			g.LastActivity = r.Time
		}
	}
	v := lab.ViewSince(math.MaxInt, math.MaxInt) // the counts, without copying the lists
	g.StepAt, g.Made, g.Right = clock.at, v.Predicted, v.Right
	g.Submissions = lab.Code().Submissions
	g.Mastery = lab.Mastery()
	g.progress = clock.progress(v)
	g.progress.Stuck = g.progress.stuckAt(now, stuckAfter)
	return g, nil
}

// gradeRows grades the stored sessions that keep accepts (every one when
// keep is nil), in name order (then by session id, so that equal names
// keep one order), each with the class title that classTitle gives.
func gradeRows(ctx context.Context, st store.Store, keep func(store.Session) bool, classTitle func(session string) string, now time.Time, stuckAfter time.Duration) ([]gradeRow, error) {
	infos, err := st.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]gradeRow, 0, len(infos))
	for _, info := range infos {
		if keep != nil && !keep(info) {
			continue
		}
		recs, err := st.Events(ctx, info.ID)
		if err != nil {
			return nil, err
		}
		g, err := grade(info, recs, now, stuckAfter)
		if err != nil {
			return nil, err
		}
		g.Class = classTitle(info.ID)
		rows = append(rows, g)
	}
	slices.SortFunc(rows, func(a, b gradeRow) int {
		return cmp.Or(strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)), strings.Compare(a.Name, b.Name), strings.Compare(a.Session, b.Session))
	})
	return rows, nil
}

// writeGrades writes rows as CSV under gradesHeader, every cell
// formula-safe.
func writeGrades(w io.Writer, rows []gradeRow) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(gradesHeader()); err != nil {
		return fmt.Errorf("writing the grades header: %w", err)
	}
	for _, g := range rows {
		line := []string{g.Name, g.Class, g.Session}
		done := 0
		for _, at := range g.StepAt {
			cell := ""
			if !at.IsZero() {
				cell = at.UTC().Format(store.TimeFormat)
				done++
			}
			line = append(line, cell)
		}
		current, stuck := "all done", "no"
		if g.progress.Current != 0 {
			current = strconv.Itoa(g.progress.Current)
		}
		switch {
		case !g.progress.Started:
			current, stuck = "not started", ""
		case g.progress.Stuck:
			stuck = "yes"
		}
		line = append(line, strconv.Itoa(done), current, stuck, strconv.Itoa(g.Made), strconv.Itoa(g.Right), g.LastActivity.UTC().Format(store.TimeFormat))
		for _, k := range model.PracticeKinds() {
			line = append(line, g.Mastery.State(k))
		}
		line = append(line, strconv.Itoa(g.Mastery.Count()))
		code := g.Code
		if code == nil {
			code = []string{strconv.Itoa(g.Submissions), "", "", "", ""}
		}
		line = append(line, code...)
		for i := range line {
			line[i] = formulaSafe(line[i])
		}
		if err := cw.Write(line); err != nil {
			return fmt.Errorf("writing the grades of session %s: %w", g.Session, err)
		}
	}
	cw.Flush()
	return cw.Error()
}

// formulaSafe keeps a spreadsheet from reading a cell as a formula: a cell
// that begins with = + - @, a tab or a carriage return gets a ' in front.
func formulaSafe(cell string) string {
	if cell == "" {
		return cell
	}
	switch cell[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + cell
	}
	return cell
}

// exportGrades answers GET /api/grades.csv: the grades of every stored session.
func (s *Server) exportGrades(c echo.Context) error {
	classes, err := s.cfg.Store.Classes(c.Request().Context())
	if err != nil {
		return failed(errDataUnreadable, "reading the classes for the grades", err)
	}
	titles := make(map[string]string, len(classes))
	for _, cl := range classes {
		titles[cl.ID] = cl.Title
	}
	return s.serveGrades(c, "lab-grades.csv", nil, func(id string) string { return titles[s.classOfSession(id)] })
}

// classGrades answers GET /api/classes/:id/grades.csv: the grades of the
// class's students, for the server's token or the class's key.
func (s *Server) classGrades(c echo.Context) error {
	cl, err := s.classOfRequest(c)
	if err != nil {
		return err
	}
	in := s.sessionIDsIn(cl.ID)
	return s.serveGrades(c, "lab-grades-"+cl.Code+".csv", func(x store.Session) bool { return in[x.ID] }, func(string) string { return cl.Title })
}

// serveGrades answers a grades CSV of the stored sessions keep accepts,
// as an attachment named filename. The rows are computed before anything is
// written, so a store failure is a clean 503.
func (s *Server) serveGrades(c echo.Context, filename string, keep func(store.Session) bool, classTitle func(string) string) error {
	rows, err := gradeRows(c.Request().Context(), s.cfg.Store, keep, classTitle, s.cfg.Now(), s.cfg.StuckAfter)
	if err != nil {
		return failed(errDataUnreadable, "grading sessions", err)
	}
	for i := range rows {
		rows[i].Code = s.codeColumns(rows[i].Session, rows[i].Submissions)
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="`+filename+`"`)
	h.Set("Cache-Control", "no-store")
	c.Response().WriteHeader(http.StatusOK)
	if err := writeGrades(c.Response(), rows); err != nil {
		s.cfg.Logger.Warn("writing grades", "err", err)
	}
	return nil
}
