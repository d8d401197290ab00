package server

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
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
	Name, Session string
	// StepAt[s-1] is when step s was first done; zero while it is not.
	StepAt       [model.NumSteps]time.Time
	Made, Right  int // predictions made, and those the notices bore out
	LastActivity time.Time
	// Submissions counts the programs submitted; Code is the code columns
	// (Server.codeColumns), filled by serveGrades.
	Submissions int
	Code        []string
}

// gradesHeader is the grades CSV's first row.
func gradesHeader() []string {
	h := []string{"name", "session"}
	for s := 1; s <= model.NumSteps; s++ {
		h = append(h, "step "+strconv.Itoa(s))
	}
	h = append(h, "steps done", "predictions made", "predictions right", "last activity")
	return append(h, "code_submissions", "code_status", "code_passed", "code_cases", "code_property")
}

// grade replays one stored session: the same fold (model.Lab) and the same
// step clock as a live session, so the row agrees with the board.
func grade(info store.Session, recs []store.Record) (gradeRow, error) {
	g := gradeRow{Name: info.Name, Session: info.ID, LastActivity: info.LastActive}
	lab := model.NewLab()
	var clock stepClock
	for _, r := range recs {
		if _, err := lab.Apply(r.Event); err != nil {
			return gradeRow{}, fmt.Errorf("grading session %s: replaying seq %d: %w", info.ID, r.Seq, err)
		}
		clock.steps(lab.Exercise(), r.Seq, r.Time)
	}
	v := lab.ViewSince(math.MaxInt, math.MaxInt) // the counts, without copying the lists
	g.StepAt, g.Made, g.Right = clock.at, v.Predicted, v.Right
	g.Submissions = lab.Code().Submissions
	return g, nil
}

// gradeRows grades the stored sessions that keep accepts (every one when
// keep is nil), oldest first.
func gradeRows(ctx context.Context, st store.Store, keep func(store.Session) bool) ([]gradeRow, error) {
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
		g, err := grade(info, recs)
		if err != nil {
			return nil, err
		}
		rows = append(rows, g)
	}
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
		line := []string{g.Name, g.Session}
		done := 0
		for _, at := range g.StepAt {
			cell := ""
			if !at.IsZero() {
				cell = at.UTC().Format(store.TimeFormat)
				done++
			}
			line = append(line, cell)
		}
		line = append(line, strconv.Itoa(done), strconv.Itoa(g.Made), strconv.Itoa(g.Right), g.LastActivity.UTC().Format(store.TimeFormat))
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
	return s.serveGrades(c, "lab-grades.csv", nil)
}

// classGrades answers GET /api/classes/:id/grades.csv: the grades of the
// class's students, for the server's token or the class's key.
func (s *Server) classGrades(c echo.Context) error {
	cl, err := s.classOfRequest(c)
	if err != nil {
		return err
	}
	in := s.sessionIDsIn(cl.ID)
	return s.serveGrades(c, "lab-grades-"+cl.Code+".csv", func(x store.Session) bool { return in[x.ID] })
}

// serveGrades answers a grades CSV of the stored sessions keep accepts,
// as an attachment named filename. The rows are computed before anything is
// written, so a store failure is a clean 503.
func (s *Server) serveGrades(c echo.Context, filename string, keep func(store.Session) bool) error {
	rows, err := gradeRows(c.Request().Context(), s.cfg.Store, keep)
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
