package model

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// histories are known sessions the preset tests start from.
var histories = map[string][]Command{
	"fresh": nil,
	// The seed's step 1 and 2: run-1's "Old answer" held, then run-2.
	"old answer held": {
		{Kind: QueueReply, Raw: reply("run-1", "completed", "output", "Old answer")},
		{Kind: StartRun},
		{Kind: QueueReply, Raw: reply("run-2", "rejected", "reason", "a rejection is no stale completion")},
	},
	"completed at run-2": {
		{Kind: StartRun},
		{Kind: QueueReply, Raw: reply("run-2", "completed", "output", "New answer")},
		{Kind: Deliver, Message: 1},
	},
	"rejected at run-3": {
		{Kind: StartRun},
		{Kind: StartRun},
		{Kind: QueueReply, Raw: reply("run-3", "rejected", "reason", "No")},
		{Kind: Deliver, Message: 1},
	},
	"unresolved at run-2": {
		{Kind: StartRun},
		{Kind: QueueDeadline},
		{Kind: Deliver, Message: 1},
	},
	// A final outcome, then a new run: nothing to duplicate in run-2.
	"pending after a final": {
		{Kind: QueueReply, Raw: Draft(Key{"run-1", "lookup"})},
		{Kind: Deliver, Message: 1},
		{Kind: StartRun},
	},
}

func labWith(t *testing.T, history string) *Lab {
	t.Helper()
	cmds, ok := histories[history]
	if !ok {
		t.Fatalf("no history %q", history)
	}
	l := NewLab()
	for _, c := range cmds {
		do(t, l, c)
	}
	return l
}

