package model

import (
	"strconv"
	"strings"
	"unicode"
)

// ShiViz (https://bestchai.bitbucket.io/shiviz/) draws a log of events with
// vector clocks as a space-time diagram. ShiVizLog writes a diagram in the
// form its default parser regex reads,
//
//	(?<event>.*)\n(?<host>\S*) (?<clock>{.*})
//
// two lines per event: what happened, then the host and its vector clock
// as a JSON object (host → count). The hosts are "client" and the runs
// ("run-1", …). The clocks follow the diagram's happened-before: the client
// starting a run is a message to that run; a run's messages carry its clock
// when queued; a delivery merges the message's clock into the client's. So
// a reply that left run-1 and arrives after run-2 began is concurrent with
// that start, as it is in the picture. Each event adds exactly one to its
// own host's count.

// ShiVizLog writes d as a ShiViz log, events in time order.
func ShiVizLog(d Diagram) []byte {
	w := shivizWriter{names: make([]string, len(d.Lanes)), own: make([][]int, len(d.Lanes))}
	for i, l := range d.Lanes {
		w.names[i] = l.Name
	}
	sentWith := make([][]int, len(d.Messages)) // by message id-1: the clock it left with
	// Three lists in Seq order, merged: a seq holds at most one start, one
	// send and one arrival, in that order (an injection delivered at once
	// is sent and arrives on one seq).
	lanes, msgs, arrs := d.Lanes[1:], d.Messages, d.Arrivals
	for len(lanes)+len(msgs)+len(arrs) > 0 {
		next := ^uint64(0)
		if len(lanes) > 0 {
			next = min(next, lanes[0].Start)
		}
		if len(msgs) > 0 {
			next = min(next, msgs[0].Seq)
		}
		if len(arrs) > 0 {
			next = min(next, arrs[0].Seq)
		}
		switch {
		case len(lanes) > 0 && lanes[0].Start == next:
			l, lane := lanes[0], len(d.Lanes)-len(lanes)
			lanes = lanes[1:]
			start := w.event(ClientLane, nil, "start "+l.Name+" (by "+l.By.String()+")")
			w.event(lane, start, l.Name+" started")
		case len(msgs) > 0 && msgs[0].Seq == next:
			m := msgs[0]
			msgs = msgs[1:]
			sentWith[m.ID-1] = w.event(m.Lane, nil, "send message "+m.Number+" ("+m.Kind.String()+", queued by "+m.From.String()+"): "+oneLine(m.Label))
		default:
			a := arrs[0]
			arrs = arrs[1:]
			m := d.Messages[a.Message-1]
			w.event(ClientLane, sentWith[a.Message-1], "deliver message "+m.Number+" in "+a.Run+" (by "+a.By.String()+"): "+a.Outcome.String()+"; "+a.Notice)
		}
	}
	return []byte(w.b.String())
}

type shivizWriter struct {
	b     strings.Builder
	names []string // by lane: the hosts
	own   [][]int  // by lane: each host's last vector clock, nil before its first event
}

// event writes one event of host lane that received a message sent with
// clock got (nil for none): its clock is its last one merged with got,
// its own count plus one. It returns a copy of that clock.
func (w *shivizWriter) event(lane int, got []int, text string) []int {
	v := w.own[lane]
	if v == nil {
		v = make([]int, len(w.names))
		w.own[lane] = v
	}
	for i, n := range got {
		v[i] = max(v[i], n)
	}
	v[lane]++
	w.b.WriteString(text)
	w.b.WriteString("\n")
	w.b.WriteString(w.names[lane])
	w.b.WriteString(" {")
	first := true
	for i, n := range v {
		if n == 0 {
			continue
		}
		if !first {
			w.b.WriteString(", ")
		}
		first = false
		w.b.WriteString(strconv.Quote(w.names[i]))
		w.b.WriteString(": ")
		w.b.WriteString(strconv.Itoa(n))
	}
	w.b.WriteString("}\n")
	return append([]int(nil), v...)
}

// oneLine keeps text on the event's one line: line breaks and other control
// characters are written as escapes, so that a student's reply can never
// start a line the parser would read as a host and clock.
func oneLine(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case unicode.IsControl(r):
			q := strconv.QuoteRuneToASCII(r) // '\x01': the escape between the quotes
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
