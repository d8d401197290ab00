package jsjson

import (
	"encoding/json"
	"os"
	"testing"
)

// vector is one entry of testdata/vectors.json, written by gen_vectors.mjs
// from what node's JSON.parse did with the input.
type vector struct {
	Input   string  `json:"input"`
	OK      bool    `json:"ok"`
	Kind    string  `json:"kind"`
	Text    *string `json:"text"`
	Members map[string]struct {
		Kind string  `json:"kind"`
		Text *string `json:"text"`
	} `json:"members"`
}

func loadVectors(tb testing.TB) []vector {
	data, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		tb.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(data, &vs); err != nil {
		tb.Fatal(err)
	}
	return vs
}

// TestVectors checks every golden vector, parsing each input both as a string
// and as bytes.
func TestVectors(t *testing.T) {
	t.Parallel()
	vs := loadVectors(t)
	if len(vs) < 500 {
		t.Fatalf("only %d vectors", len(vs))
	}
	valid := 0
	for i, vec := range vs {
		v, err := parseBoth(t, vec.Input)
		if (err == nil) != vec.OK {
			t.Errorf("vector %d %.100q: JSON.parse ok=%v, Parse error %v", i, vec.Input, vec.OK, err)
			continue
		}
		if err != nil {
			continue
		}
		valid++
		if v.Kind.String() != vec.Kind {
			t.Errorf("vector %d %.100q: kind %v, JSON.parse %s", i, vec.Input, v.Kind, vec.Kind)
			continue
		}
		if vec.Text != nil && v.Text != *vec.Text {
			t.Errorf("vector %d %.100q: text %q, JSON.parse %q", i, vec.Input, v.Text, *vec.Text)
		}
		if v.Kind != Object {
			continue
		}
		if len(v.Members()) != len(vec.Members) {
			t.Errorf("vector %d %.100q: %d members %v, JSON.parse %d", i, vec.Input, len(v.Members()), v.Members(), len(vec.Members))
		}
		for k, want := range vec.Members {
			got, ok := v.Member(k)
			switch {
			case !ok:
				t.Errorf("vector %d %.100q: member %q missing", i, vec.Input, k)
			case got.Kind.String() != want.Kind:
				t.Errorf("vector %d %.100q: member %q kind %v, JSON.parse %s", i, vec.Input, k, got.Kind, want.Kind)
			case want.Text != nil && got.Text != *want.Text:
				t.Errorf("vector %d %.100q: member %q text %q, JSON.parse %q", i, vec.Input, k, got.Text, *want.Text)
			}
		}
	}
	t.Logf("%d vectors, %d valid", len(vs), valid)
}

// TestStringifyVectors checks AppendString against JSON.stringify.
func TestStringifyVectors(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/stringify.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []struct{ S, Out string }
	if err := json.Unmarshal(data, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) < 200 {
		t.Fatalf("only %d stringify vectors", len(vs))
	}
	for _, vec := range vs {
		if got := string(AppendString(nil, vec.S)); got != vec.Out {
			t.Errorf("AppendString(%q) = %s, JSON.stringify %s", vec.S, got, vec.Out)
		}
	}
}