func TestPresets(t *testing.T) {
	t.Parallel()
	deadline := func(run string) Injection { return Injection{Kind: DeadlineMessage, Key: Key{run, "lookup"}} }
	raw := func(s string) Injection { return Injection{Kind: ReplyMessage, Raw: s} }
	tests := []struct {
		history string
		preset  Preset
		want    Injection
		err     string // when the preset does not apply
		notice  string // what delivering it now says
	}{
		{"fresh", StaleReply, Injection{}, "preset not applicable: no older run yet (the session is at run-1; a stale message needs a run started before the current one)", ""},
		{"completed at run-2", StaleReply, raw(reply("run-1", "completed", "output", "Stale answer for run-1")), "", NoticeReplyOtherCall},
		{"rejected at run-3", StaleReply, raw(reply("run-2", "completed", "output", "Stale answer for run-2")), "", NoticeReplyOtherCall},
		{"old answer held", StaleReply, raw(reply("run-1", "completed", "output", "Old answer")), "", NoticeReplyOtherCall},
		{"pending after a final", StaleReply, raw(Draft(Key{"run-1", "lookup"})), "", NoticeReplyOtherCall},

		{"fresh", DuplicateFinal, Injection{}, "preset not applicable: no final reply to duplicate yet", ""},
		{"unresolved at run-2", DuplicateFinal, Injection{}, "preset not applicable: no final reply to duplicate yet", ""},
		{"pending after a final", DuplicateFinal, Injection{}, "preset not applicable: no final reply to duplicate yet", ""},
		{"completed at run-2", DuplicateFinal, raw(reply("run-2", "completed", "output", "New answer")), "", NoticeReplyAlreadyFinal},
		{"rejected at run-3", DuplicateFinal, raw(reply("run-3", "rejected", "reason", "No")), "", NoticeReplyAlreadyFinal},

		{"fresh", ContradictoryFinal, Injection{}, "preset not applicable: no final reply to contradict yet", ""},
		{"unresolved at run-2", ContradictoryFinal, Injection{}, "preset not applicable: no final reply to contradict yet", ""},
		{"completed at run-2", ContradictoryFinal, raw(reply("run-2", "rejected", "reason", "Contradictory rejection for run-2")), "", NoticeReplyAlreadyFinal},
		{"rejected at run-3", ContradictoryFinal, raw(reply("run-3", "completed", "output", "Contradictory completion for run-3")), "", NoticeReplyAlreadyFinal},

		{"fresh", WrongCallID, raw(`{"runId":"run-1","callId":"search","kind":"completed","output":"Answer for run-1"}`), "", NoticeReplyOtherCall},
		{"completed at run-2", WrongCallID, raw(`{"runId":"run-2","callId":"search","kind":"completed","output":"Answer for run-2"}`), "", NoticeReplyOtherCall},

		{"fresh", MalformedJSON, raw(`{"runId":"run-1","callId":"lookup","kind":"completed","output":"Answer for run-1"`), "", NoticeInvalidJSON},
		{"unresolved at run-2", MalformedJSON, raw(`{"runId":"run-2","callId":"lookup","kind":"completed","output":"Answer for run-2"`), "", NoticeInvalidJSON},

		{"fresh", WrongShape, raw(`{"runId":"run-1","callId":"lookup","kind":"completed","output":42}`), "", NoticeInvalidReply},
		{"rejected at run-3", WrongShape, raw(`{"runId":"run-3","callId":"lookup","kind":"completed","output":42}`), "", NoticeInvalidReply},

		{"fresh", MarkupOutput, raw(`{"runId":"run-1","callId":"lookup","kind":"completed","output":"<img src=\"x\" onerror=\"alert(1)\"><b>Answer</b>"}`), "", NoticeAcceptedComplete},
		{"completed at run-2", MarkupOutput, raw(`{"runId":"run-2","callId":"lookup","kind":"completed","output":"<img src=\"x\" onerror=\"alert(1)\"><b>Answer</b>"}`), "", NoticeReplyAlreadyFinal},

		{"fresh", EmptyOutput, raw(reply("run-1", "completed", "output", "")), "", NoticeAcceptedComplete},
		{"unresolved at run-2", EmptyOutput, raw(reply("run-2", "completed", "output", "")), "", NoticeAcceptedComplete},

		{"fresh", CurrentDeadline, deadline("run-1"), "", NoticeUnresolved},
		{"unresolved at run-2", CurrentDeadline, deadline("run-2"), "", NoticeStillUnresolved},
		{"completed at run-2", CurrentDeadline, deadline("run-2"), "", NoticeDeadlineFinal},

		{"fresh", StaleDeadline, Injection{}, "preset not applicable: no older run yet (the session is at run-1; a stale message needs a run started before the current one)", ""},
		{"rejected at run-3", StaleDeadline, deadline("run-2"), "", NoticeDeadlineOtherCall},
	}
	// The practice preset draws, sets up and holds (practice_test.go).
	covered := map[Preset]bool{PracticePreset: true}
	for _, tt := range tests {
		covered[tt.preset] = true
		t.Run(tt.history+"/"+tt.preset.String(), func(t *testing.T) {
			l := labWith(t, tt.history)
			got, err := l.Preset(tt.preset)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || !errors.Is(err, ErrPresetNotApplicable) {
					t.Fatalf("Preset = %+v, %v; want error %q", got, err, tt.err)
				}
				before := l.View()
				if _, err := l.Decide(Command{Kind: Inject, By: Instructor, Inject: Injection{Preset: tt.preset}}, Limits{}); err == nil || err.Error() != tt.err {
					t.Fatalf("Decide: %v, want %q", err, tt.err)
				}
				if !reflect.DeepEqual(l.View(), before) {
					t.Fatal("a refused preset changed the session")
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Preset = %+v, %v\nwant %+v", got, err, tt.want)
			}
			// Delivered now, the preset does what it is meant to exercise.
			do(t, l, Command{Kind: Inject, By: Instructor, Inject: Injection{Preset: tt.preset, Deliver: true}})
			v := l.View()
			last := v.Receipts[len(v.Receipts)-1]
			if v.Notice != tt.notice || last.Message != len(v.Queue) || last.Notice != tt.notice || last.By != Instructor || last.From != Instructor {
				t.Fatalf("delivered: notice %q, receipt %+v; want %q by the instructor", v.Notice, last, tt.notice)
			}
			if m := v.Queue[len(v.Queue)-1]; m.From != "instructor" {
				t.Fatalf("injected message from %q", m.From)
			}
		})
	}
	for _, p := range Presets() {
		if !covered[p] {
			t.Errorf("preset %s has no test", p)
		}
	}
}

func TestParsePreset(t *testing.T) {
	t.Parallel()
	for _, p := range Presets() {
		if got, ok := ParsePreset(p.String()); !ok || got != p {
			t.Errorf("ParsePreset(%q) = %v, %v", p, got, ok)
		}
	}
	for _, bad := range []string{"", "StaleReply", "stale", "preset(3)"} {
		if _, ok := ParsePreset(bad); ok {
			t.Errorf("ParsePreset(%q) accepted", bad)
		}
	}
	if len(Presets()) != 11 {
		t.Fatalf("%d presets, want the issue's 10 and practice (issue 53)", len(Presets()))
	}
}

