package model

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/toolcall-lab/lab/model/jsjson"
)

// Trace is a case of the code check: a list of the student protocol's own
// client frames, as Commands (the server's decodeFrame makes them from an
// instructor's frames). Only StartRun, QueueReply (Raw), QueueDeadline and
// Deliver (Message) occur; a delivery names a held message by the number
// the lab gives it, 1 for the first queued.
type Trace []Command

// The frames of a trace.
func startFrame() Command           { return Command{Kind: StartRun} }
func replyFrame(raw string) Command { return Command{Kind: QueueReply, Raw: raw} }
func deadlineFrame() Command        { return Command{Kind: QueueDeadline} }
func deliverFrame(n int) Command    { return Command{Kind: Deliver, Message: n} }

// MaxCaseFrames bounds the frames of an instructor's case.
const MaxCaseFrames = 200

// MarshalJSON writes the trace as its client frames:
// {"type":"start"}, {"type":"queueReply","raw":…}, {"type":"queueDeadline"},
// {"type":"deliver","message":n}.
func (t Trace) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 32*len(t)+2)
	b = append(b, '[')
	for i, f := range t {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendFrame(b, f); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

func appendFrame(b []byte, f Command) ([]byte, error) {
	switch f.Kind {
	case StartRun:
		return append(b, `{"type":"start"}`...), nil
	case QueueReply:
		b = append(b, `{"type":"queueReply","raw":`...)
		return append(jsjson.AppendString(b, f.Raw), '}'), nil
	case QueueDeadline:
		return append(b, `{"type":"queueDeadline"}`...), nil
	case Deliver:
		b = append(b, `{"type":"deliver","message":`...)
		return append(strconv.AppendInt(b, int64(f.Message), 10), '}'), nil
	}
	return nil, fmt.Errorf("a trace has no frame of command kind %d", f.Kind)
}

// frameText is one frame as JSON, for sentences.
func frameText(f Command) string {
	b, err := appendFrame(nil, f)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// ValidateTrace says whether t is a case the check can play: at most
// MaxCaseFrames frames, each one of the four kinds, every reply within the
// lab's default limits, and every delivery naming a message queued before
// it. The error names the frame (from 1).
func ValidateTrace(t Trace) error {
	if len(t) == 0 {
		return fmt.Errorf("a case needs at least one frame")
	}
	if len(t) > MaxCaseFrames {
		return fmt.Errorf("a case has at most %d frames, not %d", MaxCaseFrames, len(t))
	}
	l := NewLab()
	for i, f := range t {
		if f.Kind > Deliver {
			return fmt.Errorf("frame %d: a case has only start, queueReply, queueDeadline and deliver frames", i+1)
		}
		f = Command{Kind: f.Kind, Raw: f.Raw, Message: f.Message}
		e, err := l.Decide(f, Limits{})
		if err != nil {
			return fmt.Errorf("frame %d: %w", i+1, err)
		}
		if _, err := l.Apply(e); err != nil {
			return fmt.Errorf("frame %d: %w", i+1, err)
		}
	}
	return nil
}

// without returns t without the frames drop marks, and without every
// delivery of a message it drops; the deliveries it keeps are renumbered,
// so the trace stays valid.
func without(t Trace, drop []bool) Trace {
	out := make(Trace, 0, len(t))
	renum := make([]int, 0, len(t)) // old message number-1 -> new, 0 for dropped
	queued := 0
	for i, f := range t {
		switch f.Kind {
		case QueueReply, QueueDeadline:
			if drop[i] {
				renum = append(renum, 0)
				continue
			}
			queued++
			renum = append(renum, queued)
		case Deliver:
			if drop[i] || f.Message < 1 || f.Message > len(renum) || renum[f.Message-1] == 0 {
				continue
			}
			f.Message = renum[f.Message-1]
		default:
			if drop[i] {
				continue
			}
		}
		out = append(out, f)
	}
	return out
}

// UnmarshalJSON reads the frames MarshalJSON writes (the store keeps an
// instructor's case so). It takes only the four kinds and their fields.
func (t *Trace) UnmarshalJSON(b []byte) error {
	var frames []struct {
		Type    string  `json:"type"`
		Raw     *string `json:"raw"`
		Message *int    `json:"message"`
	}
	if err := json.Unmarshal(b, &frames); err != nil {
		return fmt.Errorf("a trace: %w", err)
	}
	out := make(Trace, 0, len(frames))
	for i, f := range frames {
		switch {
		case f.Type == "start" && f.Raw == nil && f.Message == nil:
			out = append(out, startFrame())
		case f.Type == "queueDeadline" && f.Raw == nil && f.Message == nil:
			out = append(out, deadlineFrame())
		case f.Type == "queueReply" && f.Raw != nil && f.Message == nil:
			out = append(out, replyFrame(*f.Raw))
		case f.Type == "deliver" && f.Raw == nil && f.Message != nil:
			out = append(out, deliverFrame(*f.Message))
		default:
			return fmt.Errorf("a trace: frame %d is not a start, queueReply, queueDeadline or deliver frame", i+1)
		}
	}
	*t = out
	return nil
}

// Words says each frame of t as a teacher clicked it ("queue a deadline",
// "start a new run", "deliver message 1"), for a list of cases.
func (t Trace) Words() []string {
	out := make([]string, len(t))
	for i, f := range t {
		switch f.Kind {
		case StartRun:
			out[i] = "start a new run"
		case QueueReply:
			out[i] = "queue the reply " + f.Raw
		case QueueDeadline:
			out[i] = "queue a deadline"
		case Deliver:
			out[i] = "deliver message " + strconv.Itoa(f.Message)
		default:
			out[i] = frameText(f)
		}
	}
	return out
}
