package jsclient

import (
	"testing"
	"time"

	"github.com/toolcall-lab/lab/model"
)

func TestProbeDepth(t *testing.T) {
	ip := inProcess(t, read(t, "ToolCall.res.js"))
	sb, _ := load(t, read(t, "ToolCall.res.js"), Budget{Total: 1 << 62})
	for _, d := range []int{4, 5, 6} {
		for name, nc := range map[string]model.NewClient{"inproc": ip, "sandbox": sb} {
			b := model.DefaultSearchBounds()
			b.Depth = d
			b.Calls = 1 << 30
			t0 := time.Now()
			r := model.Search(nc, b)
			t.Logf("%s depth %d: %d states %d steps %d calls %v exhausted %v fail %v", name, d, r.Explored, r.Steps, r.Calls, time.Since(t0), r.Exhausted, r.Failure != nil)
		}
	}
}