func TestInjectHoldAndDeliver(t *testing.T) {
	t.Parallel()
	l := labWith(t, "completed at run-2")
	do(t, l, Command{Kind: Inject, By: Instructor, Inject: Injection{Kind: DeadlineMessage, Key: Key{"run-9", "x"}}})
	v := l.View()
	if got := v.Queue[1]; got != (MessageView{ID: 2, Kind: "deadline", From: "instructor", Label: "Deadline for run-9/x", Number: "I1"}) {
		t.Fatalf("held = %+v", got)
	}
	if len(v.Receipts) != 1 || v.Notice != NoticeAcceptedComplete {
		t.Fatalf("holding delivered something: %+v", v)
	}
	// The student delivers it later; the receipt is the student's.
	do(t, l, Command{Kind: Deliver, Message: 2})
	if r := l.View().Receipts[1]; r.Message != 2 || r.Notice != NoticeDeadlineOtherCall || r.By != Student || r.From != Instructor || r.Number != "I1" {
		t.Fatalf("receipt %+v", r)
	}
	// A free-form reply delivered now.
	do(t, l, Command{Kind: Inject, By: Instructor, Inject: Injection{Kind: ReplyMessage, Raw: "nope", Deliver: true}})
	if r := l.View().Receipts[2]; r.Message != 3 || r.Notice != NoticeInvalidJSON || r.By != Instructor || r.Number != "I2" {
		t.Fatalf("receipt %+v", r)
	}
}

// TestInjectIsAtomic: an injection that would pass any cap is refused whole.
func TestInjectIsAtomic(t *testing.T) {
	t.Parallel()
	lim := Limits{MaxReplyBytes: 100, MaxHeld: 2, MaxHeldBytes: 150, MaxReceipts: 1}
	tests := []struct {
		name  string
		setup []Command
		in    Injection
		want  string
	}{
		{"receipts full, deliver now", []Command{{Kind: QueueDeadline}, {Kind: Deliver, Message: 1}}, Injection{Preset: CurrentDeadline, Deliver: true}, "receipts limit reached (at most 1)"},
		{"queue full", []Command{{Kind: QueueDeadline}, {Kind: QueueDeadline}}, Injection{Preset: WrongCallID}, "held messages limit reached (at most 2)"},
		{"reply too large", nil, Injection{Kind: ReplyMessage, Raw: strings.Repeat("x", 101)}, "reply size in bytes limit reached (at most 100)"},
		{"held text full", []Command{{Kind: QueueReply, Raw: strings.Repeat("x", 100)}}, Injection{Kind: ReplyMessage, Raw: strings.Repeat("y", 51), Deliver: true}, "held text in bytes limit reached (at most 150)"},
		{"not applicable", nil, Injection{Preset: DuplicateFinal, Deliver: true}, "preset not applicable: no final reply to duplicate yet"},
		{"unknown preset", nil, Injection{Preset: Preset(200)}, "unknown preset 200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRefused(t, tt.setup, lim, Command{Kind: Inject, By: Instructor, Inject: tt.in}, tt.want)
		})
	}
	// Holding is still possible when only receipts are full.
	l := NewLab()
	do(t, l, Command{Kind: QueueDeadline})
	ev, _ := l.Decide(Command{Kind: Deliver, Message: 1}, lim)
	l.Apply(ev)
	if _, err := l.Decide(Command{Kind: Inject, By: Instructor, Inject: Injection{Preset: CurrentDeadline}}, lim); err != nil {
		t.Fatalf("hold with receipts full: %v", err)
	}
}

