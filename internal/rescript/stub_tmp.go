package rescript

import (
	"context"
	"errors"

	"github.com/toolcall-lab/lab/model"
)

type Output struct {
	JS          string
	Diagnostics []model.Diagnostic
	Refused     bool
}

type Error struct {
	Kind    int
	Message string
}

func (e *Error) Error() string { return e.Message }

type Compiler struct{}

func (c *Compiler) Compile(ctx context.Context, source string) (Output, error) { return Output{}, nil }
func (c *Compiler) Version() string                                            { return "" }

var ErrNotFound = errors.New("not found")

func Find(setting string, lookPath func(string) (string, error)) (*Compiler, error) {
	return nil, ErrNotFound
}