func TestNormalizeName(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want, err string }{
		{"Ada", "Ada", ""},
		{"  Ada Lovelace \t", "Ada Lovelace", ""},
		{"", "", ""},
		{"   ", "", ""},
		{strings.Repeat("é", 40), strings.Repeat("é", 40), ""},
		{" " + strings.Repeat("x", 40) + " ", strings.Repeat("x", 40), ""},
		{strings.Repeat("x", 41), "", "name length in characters limit reached (at most 40)"},
		{"a\nb", "", "name must not contain control characters"},
		{"a\x00b", "", "name must not contain control characters"},
		// Format characters (Cf) disguise names: a bidi override, a
		// zero-width space, a byte order mark, a soft hyphen.
		{"Ada\u202Egnp.exe", "", "name must not contain invisible format characters (U+202E): they can disguise a name"},
		{"A\u200Bda", "", "name must not contain invisible format characters (U+200B): they can disguise a name"},
		{"\uFEFFAda", "", "name must not contain invisible format characters (U+FEFF): they can disguise a name"},
		{"Ad\u00ADa", "", "name must not contain invisible format characters (U+00AD): they can disguise a name"},
		{"<b>x</b>", "<b>x</b>", ""},
		// What phone keyboards make is a name: an emoji with a joiner, a
		// skin tone, a variation selector, a flag, a subdivision flag,
		// combining accents, a non-joiner in Persian, a no-break space.
		{"Priya 👩‍💻", "Priya 👩‍💻", ""},
		{"Sam 👍🏽", "Sam 👍🏽", ""},
		{"Ana ❤️", "Ana ❤️", ""},
		{"Jo 🇳🇿", "Jo 🇳🇿", ""},
		{"Ewan 🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", "Ewan 🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", ""},
		{"Zoe\u0301", "Zoe\u0301", ""},
		{"می\u200Cخواهم", "می\u200Cخواهم", ""},
		{"Ada\u00A0\u00A0Lovelace", "Ada Lovelace", ""},
		// Joiners and tags out of place, bidi isolates and marks stay refused.
		{"Ada\u200D", "", "name must not contain invisible format characters (U+200D): they can disguise a name"},
		{"\u200DAda", "", "name must not contain invisible format characters (U+200D): they can disguise a name"},
		{"Ada \u200D Bo", "", "name must not contain invisible format characters (U+200D): they can disguise a name"},
		{"Ada\U000E0067", "", "name must not contain invisible format characters (U+E0067): they can disguise a name"},
		{"\u2066Ada\u2069", "", "name must not contain invisible format characters (U+2066): they can disguise a name"},
		{"Ada\u200F", "", "name must not contain invisible format characters (U+200F): they can disguise a name"},
		{"\u3164", "", "name must not contain invisible format characters (U+3164): they can disguise a name"},
		{"a\u2028b", "", "name must not contain control characters"},
		// Too long is refused, never cut: 40 emoji sequences fit, 41 do not;
		// a letter under a pile of marks is refused.
		{strings.Repeat("👩‍💻", 40), strings.Repeat("👩‍💻", 40), ""},
		{strings.Repeat("👩‍💻", 41), "", "name length in characters limit reached (at most 40)"},
		{strings.Repeat("x", 51), "", "name length in characters limit reached (at most 40)"},
		{strings.Repeat("👨‍👩‍👧‍👦", 40), "", "name length in bytes limit reached (at most 640)"},
		{"Z" + strings.Repeat("\u0301", 9), "", "combining marks on one character limit reached (at most 8)"},
	}
	if _, err := NormalizeName("x\u202E"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("a format character: %v, want an ErrInvalidName (reason invalid_name)", err)
	}
	for _, tt := range tests {
		got, err := NormalizeName(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("NormalizeName(%q) = %q, %v; want error %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("NormalizeName(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestRename(t *testing.T) {
	t.Parallel()
	l := NewLab()
	do(t, l, Command{Kind: Rename, Name: "  Ada "})
	if v := l.View(); v.Name != "Ada" || v.Notice != NoticeReady || v.Seq != 1 {
		t.Fatalf("after rename: name %q, notice %q, seq %d", v.Name, v.Notice, v.Seq)
	}
	before := l.View()
	if _, err := l.Decide(Command{Kind: Rename, Name: strings.Repeat("x", 41)}, Limits{}); err == nil {
		t.Fatal("a 41-character name was accepted")
	}
	if !reflect.DeepEqual(l.View(), before) {
		t.Fatal("a refused rename changed the session")
	}
}

// TestNameLength counts what a person counts.
func TestNameLength(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{
		"": 0, "Ada": 3, "Priya 👩‍💻": 7, "👍🏽": 1, "❤️": 1, "🇳🇿🇫🇷": 2, "🇳": 1, "é": 1, "e\u0301": 1,
		"👨‍👩‍👧‍👦": 1, "می\u200Cخواهم": 7, "🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F": 1,
	} {
		if got := NameLength(in); got != want {
			t.Errorf("NameLength(%q) = %d, want %d", in, got, want)
		}
	}
}

// FuzzNormalizeName: whatever the input, a name that passes is valid
// UTF-8, within both caps, trimmed, without control, bidi or stray
// invisible characters, and normalizing it again changes nothing; a
// refusal is an ErrInvalidName or a *LimitError, never anything else.
func FuzzNormalizeName(f *testing.F) {
	for _, s := range []string{"Ada", "Priya 👩‍💻", "Sam 👍🏽", "Jo 🇳🇿", "a\u202Eb", "\u200D", "x\u0301\u0301", " a  b ", "\xff", strings.Repeat("x", 41)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := NormalizeName(in)
		if err != nil {
			var le *LimitError
			if !errors.Is(err, ErrInvalidName) && !errors.As(err, &le) {
				t.Fatalf("NormalizeName(%q): unexpected error %v", in, err)
			}
			return
		}
		if !utf8.ValidString(got) || len(got) > MaxNameBytes || NameLength(got) > MaxNameLength || strings.TrimSpace(got) != got {
			t.Fatalf("NormalizeName(%q) = %q: invalid, too long or untrimmed", in, got)
		}
		for _, r := range got {
			if unicode.IsControl(r) || (unicode.Is(unicode.Cf, r) && r != '\u200D' && r != '\u200C' && (r < 0xE0020 || r > 0xE007F)) || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) {
				t.Fatalf("NormalizeName(%q) = %q keeps %U", in, got, r)
			}
		}
		if again, err := NormalizeName(got); err != nil || again != got {
			t.Fatalf("NormalizeName(%q) = %q, but again %q, %v", in, got, again, err)
		}
	})
}
